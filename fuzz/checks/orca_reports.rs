//! The load reports a client reads from a server's trailers: gRPC's
//! `endpoint-load-metrics-bin` (grpc-go's `ToLoadReport` rules) against
//! its oracle (the `base64` crate in tonic's configuration, then prost),
//! and Envoy's `endpoint-load-metrics` forms (`BIN`, `TEXT`, `JSON`): never
//! a panic, and a report read from either re-encodes, in each of Envoy's
//! forms that carries all of it, to a header that reads back the same.

use base64::Engine as _;
use http::{HeaderMap, HeaderValue};
use prost::Message;
use tonic_hotpath::orca::{
    OrcaLoadReport, ReportFormat, load_report_from, parse_endpoint_load_metrics,
};

use super::input::Input;

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let choice = input.byte();
    let rest = input.rest();
    let Ok(value) = HeaderValue::from_bytes(rest) else {
        return;
    };
    if choice.is_multiple_of(2) {
        grpc_trailer(&value, choice % 4 == 2);
    } else if let Ok(report) = parse_endpoint_load_metrics(&value) {
        round_trips(&report);
    }
}

/// `endpoint-load-metrics-bin` once (or twice: always an error).
fn grpc_trailer(value: &HeaderValue, twice: bool) {
    let mut trailers = HeaderMap::new();
    trailers.append(ReportFormat::GRPC_TRAILER, value.clone());
    if twice {
        trailers.append(ReportFormat::GRPC_TRAILER, value.clone());
        assert!(load_report_from(&trailers).is_err(), "two reports accepted");
        return;
    }
    let lenient = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let want = lenient
        .decode(value.as_bytes())
        .ok()
        .and_then(|bytes| OrcaLoadReport::decode(bytes.as_slice()).ok());
    match (load_report_from(&trailers), want) {
        (Ok(Some(got)), Some(want)) => {
            assert_eq!(got.encode_to_vec(), want.encode_to_vec(), "{value:?}");
            round_trips(&got);
        }
        (Err(_), None) => {}
        (got, want) => panic!("{value:?}: read {got:?}, oracle {want:?}"),
    }
}

/// `report` written in Envoy's binary and JSON forms (which carry every
/// field) reads back the same, byte for byte once encoded; JSON's `"NaN"`
/// carries no NaN payload, so NaNs compare as the one quiet NaN there.
fn round_trips(report: &OrcaLoadReport) {
    for format in [ReportFormat::EnvoyBinary, ReportFormat::EnvoyJson] {
        let (_, header) = format.header(report);
        let back = parse_endpoint_load_metrics(&header)
            .unwrap_or_else(|error| panic!("{format:?} of {report:?}: {header:?}: {error}"));
        let (back, want) = match format {
            ReportFormat::EnvoyJson => (canonical_nan(back), canonical_nan(report.clone())),
            _ => (back, report.clone()),
        };
        assert_eq!(
            back.encode_to_vec(),
            want.encode_to_vec(),
            "{format:?}: {header:?}"
        );
    }
}

/// `report` with every NaN (whatever its payload) as `f64::NAN`.
fn canonical_nan(mut report: OrcaLoadReport) -> OrcaLoadReport {
    let fix = |value: &mut f64| {
        if value.is_nan() {
            *value = f64::NAN;
        }
    };
    for value in [
        &mut report.cpu_utilization,
        &mut report.mem_utilization,
        &mut report.rps_fractional,
        &mut report.eps,
        &mut report.application_utilization,
    ] {
        fix(value);
    }
    for map in [
        &mut report.request_cost,
        &mut report.utilization,
        &mut report.named_metrics,
    ] {
        map.values_mut().for_each(fix);
    }
    report
}
