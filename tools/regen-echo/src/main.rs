//! Regenerates `tests/support/src/echo_pb.rs` (checked in) from `echo.proto`.
fn main() {
    let protoc = protoc_bin_vendored::protoc_bin_path().expect("vendored protoc");
    // SAFETY: single-threaded at this point; nothing else reads the environment.
    unsafe { std::env::set_var("PROTOC", protoc) };
    tonic_prost_build::configure()
        .out_dir("../../tests/support/src")
        .compile_protos(&["../../tests/support/echo.proto"], &["../../tests/support"])
        .expect("generate echo service");
    std::fs::rename("../../tests/support/src/hotpath.echo.rs", "../../tests/support/src/echo_pb.rs")
        .expect("rename generated file");
}
