//! `binlog::Filter`: every case of grpc-go's `internal/binarylog` tests
//! (`env_config_test.go`, `binarylog_test.go`, `regexp_test.go`) as tables
//! with the same limits, the lookup order, `from_env`, no allocation per
//! lookup, and a differential proptest against a literal port of grpc-go's
//! parser (its regular expressions, run by the `regex` crate).

use std::hint::black_box;
use std::process::Command;

use proptest::prelude::*;
use tonic_hotpath::binlog::{Filter, FilterError, LogLimits};

use support::alloc_count;

const MAX: u64 = LogLimits::UNLIMITED;

fn limits(header: u64, message: u64) -> Option<LogLimits> {
    Some(LogLimits { header, message })
}

fn parse(config: &str) -> Filter {
    Filter::parse(config).unwrap_or_else(|err| panic!("{config:?}: {err}"))
}

fn parse_err(config: &str) -> FilterError {
    match Filter::parse(config) {
        Ok(filter) => panic!("{config:?} was accepted: {filter:?}"),
        Err(err) => err,
    }
}

/// grpc-go's nine suffixes with the limits they give (TestParseHeaderMessageLengthConfig
/// and the tables of the three TestFillMethodLoggerWithConfigString* tests).
const SUFFIXES: [(&str, u64, u64); 9] = [
    ("", MAX, MAX),
    ("{h}", MAX, 0),
    ("{h:314}", 314, 0),
    ("{m}", 0, MAX),
    ("{m:213}", 0, 213),
    ("{h;m}", MAX, MAX),
    ("{h:314;m}", 314, MAX),
    ("{h;m:213}", MAX, 213),
    ("{h:314;m:213}", 314, 213),
];

#[test]
fn suffixes_on_all() {
    // TestFillMethodLoggerWithConfigStringGlobal.
    for (suffix, header, message) in SUFFIXES {
        let filter = parse(&format!("*{suffix}"));
        for method in ["/service/method", "/p.s/m", "/a/b/c"] {
            assert_eq!(filter.lookup(method), limits(header, message), "*{suffix}");
        }
    }
}

#[test]
fn suffixes_on_a_service() {
    // TestFillMethodLoggerWithConfigStringPerService.
    for (suffix, header, message) in SUFFIXES {
        let config = format!("service/*{suffix}");
        let filter = parse(&config);
        assert_eq!(
            filter.lookup("/service/method"),
            limits(header, message),
            "{config}"
        );
        assert_eq!(
            filter.lookup("/service/other"),
            limits(header, message),
            "{config}"
        );
        assert_eq!(filter.lookup("/service2/method"), None, "{config}");
    }
}

#[test]
fn suffixes_on_a_method() {
    // TestFillMethodLoggerWithConfigStringPerMethod.
    for (suffix, header, message) in SUFFIXES {
        let config = format!("service/method{suffix}");
        let filter = parse(&config);
        assert_eq!(
            filter.lookup("/service/method"),
            limits(header, message),
            "{config}"
        );
        assert_eq!(filter.lookup("/service/method2"), None, "{config}");
        assert_eq!(filter.lookup("/service2/method"), None, "{config}");
    }
}

#[test]
fn several_clauses() {
    // TestNewLoggerFromConfigString.
    let filter = parse("*{h:1;m:2},s1/*{h},s1/m1{m},s1/m2{h;m}");
    assert_eq!(filter.lookup("/s2/m"), limits(1, 2));
    assert_eq!(filter.lookup("/s1/m"), limits(MAX, 0));
    assert_eq!(filter.lookup("/s1/m1"), limits(0, MAX));
    assert_eq!(filter.lookup("/s1/m2"), limits(MAX, MAX));
}

#[test]
fn exclusions() {
    // TestFillMethodLoggerWithConfigStringBlacklist.
    for method in ["p.s/m", "service/method"] {
        let filter = parse(&format!("-{method}"));
        assert_eq!(filter.lookup(&format!("/{method}")), None);
        let filter = parse(&format!("*,-{method}"));
        assert_eq!(filter.lookup(&format!("/{method}")), None);
        assert_eq!(
            filter.lookup(&format!("/{method}2")),
            Some(LogLimits::full())
        );
    }
}

