//! Envoy's `endpoint-load-metrics` header: the `BIN`, `TEXT` and `JSON`
//! forms a backend writes ([`ReportFormat`](super::ReportFormat)'s Envoy
//! variants) and Envoy's parser of them (`source/common/orca/orca_parser.cc`),
//! rule for rule.

use std::collections::BTreeMap;

use http::HeaderValue;
use prost::Message;

use super::header::LoadReportErrorKind as Kind;
use super::proto::xds::data::orca::v3::OrcaLoadReport;
use crate::wire::base64::base64_decode;

const BIN: &[u8] = b"BIN ";
const TEXT: &[u8] = b"TEXT ";
const JSON: &[u8] = b"JSON ";
const NAMED: &str = "named_metrics.";

/// The scalars the `TEXT` form names (Envoy's `k*Field`), with their
/// places in a report.
fn text_scalars(report: &OrcaLoadReport) -> [(&'static str, f64); 5] {
    [
        ("cpu_utilization", report.cpu_utilization),
        ("mem_utilization", report.mem_utilization),
        ("application_utilization", report.application_utilization),
        ("rps_fractional", report.rps_fractional),
        ("eps", report.eps),
    ]
}

fn text_scalar<'a>(report: &'a mut OrcaLoadReport, name: &[u8]) -> Option<&'a mut f64> {
    Some(match name {
        b"cpu_utilization" => &mut report.cpu_utilization,
        b"mem_utilization" => &mut report.mem_utilization,
        b"application_utilization" => &mut report.application_utilization,
        b"rps_fractional" => &mut report.rps_fractional,
        b"eps" => &mut report.eps,
        _ => return None,
    })
}

fn header_value(bytes: Vec<u8>) -> HeaderValue {
    HeaderValue::from_maybe_shared(bytes::Bytes::from(bytes))
        .expect("the Envoy forms write printable ASCII only")
}

/// `BIN <padded base64>`. An empty report encodes to no bytes, which
/// Envoy refuses ("unable to decode"): it is written as an explicit
/// `cpu_utilization` of 0, which decodes to the same empty report.
pub(crate) fn bin_value(report: &OrcaLoadReport) -> HeaderValue {
    let mut encoded = report.encode_to_vec();
    if encoded.is_empty() {
        // Field 1 (cpu_utilization), fixed64 wire type, 0.0.
        encoded = vec![0x09, 0, 0, 0, 0, 0, 0, 0, 0];
    }
    let mut out = BIN.to_vec();
    out.extend_from_slice(&crate::wire::base64::base64_encode_no_pad(&encoded));
    while !(out.len() - BIN.len()).is_multiple_of(4) {
        out.push(b'=');
    }
    header_value(out)
}

/// Whether the `TEXT` form carries a named metric: a finite value, and a
/// name Envoy reads back as it is (non-empty printable ASCII without
/// spaces, `,` or `:`).
pub(crate) fn text_keeps(name: &str, value: f64) -> bool {
    value.is_finite()
        && !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b',' && b != b':')
}

/// `TEXT name:value,...`: the five scalars that are set (not zero) and
/// finite, and the named metrics [`text_keeps`]. Envoy's `TEXT` has no
/// key for the named utilizations, the request costs or the deprecated
/// `rps`: they are left out. A report with nothing to write is written as
/// `cpu_utilization:0` (a bare `TEXT ` would lose its trailing space on
/// the wire and no longer parse).
pub(crate) fn text_value(report: &OrcaLoadReport) -> HeaderValue {
    let mut out = String::from("TEXT ");
    let mut first = true;
    let mut entry = |out: &mut String, prefix: &str, name: &str, value: f64| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(prefix);
        out.push_str(name);
        out.push(':');
        out.push_str(&format!("{value:?}"));
    };
    for (name, value) in text_scalars(report) {
        if value != 0.0 && value.is_finite() {
            entry(&mut out, "", name, value);
        }
    }
    for (name, &value) in &report.named_metrics {
        if text_keeps(name, value) {
            entry(&mut out, NAMED, name, value);
        }
    }
    if first {
        out.push_str("cpu_utilization:0");
    }
    header_value(out.into_bytes())
}

/// A number as proto3 JSON writes a double: a JSON number, or `"NaN"`,
/// `"Infinity"`, `"-Infinity"` (which Envoy's protobuf parser reads).
fn json_number(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("\"NaN\"");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
    } else {
        out.push_str(&format!("{value:?}"));
    }
}

/// A JSON string in ASCII: non-ASCII and control characters escaped.
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// `JSON {...}`: proto3 JSON with the proto field names (as Envoy's
/// documentation and tests write them): every scalar that is set (not
/// zero), the deprecated `rps`, and the three maps whole. Names of any
/// characters are escaped; non-finite numbers are proto3 JSON's strings.
pub(crate) fn json_value(report: &OrcaLoadReport) -> HeaderValue {
    let mut out = String::from("JSON {");
    let mut first = true;
    let mut key = |out: &mut String, name: &str| {
        if !first {
            out.push(',');
        }
        first = false;
        json_string(out, name);
        out.push(':');
    };
    for (name, value) in text_scalars(report) {
        if value != 0.0 {
            key(&mut out, name);
            json_number(&mut out, value);
        }
    }
    #[allow(deprecated)]
    if report.rps != 0 {
        key(&mut out, "rps");
        out.push_str(&report.rps.to_string());
    }
    for (name, map) in [
        ("utilization", &report.utilization),
        ("request_cost", &report.request_cost),
        ("named_metrics", &report.named_metrics),
    ] {
        if map.is_empty() {
            continue;
        }
        key(&mut out, name);
        out.push('{');
        for (index, (entry, &value)) in map.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            json_string(&mut out, entry);
            out.push(':');
            json_number(&mut out, value);
        }
        out.push('}');
    }
    out.push('}');
    header_value(out.into_bytes())
}

