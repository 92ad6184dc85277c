//! Binary log filter strings (`GRPC_BINARY_LOG_FILTER`): accepted and
//! refused exactly where grpc-go accepts and refuses them, and every
//! lookup as grpc-go's, against a literal port of grpc-go's parser (its
//! own regular expressions) from the crate's tests.

use tonic_hotpath::binlog::{Filter, LogLimits};

#[path = "../../tests/binlog/grpc_go_filter.rs"]
mod go;

use super::input::Input;

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let Ok(config) = std::str::from_utf8(input.until(b'\n')) else {
        return;
    };
    let ours = Filter::parse(config);
    let theirs = go::new_logger_from_config_string(config);
    assert_eq!(ours.is_ok(), theirs.is_some(), "{config:?}: {ours:?}");
    let (Ok(ours), Some(theirs)) = (ours, theirs) else {
        return;
    };
    let clause_paths = config.split(',').flat_map(|clause| {
        let name = clause
            .trim_start_matches('-')
            .split('{')
            .next()
            .unwrap_or("");
        [
            format!("/{clause}"),
            format!("/{name}"),
            format!("/{}", name.replace('*', "x")),
        ]
    });
    let given = input
        .rest()
        .split(|&b| b == b'\n')
        .filter_map(|path| std::str::from_utf8(path).ok())
        .map(str::to_owned);
    for path in clause_paths.chain(given) {
        let want = theirs
            .get_method_logger(&path)
            .map(|(header, message)| LogLimits { header, message });
        assert_eq!(ours.lookup(&path), want, "{config:?} {path:?}");
    }
}