#[test]
fn most_specific_clause_decides() {
    // TestGetMethodLogger.
    let cases: &[(&str, &str, u64, u64)] = &[
        // `*`.
        ("*{h:12;m:23}", "/s/m", 12, 23),
        // `service/*`.
        ("*,s/*{h:12;m:23}", "/s/m", 12, 23),
        // `service/method`.
        ("*{h;m},s/m{h:12;m:23}", "/s/m", 12, 23),
        ("*{h;m},s/*{h:314;m},s/m{h:12;m:23}", "/s/m", 12, 23),
        ("*{h;m},s/*{h:12;m:23},s/m", "/s/m", MAX, MAX),
        // `service/*`.
        ("*{h;m},s/*{h:12;m:23},s/m1", "/s/m", 12, 23),
        ("*{h;m},s1/*,s/m{h:12;m:23}", "/s/m", 12, 23),
        // With an exclusion.
        ("*{h:12;m:23},-s/m1", "/s/m", 12, 23),
        // And the order does not matter (clauses never override).
        ("s/m{h:12;m:23},s/*{h:314;m},*{h;m}", "/s/m", 12, 23),
        ("s/m1,s/*{h:12;m:23},*{h;m}", "/s/m", 12, 23),
    ];
    for &(config, method, header, message) in cases {
        assert_eq!(
            parse(config).lookup(method),
            limits(header, message),
            "{config}"
        );
    }
}

#[test]
fn methods_not_logged() {
    // TestGetMethodLoggerOff.
    let cases: &[(&str, &str)] = &[
        // Not named.
        ("s1/m", "/s/m"),
        ("s/m1", "/s/m"),
        ("s1/*", "/s/m"),
        ("s1/*,s/m1", "/s/m"),
        // Excluded.
        ("*,-s/m", "/s/m"),
        ("s/*,-s/m", "/s/m"),
        ("-s/m,s/*", "/s/m"),
        // Excluded beats `*` and `service/*` whatever their suffix.
        ("*{h:1;m:1},s/*{m},-s/m", "/s/m"),
    ];
    for &(config, method) in cases {
        assert_eq!(parse(config).lookup(method), None, "{config}");
    }
}

#[test]
fn lookup_order() {
    let filter = parse("*{h:1;m:1},s/*{h:2;m:2},s/m{h:3;m:3},-s/x,-t/x");
    assert_eq!(filter.lookup("/s/m"), limits(3, 3), "method");
    assert_eq!(filter.lookup("/s/x"), None, "exclusion beats service/*");
    assert_eq!(filter.lookup("/t/x"), None, "exclusion beats *");
    assert_eq!(filter.lookup("/s/y"), limits(2, 2), "service/*");
    assert_eq!(filter.lookup("/t/y"), limits(1, 1), "*");
    assert_eq!(parse("s/*").lookup("/t/y"), None, "no clause");
}

