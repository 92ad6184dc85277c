//! Envoy's own parser cases (`test/common/orca/orca_parser_test.cc`), and
//! the encoders read back by the parser.

use proptest::prelude::*;

use super::*;
use crate::orca::{BackendMetrics, ReportFormat};

/// Envoy's `exampleOrcaLoadReport`.
fn example() -> OrcaLoadReport {
    let mut report = OrcaLoadReport {
        cpu_utilization: 0.7,
        application_utilization: 0.8,
        mem_utilization: 0.9,
        eps: 2.0,
        rps_fractional: 1000.0,
        ..OrcaLoadReport::default()
    };
    report.named_metrics.insert("foo".into(), 123.0);
    report.named_metrics.insert("bar".into(), 0.2);
    report
}

fn parsed(value: &str) -> Result<OrcaLoadReport, Kind> {
    parse(value.as_bytes())
}

fn padded_base64(bytes: &[u8]) -> String {
    let mut out = String::from_utf8(crate::wire::base64::base64_encode_no_pad(bytes)).unwrap();
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
}

#[test]
fn envoy_prefixes() {
    // InvalidOrcaHeaderPrefix, ...WithLargePrefix, EmptyOrcaHeader.
    for value in [
        "BAD random-value",
        "BADBAD random-value",
        "",
        "cpu_utilization:0.7",
        "BIN",
    ] {
        assert_eq!(parsed(value), Err(Kind::UnsupportedFormat), "{value:?}");
    }
}

#[test]
fn envoy_text_cases() {
    // NativeHttpEncodedHeader.
    let text = "TEXT cpu_utilization:0.7,application_utilization:0.8,mem_utilization:0.9,\
                rps_fractional:1000,eps:2,named_metrics.foo:123,named_metrics.bar:0.2";
    assert_eq!(parsed(text), Ok(example()));
    // ...IncorrectFieldType, ...NanMetricValue, ...InfinityMetricValue.
    assert_eq!(
        parsed("TEXT cpu_utilization:\"0.7\""),
        Err(Kind::BadNumber("cpu_utilization".into()))
    );
    for value in ["nan", "NaN", "inf", "-infinity", "1e999"] {
        assert_eq!(
            parsed(&format!("TEXT cpu_utilization:{value}")),
            Err(Kind::NonFinite("cpu_utilization".into())),
            "{value}"
        );
    }
    // ...ContainsDuplicateMetric, ...UnsupportedMetric.
    assert_eq!(
        parsed("TEXT cpu_utilization:0.7,cpu_utilization:0.8"),
        Err(Kind::DuplicateMetric("cpu_utilization".into()))
    );
    assert_eq!(
        parsed("TEXT cpu_utilization:0.7,unsupported_metric:0.8"),
        Err(Kind::UnknownMetric("unsupported_metric".into()))
    );
    // ...ContainsDuplicateNamedMetric, ...ContainsEmptyNamedMetricKey.
    assert_eq!(
        parsed(
            "TEXT named_metrics.foo:123,named_metrics.duplicate:123,named_metrics.duplicate:0.2"
        ),
        Err(Kind::DuplicateMetric("named_metrics.duplicate".into()))
    );
    assert_eq!(
        parsed("TEXT named_metrics.:123"),
        Err(Kind::EmptyMetricName)
    );
    // InvalidNativeHttpEncodedHeader.
    assert_eq!(
        parsed("TEXT not-a-list-of-key-value-pairs"),
        Err(Kind::EmptyMetricValue(
            "not-a-list-of-key-value-pairs".into()
        ))
    );
}

#[test]
fn text_follows_absl_splitting_and_numbers() {
    // Tokens trimmed, empty ones skipped; values read by SimpleAtod.
    let report = parsed("TEXT  , eps: +2.5e1 ,,cpu_utilization:-0.5,named_metrics.x y:.5").unwrap();
    assert_eq!(report.eps, 25.0);
    assert_eq!(report.cpu_utilization, -0.5, "Envoy takes any finite value");
    assert_eq!(report.named_metrics["x y"], 0.5);
    // Nothing at all is an empty report.
    assert_eq!(parsed("TEXT "), Ok(OrcaLoadReport::default()));
    // A blank name piece is dropped: the value becomes the name.
    assert_eq!(parsed("TEXT :5"), Err(Kind::EmptyMetricValue("5".into())));
    assert_eq!(parsed("TEXT :"), Err(Kind::EmptyMetricName));
    assert_eq!(
        parsed("TEXT eps:"),
        Err(Kind::EmptyMetricValue("eps".into()))
    );
    // The first `:` splits; the name is not trimmed.
    assert_eq!(parsed("TEXT eps:1:2"), Err(Kind::BadNumber("eps".into())));
    assert_eq!(
        parsed("TEXT eps :1"),
        Err(Kind::UnknownMetric("eps ".into()))
    );
    for bad in ["+-1", "++1", "1e", "0x10", "1,5", "1_0", ".", "e5", "1 2"] {
        assert!(parsed(&format!("TEXT eps:{bad}")).is_err(), "{bad}");
    }
    for (good, value) in [("5.", 5.0), ("-.5", -0.5), ("1E3", 1000.0), ("1e-400", 0.0)] {
        assert_eq!(
            parsed(&format!("TEXT eps:{good}")).unwrap().eps,
            value,
            "{good}"
        );
    }
    // A duplicate is caught before its value is looked at.
    assert_eq!(
        parsed("TEXT eps:1,eps:x"),
        Err(Kind::DuplicateMetric("eps".into()))
    );
}

