//! A literal port of grpc-go's `internal/binarylog` parser and lookup
//! (env_config.go, binarylog.go, grpcutil.ParseMethod), its regular
//! expressions run by the `regex` crate: the same leftmost-first semantics
//! as Go's RE2, with `\w` and `\d` spelled out as Go's ASCII classes.
//!
//! Shared by `tests/binlog/filter.rs` and the fuzz target `binlog_filter`.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;

const MAX_UINT: u64 = u64::MAX;

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap()
}

// `^([\w./]+)/((?:\w+)|[*])(.+)?$`
static LONG_METHOD: LazyLock<Regex> =
    LazyLock::new(|| regex(r"^([0-9A-Za-z_./]+)/((?:[0-9A-Za-z_]+)|[*])(.+)?$"));
// `(?::(\d+))?`
const OPTIONAL_LENGTH: &str = r"(?::([0-9]+))?";
static HEADER: LazyLock<Regex> = LazyLock::new(|| regex(&format!(r"^\{{h{OPTIONAL_LENGTH}\}}$")));
static MESSAGE: LazyLock<Regex> = LazyLock::new(|| regex(&format!(r"^\{{m{OPTIONAL_LENGTH}\}}$")));
static HEADER_MESSAGE: LazyLock<Regex> =
    LazyLock::new(|| regex(&format!(r"^\{{h{OPTIONAL_LENGTH};m{OPTIONAL_LENGTH}\}}$")));

#[derive(Default, Debug)]
pub struct Logger {
    all: Option<(u64, u64)>,
    services: HashMap<String, (u64, u64)>,
    methods: HashMap<String, (u64, u64)>,
    blacklist: HashSet<String>,
}

/// NewLoggerFromConfigString: `None` where grpc-go returns nil.
pub fn new_logger_from_config_string(s: &str) -> Option<Logger> {
    if s.is_empty() {
        return None;
    }
    let mut logger = Logger::default();
    for method in s.split(',') {
        logger.fill_method_logger_with_config_string(method).ok()?;
    }
    Some(logger)
}

impl Logger {
    fn fill_method_logger_with_config_string(&mut self, config: &str) -> Result<(), ()> {
        if config.is_empty() {
            return Err(());
        }
        if let Some(rest) = config.strip_prefix('-') {
            let (s, m, suffix) = parse_method_config_and_suffix(rest)?;
            if m == "*" || !suffix.is_empty() {
                return Err(());
            }
            return self.set_blacklist(format!("{s}/{m}"));
        }
        if let Some(rest) = config.strip_prefix('*') {
            let limits = parse_header_message_length_config(rest)?;
            if self.all.is_some() {
                return Err(());
            }
            self.all = Some(limits);
            return Ok(());
        }
        let (s, m, suffix) = parse_method_config_and_suffix(config)?;
        let limits = parse_header_message_length_config(suffix)?;
        if m == "*" {
            if self.services.contains_key(s) {
                return Err(());
            }
            self.services.insert(s.to_owned(), limits);
        } else {
            let method = format!("{s}/{m}");
            if self.blacklist.contains(&method) || self.methods.contains_key(&method) {
                return Err(());
            }
            self.methods.insert(method, limits);
        }
        Ok(())
    }

    fn set_blacklist(&mut self, method: String) -> Result<(), ()> {
        if self.blacklist.contains(&method) || self.methods.contains_key(&method) {
            return Err(());
        }
        self.blacklist.insert(method);
        Ok(())
    }

    /// GetMethodLogger: the truncating logger's limits, `None` for nil.
    pub fn get_method_logger(&self, method_name: &str) -> Option<(u64, u64)> {
        // grpcutil.ParseMethod.
        let method_name = method_name.strip_prefix('/')?;
        let pos = method_name.rfind('/')?;
        let (s, m) = (&method_name[..pos], &method_name[pos + 1..]);
        if let Some(&limits) = self.methods.get(&format!("{s}/{m}")) {
            return Some(limits);
        }
        if self.blacklist.contains(&format!("{s}/{m}")) {
            return None;
        }
        if let Some(&limits) = self.services.get(s) {
            return Some(limits);
        }
        self.all
    }
}

fn parse_method_config_and_suffix(c: &str) -> Result<(&str, &str, &str), ()> {
    let captures = LONG_METHOD.captures(c).ok_or(())?;
    let group = |i| captures.get(i).map_or("", |m| m.as_str());
    Ok((group(1), group(2), group(3)))
}

fn parse_uint(s: &str) -> Result<u64, ()> {
    s.parse().map_err(|_| ())
}

fn parse_header_message_length_config(c: &str) -> Result<(u64, u64), ()> {
    if c.is_empty() {
        return Ok((MAX_UINT, MAX_UINT));
    }
    if let Some(captures) = HEADER.captures(c) {
        return match captures.get(1) {
            Some(s) => Ok((parse_uint(s.as_str())?, 0)),
            None => Ok((MAX_UINT, 0)),
        };
    }
    if let Some(captures) = MESSAGE.captures(c) {
        return match captures.get(1) {
            Some(s) => Ok((0, parse_uint(s.as_str())?)),
            None => Ok((0, MAX_UINT)),
        };
    }
    if let Some(captures) = HEADER_MESSAGE.captures(c) {
        let length = |i| {
            captures
                .get(i)
                .map_or(Ok(MAX_UINT), |s| parse_uint(s.as_str()))
        };
        return Ok((length(1)?, length(2)?));
    }
    Err(())
}

#[test]
fn the_port_passes_grpc_go_s_own_cases() {
    let logger = new_logger_from_config_string("*{h:1;m:2},s1/*{h},s1/m1{m},s1/m2{h;m}").unwrap();
    assert_eq!(logger.all, Some((1, 2)));
    assert_eq!(logger.services["s1"], (MAX_UINT, 0));
    assert_eq!(logger.methods["s1/m1"], (0, MAX_UINT));
    assert_eq!(logger.methods["s1/m2"], (MAX_UINT, MAX_UINT));
    for config in [
        "",
        "*{}",
        "s/m,*{}",
        "s/m,s/m{a}",
        "s/m,-s/m",
        "-s/m,s/m",
        "s/m,s/m",
        "*,*{h:1;m:1}",
    ] {
        assert!(
            new_logger_from_config_string(config).is_none(),
            "{config:?}"
        );
    }
    let split = |c| parse_method_config_and_suffix(c).unwrap();
    assert_eq!(split("p.s/m{h,m}"), ("p.s", "m", "{h,m}"));
    assert_eq!(split("s/*m"), ("s", "*", "m"));
    assert_eq!(split("s/**"), ("s", "*", "*"));
    assert_eq!(split("a/b/c{h}"), ("a/b", "c", "{h}"));
    assert!(parse_method_config_and_suffix("*/m").is_err());
    assert!(parse_method_config_and_suffix("s/m\n").is_err());
    assert_eq!(
        parse_header_message_length_config("{h:314;m}"),
        Ok((314, MAX_UINT))
    );
    assert_eq!(parse_header_message_length_config("{m:213}"), Ok((0, 213)));
    assert!(parse_header_message_length_config("{h;m;b}").is_err());
}