#[test]
fn request_paths() {
    // grpc-go's grpcutil.ParseMethod: a leading '/', and the service is
    // everything up to the last '/' (which may leave either part empty).
    let all = Filter::all();
    for path in ["/s/m", "/p.s/m", "/a/b/c", "//", "/s/", "//m", "/s/m/"] {
        assert_eq!(all.lookup(path), Some(LogLimits::full()), "{path:?}");
    }
    for path in ["", "/", "s/m", "/s", "/sm", "pkg.Svc/Get", " /s/m"] {
        assert_eq!(all.lookup(path), None, "{path:?}");
    }

    // A service may hold '/': its clauses split at the last '/', as paths do.
    let filter = parse("a/b/*{h},a/b/c{m},-a/b/d");
    assert_eq!(filter.lookup("/a/b/c"), limits(0, MAX));
    assert_eq!(filter.lookup("/a/b/e"), limits(MAX, 0));
    assert_eq!(filter.lookup("/a/b/d"), None);
    assert_eq!(filter.lookup("/a/c"), None);
    assert_eq!(filter.lookup("/a/b/c/d"), None);

    // The empty method of "/s/" falls to `s/*` (no clause can name it).
    assert_eq!(parse("s/*").lookup("/s/"), Some(LogLimits::full()));
    assert_eq!(parse("s/m").lookup("/s/"), None);

    // A clause with a leading '/' is accepted, as by grpc-go; its service
    // is "/s", which only the path "//s/m" has.
    let filter = parse("/s/m");
    assert_eq!(filter.lookup("/s/m"), None);
    assert_eq!(filter.lookup("//s/m"), Some(LogLimits::full()));

    // Names are matched exactly: case and all.
    let filter = parse("pkg.Svc/Get");
    assert_eq!(filter.lookup("/pkg.Svc/Get"), Some(LogLimits::full()));
    for path in [
        "/pkg.svc/Get",
        "/pkg.Svc/get",
        "/pkg.Svc/Get2",
        "/Svc/Get",
        "/xpkg.Svc/Get",
    ] {
        assert_eq!(filter.lookup(path), None, "{path:?}");
    }
}

#[test]
fn all_is_star() {
    let star = parse("*");
    for path in ["/s/m", "/a/b/c", "//", "/", "s/m"] {
        assert_eq!(Filter::all().lookup(path), star.lookup(path), "{path:?}");
    }
    assert_eq!(
        LogLimits::full(),
        LogLimits {
            header: u64::MAX,
            message: u64::MAX
        }
    );
}