#[test]
fn envoy_json_cases() {
    // JsonHeader.
    let json = "JSON {\"cpu_utilization\": 0.7, \"application_utilization\": 0.8, \
                \"mem_utilization\": 0.9, \"rps_fractional\": 1000, \"eps\": 2, \
                \"named_metrics\": {\"foo\": 123,\"bar\": 0.2}}";
    assert_eq!(parsed(json), Ok(example()));
    // InvalidJsonHeader, JsonHeaderUnknownField, JsonHeaderIncorrectFieldType.
    assert!(matches!(
        parsed("JSON JSON not-a-valid-json-string"),
        Err(Kind::Json(_))
    ));
    let unknown = "JSON {\"cpu_utilization\": 0.7, \"unknown_field\": 2}";
    assert_eq!(parsed(unknown), Err(Kind::Json("no such field")));
    assert!(matches!(
        parsed("JSON {\"cpu_utilization\": \"0.7\""),
        Err(Kind::Json(_))
    ));
}

#[test]
fn json_follows_protobuf() {
    let report = parsed(
        "JSON {\"cpuUtilization\":\"0.5\",\"eps\":null,\"eps\":\"NaN\",\"rps\":\"7\",\
         \"utilization\":{\"a\\u00e9\":null},\"requestCost\":{}, \"request_cost\":{\"c\":1e2}} ",
    )
    .unwrap();
    assert_eq!(report.cpu_utilization, 0.5);
    assert!(report.eps.is_nan());
    #[allow(deprecated)]
    let rps = report.rps;
    assert_eq!(rps, 7);
    assert_eq!(report.utilization["aé"], 0.0);
    assert_eq!(report.request_cost["c"], 100.0);
    for bad in [
        "{\"eps\":1,\"eps\":2}",
        "{\"cpu_utilization\":1,\"cpuUtilization\":2}",
        "{\"utilization\":{\"a\":1,\"a\":2}}",
        "{\"named_metrics\":{\"a\":1},\"namedMetrics\":{\"b\":1}}",
        "{\"eps\":01}",
        "{\"eps\":1.}",
        "{\"eps\":1e999}",
        "{\"eps\":true}",
        "{\"eps\":[1]}",
        "{\"rps\":1.5}",
        "{\"rps\":-1}",
        "{\"rps\":\" 1\"}",
        "{\"eps\":1,}",
        "{} x",
        "{\"a\\ud800\":1}",
        "{\"CPU_UTILIZATION\":1}",
    ] {
        assert!(
            matches!(parsed(&format!("JSON {bad}")), Err(Kind::Json(_))),
            "{bad}"
        );
    }
}

#[test]
fn envoy_binary_cases() {
    let encoded = example().encode_to_vec();
    // BinaryHeader.
    let value = format!("BIN {}", padded_base64(&encoded));
    assert_eq!(parsed(&value), Ok(example()));
    // InvalidBinaryHeader: half the bytes do not decode.
    let half = format!("BIN {}", padded_base64(&encoded[..encoded.len() / 2]));
    assert_eq!(parsed(&half), Err(Kind::Decode));
    // BinaryHeaderPopulatedWithReadableString, EmptyBinaryHeader.
    assert_eq!(parsed("BIN not-a-valid-binary-proto"), Err(Kind::Base64));
    assert_eq!(parsed("BIN "), Err(Kind::Base64));
    // Padding is required; the last bits must be zero.
    let unpadded = crate::wire::base64::base64_encode_no_pad(&[1]);
    assert_eq!(
        parse(&[b"BIN ".as_slice(), &unpadded].concat()),
        Err(Kind::Base64)
    );
    assert_eq!(parsed("BIN AR=="), Err(Kind::Base64));
}

