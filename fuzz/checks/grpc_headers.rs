//! The gRPC headers the stats layer and the binary log read from a peer:
//! `grpc-timeout`, `grpc-message` (percent-encoded), `grpc-encoding`,
//! `grpc-accept-encoding`, `content-type`, and `-bin` values (base64) as
//! the binary log decodes them, with its truncation rule. Each against its
//! grammar, round-tripped where the grammar has an encoder.

use std::time::Duration;

use base64::Engine as _;
use tonic_hotpath::internals;
use tonic_hotpath::stats::compression::Encoding;

use super::input::{Input, headers};

/// Names the header maps are made of (or any other name, see `headers`).
const NAMES: [&str; 12] = [
    "grpc-timeout",
    "grpc-encoding",
    "grpc-accept-encoding",
    "grpc-message",
    "content-type",
    "x-user-bin",
    "grpc-trace-bin",
    "grpc-status-details-bin",
    "user-agent",
    "x-user",
    "te",
    "grpc-status",
];

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    match input.byte() % 5 {
        0 => timeout(input.rest()),
        1 => message(input.rest()),
        2 => encodings(&mut input),
        3 => binary_log(&mut input),
        _ => content_type(input.rest()),
    }
}

/// `grpc-timeout`: 1 to 8 ASCII digits and a unit of `H M S m u n`.
fn timeout(value: &[u8]) {
    let parsed = internals::parse_grpc_timeout(value);
    let want = value.split_last().and_then(|(&unit, digits)| {
        let valid = (1..=8).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit);
        let amount: u64 = std::str::from_utf8(digits)
            .ok()?
            .parse()
            .ok()
            .filter(|_| valid)?;
        Some(match unit {
            b'H' => Duration::from_secs(amount * 3600),
            b'M' => Duration::from_secs(amount * 60),
            b'S' => Duration::from_secs(amount),
            b'm' => Duration::from_millis(amount),
            b'u' => Duration::from_micros(amount),
            b'n' => Duration::from_nanos(amount),
            _ => return None,
        })
    });
    assert_eq!(parsed, want, "{value:?}");
}

/// `grpc-message`: any text, percent-encoded as gRPC's spec says (bytes
/// outside `0x20..=0x7e`, and `%`), decodes to itself; bytes without a
/// `%` decode to themselves (lossily, as UTF-8).
fn message(bytes: &[u8]) {
    let decoded = internals::percent_decode(bytes);
    if !bytes.contains(&b'%') {
        assert_eq!(decoded, String::from_utf8_lossy(bytes), "no escapes");
    }
    let text = String::from_utf8_lossy(bytes);
    let mut encoded = String::new();
    for &byte in text.as_bytes() {
        match byte {
            b' '..=b'~' if byte != b'%' => encoded.push(char::from(byte)),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    assert_eq!(
        internals::percent_decode(encoded.as_bytes()),
        text,
        "round trip"
    );
}

/// `grpc-encoding` names exactly `gzip`, `deflate`, `zstd` or `identity`;
/// a response encoding is accepted when it is `identity` or an encoding
/// tonic knows that one of the `grpc-accept-encoding` values lists
/// (comma-separated, spaces around a name ignored).
fn encodings(input: &mut Input<'_>) {
    let encoding = input.until(0).to_vec();
    let names = ["gzip", "deflate", "zstd"];
    let want = match encoding.as_slice() {
        b"identity" => Ok(None),
        name => names
            .iter()
            .position(|known| known.as_bytes() == name)
            .map(|at| Some([Encoding::Gzip, Encoding::Deflate, Encoding::Zstd][at]))
            .ok_or(()),
    };
    let parsed = Encoding::from_header(&encoding);
    assert_eq!(parsed.as_ref().ok(), want.as_ref().ok(), "{encoding:?}");
    if let Err(unsupported) = parsed {
        // tonic's message names the text, or the bytes when not UTF-8.
        let want = match std::str::from_utf8(&encoding) {
            Ok(text) => text.to_owned(),
            Err(_) => format!("{encoding:?}"),
        };
        assert_eq!(unsupported.name(), want);
    }
    let headers = headers(input, &["grpc-accept-encoding"], 8);
    let listed = headers.get_all("grpc-accept-encoding").iter().any(|value| {
        value
            .as_bytes()
            .split(|&b| b == b',')
            .any(|name| name.trim_ascii() == encoding.as_slice())
    });
    let known = names
        .iter()
        .any(|name| name.as_bytes() == encoding.as_slice());
    let want = encoding == b"identity" || (known && listed);
    assert_eq!(
        internals::accepts_encoding(&headers, &encoding),
        want,
        "{encoding:?}"
    );
}

/// `content-type`: `application/grpc`, alone or followed by `+` or `;`,
/// compared without regard to ASCII case.
fn content_type(value: &[u8]) {
    let Ok(header) = http::HeaderValue::from_bytes(value) else {
        return;
    };
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, header);
    let lower = value.to_ascii_lowercase();
    let want = lower
        .strip_prefix(b"application/grpc")
        .is_some_and(|rest| matches!(rest.first(), None | Some(b'+' | b';')));
    assert_eq!(internals::is_grpc(&headers), want, "{value:?}");
}

/// A binary log entry's metadata: the headers grpc-go keeps, in order,
/// `-bin` values decoded from base64 (padded or not; as sent when they do
/// not decode); truncated by grpc-go's rule.
fn binary_log(input: &mut Input<'_>) {
    let limit = u64::from(input.u16());
    let headers = headers(input, &NAMES, 64);
    let (metadata, cut) = internals::binlog_metadata(&headers, u64::MAX);
    assert!(!cut, "no limit, nothing cut");
    let omitted = |key: &str| {
        matches!(
            key,
            "lb-token"
                | ":path"
                | ":authority"
                | "content-encoding"
                | "content-type"
                | "user-agent"
                | "te"
        ) || (key.starts_with("grpc-") && key != "grpc-trace-bin")
    };
    let lenient = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let want: Vec<(String, Vec<u8>)> = headers
        .iter()
        .filter(|(key, _)| !omitted(key.as_str()))
        .map(|(key, value)| {
            let raw = value.as_bytes().to_vec();
            let value = match key.as_str().ends_with("-bin") {
                true => lenient.decode(&raw).unwrap_or(raw),
                false => raw,
            };
            (key.as_str().to_owned(), value)
        })
        .collect();
    let got: Vec<(String, Vec<u8>)> = metadata
        .entry
        .iter()
        .map(|entry| (entry.key.clone(), entry.value.to_vec()))
        .collect();
    assert_eq!(got, want, "metadata");

    let details = internals::binlog_status_details(&headers);
    let want_details = headers
        .get("grpc-status-details-bin")
        .and_then(|value| lenient.decode(value.as_bytes()).ok())
        .unwrap_or_default();
    assert_eq!(details.as_ref(), want_details.as_slice(), "status details");

    // grpc-go's truncateMetadata: entries up to the first that would take
    // the total (keys and values, grpc-trace-bin not counted) past the limit.
    let (truncated, dropped) = internals::binlog_metadata(&headers, limit);
    let mut total = 0u64;
    let mut kept = 0;
    for entry in &metadata.entry {
        if entry.key != "grpc-trace-bin" {
            let size = (entry.key.len() + entry.value.len()) as u64;
            if total + size > limit {
                break;
            }
            total += size;
        }
        kept += 1;
    }
    assert_eq!(
        truncated.entry,
        metadata.entry[..kept],
        "truncation at {limit}"
    );
    assert_eq!(dropped, kept < metadata.entry.len(), "truncated flag");
}
