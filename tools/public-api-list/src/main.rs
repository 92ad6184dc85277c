//! Prints the public API of the crate whose manifest is the first argument,
//! with every feature, one item per line (sorted; blanket, auto-trait and
//! auto-derived impls left out), as `cargo public-api -sss` prints it. The
//! rustdoc JSON is built with the toolchain named by the second argument.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(manifest), Some(toolchain), Some(target_dir)) = (args.next(), args.next(), args.next())
    else {
        eprintln!("usage: public-api-list <Cargo.toml> <toolchain> <target dir>");
        return ExitCode::from(2);
    };
    let json = match rustdoc_json::Builder::default()
        .toolchain(toolchain)
        .manifest_path(manifest)
        .target_dir(target_dir)
        .all_features(true)
        .quiet(true)
        .build()
    {
        Ok(json) => json,
        Err(error) => {
            eprintln!("public-api-list: building the rustdoc JSON failed: {error}");
            return ExitCode::FAILURE;
        }
    };
    let api = match public_api::Builder::from_rustdoc_json(&json)
        .omit_blanket_impls(true)
        .omit_auto_trait_impls(true)
        .omit_auto_derived_impls(true)
        .build()
    {
        Ok(api) => api,
        Err(error) => {
            eprintln!("public-api-list: reading {}: {error}", json.display());
            return ExitCode::FAILURE;
        }
    };
    for item in api.items() {
        println!("{item}");
    }
    ExitCode::SUCCESS
}