#[test]
fn encoders_write_envoy_forms() {
    let (name, value) = ReportFormat::EnvoyText.header(&example());
    assert_eq!(name, "endpoint-load-metrics");
    assert_eq!(
        value,
        "TEXT cpu_utilization:0.7,mem_utilization:0.9,application_utilization:0.8,\
         rps_fractional:1000.0,eps:2.0,named_metrics.bar:0.2,named_metrics.foo:123.0"
    );
    let (_, value) = ReportFormat::EnvoyJson.header(&example());
    assert_eq!(
        value,
        "JSON {\"cpu_utilization\":0.7,\"mem_utilization\":0.9,\"application_utilization\":0.8,\
         \"rps_fractional\":1000.0,\"eps\":2.0,\"named_metrics\":{\"bar\":0.2,\"foo\":123.0}}"
    );
    let (_, value) = ReportFormat::EnvoyBinary.header(&example());
    assert_eq!(
        value,
        format!("BIN {}", padded_base64(&example().encode_to_vec())).as_str()
    );
    // Empty reports still parse (and keep no trailing space).
    let empty = OrcaLoadReport::default();
    for format in [
        ReportFormat::EnvoyBinary,
        ReportFormat::EnvoyText,
        ReportFormat::EnvoyJson,
    ] {
        let (_, value) = format.header(&empty);
        assert!(!value.as_bytes().ends_with(b" "), "{value:?}");
        assert_eq!(parse(value.as_bytes()), Ok(empty.clone()), "{format:?}");
    }
}

/// What the `TEXT` form keeps of a report.
fn text_expressible(report: &OrcaLoadReport) -> OrcaLoadReport {
    let finite = |value: f64| if value.is_finite() { value } else { 0.0 };
    OrcaLoadReport {
        cpu_utilization: finite(report.cpu_utilization),
        mem_utilization: finite(report.mem_utilization),
        application_utilization: finite(report.application_utilization),
        rps_fractional: finite(report.rps_fractional),
        eps: finite(report.eps),
        named_metrics: report
            .named_metrics
            .iter()
            .filter(|(name, value)| text_keeps(name, **value))
            .map(|(name, value)| (name.clone(), *value))
            .collect(),
        ..OrcaLoadReport::default()
    }
}

/// Reports equal, NaN equal to NaN.
fn same(a: &OrcaLoadReport, b: &OrcaLoadReport) -> bool {
    let bits = |r: &OrcaLoadReport| {
        let key = |v: f64| {
            if v.is_nan() {
                u64::MAX
            } else {
                (v + 0.0).to_bits()
            }
        };
        let map = |m: &BTreeMap<String, f64>| {
            m.iter()
                .map(|(k, v)| (k.clone(), key(*v)))
                .collect::<Vec<_>>()
        };
        (
            [
                r.cpu_utilization,
                r.mem_utilization,
                r.application_utilization,
                r.rps_fractional,
                r.eps,
            ]
            .map(key),
            map(&r.utilization),
            map(&r.request_cost),
            map(&r.named_metrics),
        )
    };
    bits(a) == bits(b)
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => proptest::num::f64::ANY,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(0.0),
        1 => Just(-0.0),
        1 => Just(1e-310),
    ]
}

fn names() -> impl Strategy<Value = BTreeMap<String, f64>> {
    proptest::collection::btree_map("[a-z0-9_.,: =\"\\\\é\u{1F600}\t]{0,6}", value(), 0..4)
}

fn metrics() -> impl Strategy<Value = BackendMetrics> {
    let scalar = || proptest::option::of(value());
    (
        (scalar(), scalar(), scalar(), scalar(), scalar()),
        (names(), names(), names()),
    )
        .prop_map(
            |((cpu, mem, app, qps, eps), (utilization, request_cost, named_metrics))| {
                BackendMetrics {
                    cpu_utilization: cpu,
                    mem_utilization: mem,
                    application_utilization: app,
                    qps,
                    eps,
                    utilization,
                    request_cost,
                    named_metrics,
                }
            },
        )
}

proptest! {
    #[test]
    fn every_envoy_form_reads_back(metrics in metrics()) {
        let report = metrics.to_report();
        for format in [ReportFormat::EnvoyBinary, ReportFormat::EnvoyText, ReportFormat::EnvoyJson] {
            let (_, value) = format.header(&report);
            let back = parse(value.as_bytes());
            prop_assert!(back.is_ok(), "{format:?} {value:?}: {back:?}");
            let back = back.unwrap();
            let expected = match format {
                ReportFormat::EnvoyText => text_expressible(&report),
                _ => report.clone(),
            };
            prop_assert!(same(&back, &expected), "{format:?} {value:?}: {back:?} != {expected:?}");
            prop_assert!(!value.as_bytes().ends_with(b" "));
        }
    }

    #[test]
    fn no_bytes_panic_the_parser(prefix in prop_oneof![Just(""), Just("BIN "), Just("TEXT "), Just("JSON ")],
                                 bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse(&[prefix.as_bytes(), &bytes].concat());
    }

    #[test]
    fn no_text_panics_the_parser(text in "(TEXT |JSON )[-a-z_.:,{}\\[\\]\" 0-9eEnul\\\\+]{0,40}") {
        let _ = parse(text.as_bytes());
    }
}