/// Envoy's `parseOrcaLoadReportHeaders` for one `endpoint-load-metrics`
/// value.
pub(crate) fn parse(value: &[u8]) -> Result<OrcaLoadReport, Kind> {
    if let Some(rest) = value.strip_prefix(BIN) {
        parse_bin(rest)
    } else if let Some(rest) = value.strip_prefix(TEXT) {
        parse_text(rest)
    } else if let Some(rest) = value.strip_prefix(JSON) {
        json::parse(rest)
    } else {
        Err(Kind::UnsupportedFormat)
    }
}

/// Envoy's `tryParseSerializedBinary`: `Base64::decode` wants padded
/// standard base64 (a length that is a multiple of 4, canonical last
/// bits), and nothing decoded is an error.
fn parse_bin(value: &[u8]) -> Result<OrcaLoadReport, Kind> {
    if value.is_empty() || !value.len().is_multiple_of(4) {
        return Err(Kind::Base64);
    }
    let bytes = base64_decode(value).ok_or(Kind::Base64)?;
    if bytes.is_empty() {
        return Err(Kind::Base64);
    }
    OrcaLoadReport::decode(bytes.as_slice()).map_err(|_| Kind::Decode)
}

/// absl's `ascii_isspace`.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// absl's `StripAsciiWhitespace`.
fn strip(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !is_space(*first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !is_space(*last) {
            break;
        }
        s = rest;
    }
    s
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Envoy's `tryParseNativeHttpEncoded`: comma-separated tokens (trimmed,
/// empty ones skipped), each split at its first `:` with empty and blank
/// pieces dropped; a name seen twice is an error, checked before the
/// value.
fn parse_text(value: &[u8]) -> Result<OrcaLoadReport, Kind> {
    let mut report = OrcaLoadReport::default();
    let mut seen: Vec<&[u8]> = Vec::new();
    for token in value.split(|&b| b == b',').map(strip) {
        if token.is_empty() {
            continue;
        }
        let mut pieces = match token.iter().position(|&b| b == b':') {
            Some(at) => vec![&token[..at], &token[at + 1..]],
            None => vec![token],
        };
        pieces.retain(|piece| !strip(piece).is_empty());
        let name = pieces.first().copied().unwrap_or_default();
        let value = pieces.get(1).copied().unwrap_or_default();
        if seen.contains(&name) {
            return Err(Kind::DuplicateMetric(lossy(name)));
        }
        copy_metric(name, value, &mut report)?;
        seen.push(name);
    }
    Ok(report)
}

/// Envoy's `tryCopyMetricToOrcaLoadReport`.
fn copy_metric(name: &[u8], value: &[u8], report: &mut OrcaLoadReport) -> Result<(), Kind> {
    if name.is_empty() {
        return Err(Kind::EmptyMetricName);
    }
    if value.is_empty() {
        return Err(Kind::EmptyMetricValue(lossy(name)));
    }
    let number = simple_atod(value).ok_or_else(|| Kind::BadNumber(lossy(name)))?;
    if !number.is_finite() {
        return Err(Kind::NonFinite(lossy(name)));
    }
    if let Some(named) = name.strip_prefix(NAMED.as_bytes()) {
        if named.is_empty() {
            return Err(Kind::EmptyMetricName);
        }
        let named = std::str::from_utf8(named).map_err(|_| Kind::NotUtf8)?;
        report
            .named_metrics
            .entry(named.to_owned())
            .or_insert(number);
        return Ok(());
    }
    match text_scalar(report, name) {
        Some(slot) => {
            *slot = number;
            Ok(())
        }
        None => Err(Kind::UnknownMetric(lossy(name))),
    }
}

/// absl's `SimpleAtod`: surrounding whitespace and one leading `+`
/// allowed, then `absl::from_chars` in its general format (a decimal with
/// an optional exponent, or `inf`, `infinity`, `nan`, `nan(...)` in any
/// case), all of it consumed; overflow is infinity.
pub(crate) fn simple_atod(s: &[u8]) -> Option<f64> {
    let mut s = strip(s);
    if let [b'+', rest @ ..] = s {
        if rest.first() == Some(&b'-') {
            return None;
        }
        s = rest;
    }
    let (negative, body) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    let sign = if negative { -1.0 } else { 1.0 };
    let lower = body.to_ascii_lowercase();
    if lower == b"inf" || lower == b"infinity" {
        return Some(sign * f64::INFINITY);
    }
    if lower == b"nan"
        || (lower.starts_with(b"nan(")
            && lower.ends_with(b")")
            && lower[4..lower.len() - 1]
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'_'))
    {
        return Some(f64::NAN);
    }
    // digits [. digits] [e [+-] digits], at least one mantissa digit.
    let mut at = 0;
    let digits = |at: &mut usize| {
        let start = *at;
        while body.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        *at - start
    };
    let mut mantissa = digits(&mut at);
    if body.get(at) == Some(&b'.') {
        at += 1;
        mantissa += digits(&mut at);
    }
    if mantissa == 0 {
        return None;
    }
    if matches!(body.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(body.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        if digits(&mut at) == 0 {
            return None;
        }
    }
    if at != body.len() {
        return None;
    }
    let text = std::str::from_utf8(body).ok()?;
    text.parse::<f64>().ok().map(|value| sign * value)
}

/// The named maps of a report, by proto3 JSON field.
fn map_mut(report: &mut OrcaLoadReport, field: u32) -> &mut BTreeMap<String, f64> {
    match field {
        4 => &mut report.request_cost,
        5 => &mut report.utilization,
        _ => &mut report.named_metrics,
    }
}

mod json;

#[cfg(test)]
mod tests;