#[test]
fn split_like_grpc_go() {
    // TestParseMethodConfigAndSuffix and TestLongMethodConfigRegexp: where
    // grpc-go's regular expression splits service, method and suffix. A
    // suffix that is not valid shows in the error, which names it.
    // The limits of an accepted clause, or the suffix named by its error.
    type Want = Result<(u64, u64), &'static str>;
    let cases: &[(&str, Want)] = &[
        ("p.s/m", Ok((MAX, MAX))),
        ("p.s/*", Ok((MAX, MAX))),
        ("p.s/m{h}", Ok((MAX, 0))),
        ("p.s/m{m}", Ok((0, MAX))),
        ("p.s/m{h:123}", Ok((123, 0))),
        ("p.s/m{m:123}", Ok((0, 123))),
        ("p.s/*{h}", Ok((MAX, 0))),
        ("p.s/m{}", Err("{}")),
        ("p.s/m{invalidsuffix}", Err("{invalidsuffix}")),
        ("p.s/*{invalidsuffix}", Err("{invalidsuffix}")),
        ("s/m*", Err("*")),
        ("s/*m", Err("m")),
        ("s/**", Err("*")),
        // "p.s/m{h,m}" and "p.s/m{h:123,m:123}": the ',' ends the clause.
        ("p.s/m{h,m}", Err("{h")),
        ("p.s/m{h:123,m:123}", Err("{h:123")),
        // Others: the method is the longest word, the service as long as can be.
        ("s/m.x", Err(".x")),
        ("s/m/", Err("/")),
        ("s/m-x", Err("-x")),
        ("a.b/c_1/D2", Ok((MAX, MAX))),
    ];
    for &(config, want) in cases {
        match (Filter::parse(config), want) {
            (Ok(filter), Ok((header, message))) => {
                let method = format!("/{}", config.split('{').next().unwrap()).replace('*', "x");
                assert_eq!(filter.lookup(&method), limits(header, message), "{config}");
            }
            (Err(FilterError::Suffix { clause, suffix }), Err(want)) => {
                assert_eq!(suffix, want, "{config}");
                assert_eq!(clause, config.split(',').next().unwrap(), "{config}");
            }
            (got, want) => panic!("{config:?}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn refused_like_grpc_go() {
    // Every invalid case of TestNewLoggerFromConfigStringInvalid,
    // TestFillMethodLoggerWithConfigStringInvalid,
    // TestParseMethodConfigAndSuffixInvalid (as clauses),
    // TestParseHeaderMessageLengthConfigInvalid and the regexp tests' "no
    // match" cases (as suffixes of "s/m"), with the error each gives here.
    fn clause(clause: &str) -> String {
        clause.to_owned()
    }
    let suffix = |c: &str, s: &str| FilterError::Suffix {
        clause: clause(c),
        suffix: clause(s),
    };
    let cases: Vec<(&str, FilterError)> = vec![
        // TestNewLoggerFromConfigStringInvalid.
        ("", FilterError::Empty),
        ("*{}", suffix("*{}", "{}")),
        ("s/m,*{}", suffix("*{}", "{}")),
        ("s/m,s/m{a}", suffix("s/m{a}", "{a}")),
        (
            "s/m,-s/m",
            FilterError::LoggedAndExcluded {
                clause: clause("-s/m"),
                method: clause("s/m"),
            },
        ),
        (
            "-s/m,s/m",
            FilterError::LoggedAndExcluded {
                clause: clause("s/m"),
                method: clause("s/m"),
            },
        ),
        (
            "s/m,s/m",
            FilterError::DuplicateMethod {
                clause: clause("s/m"),
                method: clause("s/m"),
            },
        ),
        (
            "s/m,s/m{h:1;m:1}",
            FilterError::DuplicateMethod {
                clause: clause("s/m{h:1;m:1}"),
                method: clause("s/m"),
            },
        ),
        (
            "s/m{h:1;m:1},s/m",
            FilterError::DuplicateMethod {
                clause: clause("s/m"),
                method: clause("s/m"),
            },
        ),
        (
            "-s/m,-s/m",
            FilterError::DuplicateExclusion {
                clause: clause("-s/m"),
                method: clause("s/m"),
            },
        ),
        (
            "s/*,s/*{h:1;m:1}",
            FilterError::DuplicateService {
                clause: clause("s/*{h:1;m:1}"),
                service: clause("s"),
            },
        ),
        (
            "*,*{h:1;m:1}",
            FilterError::DuplicateAll {
                clause: clause("*{h:1;m:1}"),
            },
        ),
        // TestFillMethodLoggerWithConfigStringInvalid ("" is above).
        (
            "{}",
            FilterError::Syntax {
                clause: clause("{}"),
            },
        ),
        ("p.s/m{}", suffix("p.s/m{}", "{}")),
        ("p.s/m{a}", suffix("p.s/m{a}", "{a}")),
        ("p.s/m*", suffix("p.s/m*", "*")),
        ("p.s/**", suffix("p.s/**", "*")),
        (
            "*/m",
            FilterError::AnyServiceMethod {
                clause: clause("*/m"),
            },
        ),
        (
            "-p.s/*",
            FilterError::ExcludedService {
                clause: clause("-p.s/*"),
            },
        ),
        (
            "-p.s/m{h}",
            FilterError::ExclusionSuffix {
                clause: clause("-p.s/m{h}"),
            },
        ),
        // TestParseMethodConfigAndSuffixInvalid.
        (
            "*/m{}",
            FilterError::AnyServiceMethod {
                clause: clause("*/m{}"),
            },
        ),
        // TestParseHeaderMessageLengthConfigInvalid.
        ("s/m{h;a}", suffix("s/m{h;a}", "{h;a}")),
        ("s/m{h;m;b}", suffix("s/m{h;m;b}", "{h;m;b}")),
        // TestHeaderConfigRegexp / TestMessageConfigRegexp: "{a:b}".
        ("s/m{a:b}", suffix("s/m{a:b}", "{a:b}")),
        // Further: empty clauses.
        ("s/m,", FilterError::EmptyClause { position: 2 }),
        (",s/m", FilterError::EmptyClause { position: 1 }),
        ("s/m,,t/n", FilterError::EmptyClause { position: 2 }),
        (",", FilterError::EmptyClause { position: 1 }),
        // Not `service/method`.
        (
            "s",
            FilterError::Syntax {
                clause: clause("s"),
            },
        ),
        (
            "s/",
            FilterError::Syntax {
                clause: clause("s/"),
            },
        ),
        (
            "/m",
            FilterError::Syntax {
                clause: clause("/m"),
            },
        ),
        (
            "s/.m",
            FilterError::Syntax {
                clause: clause("s/.m"),
            },
        ),
        (
            "my-svc/m",
            FilterError::Syntax {
                clause: clause("my-svc/m"),
            },
        ),
        (
            "sé/m",
            FilterError::Syntax {
                clause: clause("sé/m"),
            },
        ),
        (
            " s/m",
            FilterError::Syntax {
                clause: clause(" s/m"),
            },
        ),
        (
            "s/m, t/n",
            FilterError::Syntax {
                clause: clause(" t/n"),
            },
        ),
        (
            "-",
            FilterError::Syntax {
                clause: clause("-"),
            },
        ),
        (
            "-*",
            FilterError::Syntax {
                clause: clause("-*"),
            },
        ),
        (
            "--s/m",
            FilterError::Syntax {
                clause: clause("--s/m"),
            },
        ),
        (
            "-*/m",
            FilterError::AnyServiceMethod {
                clause: clause("-*/m"),
            },
        ),
        (
            "*/*",
            FilterError::AnyServiceMethod {
                clause: clause("*/*"),
            },
        ),
        // No newline anywhere (Go's `.` and `$`).
        (
            "s/m\n",
            FilterError::Syntax {
                clause: clause("s/m\n"),
            },
        ),
        (
            "s/m{h}\n",
            FilterError::Syntax {
                clause: clause("s/m{h}\n"),
            },
        ),
        (
            "-s/m\n",
            FilterError::Syntax {
                clause: clause("-s/m\n"),
            },
        ),
        ("*\n", suffix("*\n", "\n")),
        // Suffixes.
        ("s/m ", suffix("s/m ", " ")),
        ("s/mé", suffix("s/mé", "é")),
        ("*x", suffix("*x", "x")),
        ("**", suffix("**", "*")),
        ("s/m{", suffix("s/m{", "{")),
        ("s/m}", suffix("s/m}", "}")),
        ("s/m{h:}", suffix("s/m{h:}", "{h:}")),
        ("s/m{h:-1}", suffix("s/m{h:-1}", "{h:-1}")),
        ("s/m{h:+1}", suffix("s/m{h:+1}", "{h:+1}")),
        ("s/m{h: 1}", suffix("s/m{h: 1}", "{h: 1}")),
        ("s/m{h:0x10}", suffix("s/m{h:0x10}", "{h:0x10}")),
        ("s/m{h:1_0}", suffix("s/m{h:1_0}", "{h:1_0}")),
        ("s/m{h:١}", suffix("s/m{h:١}", "{h:١}")),
        ("s/m{H}", suffix("s/m{H}", "{H}")),
        ("s/m{m;h}", suffix("s/m{m;h}", "{m;h}")),
        ("s/m{h;}", suffix("s/m{h;}", "{h;}")),
        ("s/m{;m}", suffix("s/m{;m}", "{;m}")),
        ("s/m{h}{m}", suffix("s/m{h}{m}", "{h}{m}")),
        ("s/m{h}x", suffix("s/m{h}x", "{h}x")),
        ("s/m{hm}", suffix("s/m{hm}", "{hm}")),
        ("s/m{h:1:2}", suffix("s/m{h:1:2}", "{h:1:2}")),
        // Numbers: up to u64::MAX; a bad suffix is reported before a big number.
        (
            "s/m{h:18446744073709551616}",
            FilterError::Number {
                clause: clause("s/m{h:18446744073709551616}"),
                number: clause("18446744073709551616"),
            },
        ),
        (
            "*{h;m:99999999999999999999}",
            FilterError::Number {
                clause: clause("*{h;m:99999999999999999999}"),
                number: clause("99999999999999999999"),
            },
        ),
        (
            "s/m{h:99999999999999999999;x}",
            suffix(
                "s/m{h:99999999999999999999;x}",
                "{h:99999999999999999999;x}",
            ),
        ),
        (
            "s/m{x;m:99999999999999999999}",
            suffix(
                "s/m{x;m:99999999999999999999}",
                "{x;m:99999999999999999999}",
            ),
        ),
        // The first bad clause is the one reported.
        ("s/m{x},t/n{y}", suffix("s/m{x}", "{x}")),
        (
            "s/m,s/m,t/n{y}",
            FilterError::DuplicateMethod {
                clause: clause("s/m"),
                method: clause("s/m"),
            },
        ),
        // Exclusion: a bad shape, then '*', then a suffix, as grpc-go checks.
        (
            "-s/*{h}",
            FilterError::ExcludedService {
                clause: clause("-s/*{h}"),
            },
        ),
        (
            "-s/m{x}",
            FilterError::ExclusionSuffix {
                clause: clause("-s/m{x}"),
            },
        ),
        // Same method, service or `*` in any form.
        (
            "*{h},*{m}",
            FilterError::DuplicateAll {
                clause: clause("*{m}"),
            },
        ),
        (
            "a/b/*,a/b/*",
            FilterError::DuplicateService {
                clause: clause("a/b/*"),
                service: clause("a/b"),
            },
        ),
        (
            "a/b/c{h},-a/b/c",
            FilterError::LoggedAndExcluded {
                clause: clause("-a/b/c"),
                method: clause("a/b/c"),
            },
        ),
    ];
    for (config, want) in cases {
        assert_eq!(parse_err(config), want, "{config:?}");
    }
}

#[test]
fn accepted_edges() {
    let cases: &[(&str, &str, Option<LogLimits>)] = &[
        // LogLimits up to u64::MAX, leading zeros, and 0 (logged, with no bytes).
        ("s/m{h:18446744073709551615}", "/s/m", limits(MAX, 0)),
        ("s/m{h:007;m:0}", "/s/m", limits(7, 0)),
        ("s/m{h:0}", "/s/m", limits(0, 0)),
        ("s/m{h:0;m:0}", "/s/m", limits(0, 0)),
        ("*{m:1}", "/any/thing", limits(0, 1)),
        // Service and method names: ASCII letters, digits, '_' ('.' and '/' in services).
        ("_/_", "/_/_", Some(LogLimits::full())),
        ("0.9/1", "/0.9/1", Some(LogLimits::full())),
        ("a./..//b", "/a./..//b", Some(LogLimits::full())),
        (
            "grpc.health.v1.Health/*",
            "/grpc.health.v1.Health/Watch",
            Some(LogLimits::full()),
        ),
        // Every clause kind once, plus exclusions of service/* methods.
        ("*,s/*,s/m,-s/x,-t/x", "/s/m", Some(LogLimits::full())),
    ];
    for &(config, method, want) in cases {
        assert_eq!(parse(config).lookup(method), want, "{config}");
    }
}

#[test]
fn error_messages() {
    let message = |config: &str| parse_err(config).to_string();
    assert_eq!(
        message("Service/Method,Service/Method{h}"),
        r#"invalid binary log filter: clause "Service/Method{h}": duplicate method "Service/Method" (give it once, with one suffix)"#
    );
    assert_eq!(
        message("*/Method"),
        r#"invalid binary log filter: clause "*/Method": "*/Method" is not allowed (name the method with its service, "Service/Method", or log every method with "*")"#
    );
    assert_eq!(
        message("*,-Service/Method{h}"),
        r#"invalid binary log filter: clause "-Service/Method{h}": an exclusion cannot have a {..} suffix"#
    );
    assert!(
        message("s/m{h:1,m:2}").ends_with("(a ',' ends the clause: separate h and m with ';')")
    );
    assert!(message("s/m, t/n").ends_with("; remove the whitespace"));
    assert!(message("s/*,s/*").contains(r#"duplicate service "s" (give "s/*" once)"#));
    assert!(message("*,*").contains(r#"duplicate "*""#));
    assert!(message("-s/m,-s/m").contains(r#"duplicate exclusion of "s/m""#));
    assert!(message("s/m,-s/m").contains(r#"method "s/m" is both logged and excluded"#));
    assert!(message("s/m,,t/n").contains("clause 2 is empty"));
    assert!(message("").contains("it is empty"));
    assert!(message("-s/*").contains("an exclusion names one method"));
    assert!(message("s/m{h:18446744073709551616}").contains("18446744073709551616 bytes"));
    assert_eq!(
        FilterError::NotUnicode.to_string(),
        "invalid binary log filter: GRPC_BINARY_LOG_FILTER is not UTF-8"
    );
    let err: Box<dyn std::error::Error> = Box::new(parse_err("x"));
    assert!(
        err.to_string()
            .starts_with("invalid binary log filter: clause \"x\"")
    );
}

#[test]
fn lookup_does_not_allocate() {
    let filter = parse("*{h:1;m:1},s/*{h:2;m:2},s/m{h:3;m:3},-s/x,a/b/c,-a/b/d");
    let only_methods = parse("s/m,-s/x");
    let paths = [
        "/s/m",   // a method clause
        "/s/x",   // excluded
        "/s/y",   // service/*
        "/t/y",   // *
        "/a/b/c", // a method of a service holding '/'
        "/a/b/d", // excluded
        "/",      // not a path
        "s/m",    // not a path
        "/nope",  // not a path
        "",       // not a path
    ];
    // Warm up (a first hash of the thread, if any, is not per lookup).
    for path in paths {
        black_box(filter.lookup(black_box(path)));
    }
    for filter in [&filter, &only_methods, &Filter::all()] {
        for path in paths {
            let (allocations, _) = alloc_count::allocations(|| {
                for _ in 0..100 {
                    black_box(filter.lookup(black_box(path)));
                }
            });
            assert_eq!(allocations, 0, "{path:?} in {filter:?}");
        }
    }
    // The same with many clauses (a map that grew).
    let config: Vec<String> = (0..500)
        .map(|i| match i % 3 {
            0 => format!("svc{i}/*"),
            1 => format!("svc{i}/m{{h:{i}}}"),
            _ => format!("-svc{i}/m"),
        })
        .collect();
    let big = parse(&config.join(","));
    for path in ["/svc0/m", "/svc1/m", "/svc2/m", "/svc3/x", "/svc999/m"] {
        let (allocations, _) = alloc_count::allocations(|| black_box(big.lookup(black_box(path))));
        assert_eq!(allocations, 0, "{path:?}");
    }
    assert_eq!(big.lookup("/svc1/m"), limits(1, 0));
    assert_eq!(big.lookup("/svc2/m"), None);
    assert_eq!(big.lookup("/svc3/x"), Some(LogLimits::full()));
}

/// Set in the environment of the child processes `from_env` starts.
const CHILD: &str = "TONIC_HOTPATH_BINLOG_FILTER_CHILD";

/// What `Filter::from_env` returns.
type FromEnv = Result<Option<Filter>, FilterError>;

/// What the child prints: `from_env`'s result, as lookups of three methods.
fn from_env_summary(result: FromEnv) -> Result<Option<[Option<LogLimits>; 3]>, String> {
    result
        .map(|filter| filter.map(|filter| ["/s/m", "/s/x", "/t/m"].map(|m| filter.lookup(m))))
        .map_err(|err| err.to_string())
}

/// Not a test of its own: the child process of `from_env` (a no-op when run
/// with the other tests).
#[test]
fn from_env_child() {
    if std::env::var_os(CHILD).is_some() {
        println!("from_env: {:?}", from_env_summary(Filter::from_env()));
    }
}

/// Runs this binary's `from_env_child` with `value` as GRPC_BINARY_LOG_FILTER
/// (`None`: unset) and returns what it printed.
fn from_env_in_child(value: Option<&std::ffi::OsStr>) -> String {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "filter::from_env_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env_remove(Filter::ENV_VAR);
    if let Some(value) = value {
        command.env(Filter::ENV_VAR, value);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    // The harness prints the test's name on the same line, before it.
    let (_, result) = stdout
        .split_once("from_env: ")
        .unwrap_or_else(|| panic!("no result in {stdout:?}"));
    result.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn from_env() {
    assert_eq!(Filter::ENV_VAR, "GRPC_BINARY_LOG_FILTER");
    let cases: Vec<(Option<&str>, FromEnv)> = vec![
        (None, Ok(None)),
        (Some(""), Ok(None)),
        (
            Some("s/*{h:1},-s/x"),
            Filter::parse("s/*{h:1},-s/x").map(Some),
        ),
        (Some("*"), Ok(Some(Filter::all()))),
        (Some("s/m,s/m"), Filter::parse("s/m,s/m").map(Some)),
        (Some(","), Filter::parse(",").map(Some)),
    ];
    for (value, want) in cases {
        let want = format!("{:?}", from_env_summary(want));
        assert_eq!(
            from_env_in_child(value.map(std::ffi::OsStr::new)),
            want,
            "{value:?}"
        );
    }
    // Spot checks of what the summaries hold.
    assert_eq!(
        from_env_in_child(Some("s/*{h:1},-s/x".as_ref())),
        format!("{:?}", Ok::<_, String>(Some([limits(1, 0), None, None])))
    );
    assert!(from_env_in_child(Some("s/m,s/m".as_ref())).contains("duplicate method"));
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let not_utf8 = std::ffi::OsStr::from_bytes(b"s/\xff");
        let want = format!("{:?}", from_env_summary(Err(FilterError::NotUnicode)));
        assert_eq!(from_env_in_child(Some(not_utf8)), want);
    }
}

#[path = "grpc_go_filter.rs"]
mod go;

/// Pieces of filters: names, syntax, and what should be refused.
const PIECES: &[&str] = &[
    "s",
    "m",
    "p.s",
    "a/b",
    "x_1",
    "/",
    "/",
    "*",
    "*",
    "-",
    ",",
    ",",
    "{",
    "}",
    "h",
    "m",
    ":",
    ";",
    "0",
    "1",
    "314",
    "18446744073709551615",
    "18446744073709551616",
    ".",
    "_",
    " ",
    "\n",
    "é",
    "{h}",
    "{m}",
    "{h;m}",
    "{h:1;m:2}",
    "{m:3}",
    "s/m",
    "s/*",
    "-s/m",
    "p.s/x",
];

/// Pieces of request paths.
const PATH_PIECES: &[&str] = &[
    "/", "/", "s", "m", "p.s", "a", "b", "x", "x_1", "", "é", " ", "*",
];

fn pieces(
    from: &'static [&'static str],
    len: std::ops::Range<usize>,
) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(from), len).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Accepted and refused exactly where grpc-go accepts and refuses, and
    /// every lookup as grpc-go's.
    #[test]
    fn parses_and_looks_up_as_grpc_go(
        config in pieces(PIECES, 1..12),
        paths in prop::collection::vec(pieces(PATH_PIECES, 0..6), 0..6),
    ) {
        let ours = Filter::parse(&config);
        let go = go::new_logger_from_config_string(&config);
        prop_assert_eq!(ours.is_ok(), go.is_some(), "{:?}: {:?}", config, ours);
        if let (Ok(ours), Some(go)) = (ours, go) {
            // The paths of the clauses themselves, and the generated ones.
            let clause_paths = config.split(',').flat_map(|clause| {
                let name = clause.trim_start_matches('-').split('{').next().unwrap_or("");
                [format!("/{clause}"), format!("/{name}"), format!("/{}", name.replace('*', "x"))]
            });
            for path in clause_paths.chain(paths) {
                let want = go.get_method_logger(&path).map(|(header, message)| LogLimits { header, message });
                prop_assert_eq!(ours.lookup(&path), want, "{:?} {:?}", config, path);
            }
        }
    }

    /// `parse` and `lookup` never panic, whatever the text.
    #[test]
    fn never_panics(config in any::<String>(), path in any::<String>()) {
        if let Ok(filter) = Filter::parse(&config) {
            let _ = filter.lookup(&path);
            let _ = filter.lookup(&format!("/{config}"));
        }
        let _ = Filter::parse(&format!("s/m{{{config}}}"));
        let _ = Filter::parse(&format!("s/*{config}"));
        let _ = Filter::parse(&format!("-{config}"));
    }
}
