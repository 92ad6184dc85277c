//! A call's status on the wire (`grpc-status`, `grpc-message`), its
//! deadline (`grpc-timeout`) and the server's retry pushback
//! (`grpc-retry-pushback-ms`).

use std::time::Duration;

#[cfg(feature = "retry")]
use http::HeaderValue;
use http::{HeaderMap, HeaderName, StatusCode};
use tonic::Code;

use super::headers::first_value;

// Pre-built names: a lookup by `&HeaderName` skips parsing the name.
pub(crate) const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
pub(crate) const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
pub(crate) const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
#[cfg(feature = "retry")]
pub(crate) const GRPC_RETRY_PUSHBACK_MS: HeaderName =
    HeaderName::from_static("grpc-retry-pushback-ms");

/// Whether `headers` carry a `grpc-status` (of any value).
#[inline]
pub(crate) fn has_status(headers: &HeaderMap) -> bool {
    first_value(headers, &GRPC_STATUS).is_some()
}

/// The `grpc-status` of `headers` (its first value), as tonic reads it
/// (`Code::from_bytes`: `0` to `16` in decimal without leading zeros;
/// anything else is `Unknown`, as grpc-go also maps an unparsable status).
#[inline]
pub(crate) fn status_code(headers: &HeaderMap) -> Option<Code> {
    first_value(headers, &GRPC_STATUS).map(|value| Code::from_bytes(value.as_bytes()))
}

/// The code of a response whose HTTP status is not `200` and that has no
/// `grpc-status` (a proxy's bare `503`), as tonic infers it
/// (`infer_grpc_status`, after gRPC's http-grpc-status-mapping.md);
/// `200` itself is `Unknown` there too (a missing status).
#[inline]
pub(crate) fn http_status_code(http: StatusCode) -> Code {
    match http {
        StatusCode::BAD_REQUEST => Code::Internal,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::Unimplemented,
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// The `grpc-message` of `headers` (its first value), percent-decoded.
#[inline]
pub(crate) fn message(headers: &HeaderMap) -> Option<String> {
    first_value(headers, &GRPC_MESSAGE).map(|value| percent_decode(value.as_bytes()))
}

/// Decodes `grpc-message`'s percent-encoding as grpc-go does: `%` and two
/// hex digits (either case) is that byte; any other `%` stays as it is;
/// `+` is not a space. Bytes that are not UTF-8 are replaced (grpc-go keeps
/// them in its string, which a Rust `String` cannot; tonic instead turns
/// the status into `Unknown`: the code the peer sent is kept here).
pub(crate) fn percent_decode(encoded: &[u8]) -> String {
    let mut decoded = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        let byte = encoded[i];
        let escaped = match encoded.get(i + 1..i + 3) {
            Some(&[hi, lo]) if byte == b'%' => hex(hi).zip(hex(lo)),
            _ => None,
        };
        match escaped {
            Some((hi, lo)) => {
                decoded.push(hi << 4 | lo);
                i += 3;
            }
            None => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).map(|d| d as u8)
}

/// The `grpc-timeout` of `headers` (its first value), parsed.
#[inline]
pub(crate) fn timeout(headers: &HeaderMap) -> Option<Duration> {
    first_value(headers, &GRPC_TIMEOUT).and_then(|value| parse_timeout(value.as_bytes()))
}

/// Parses a `grpc-timeout`: at most 8 characters of value, then a unit
/// (`H M S m u n`). The value is read as tonic's server reads it, the
/// deadline the server holds the call to (`u64::from_str`: decimal digits,
/// a leading `+` allowed; the gRPC spec says digits only, grpc-go accepts
/// a sign too); anything else is no deadline, as in tonic.
pub(crate) fn parse_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, amount) = value.split_last()?;
    if amount.len() > 8 {
        return None;
    }
    let digits = amount.strip_prefix(b"+").unwrap_or(amount);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let amount = digits
        .iter()
        .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(amount * 3600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// A deadline as `grpc-timeout` carries it, as tonic writes it: the most
/// precise unit (`n u m S M H`) whose amount fits in 8 digits.
#[cfg(feature = "retry")]
pub(crate) fn encode_timeout(timeout: Duration) -> HeaderValue {
    const MAX: u128 = 99_999_999;
    let nanos = timeout.as_nanos();
    let units: [(u128, &str); 6] = [
        (1, "n"),
        (1_000, "u"),
        (1_000_000, "m"),
        (1_000_000_000, "S"),
        (60_000_000_000, "M"),
        (3_600_000_000_000, "H"),
    ];
    let (amount, unit) = units
        .iter()
        .map(|(per, unit)| (nanos / per, *unit))
        .find(|(amount, _)| *amount <= MAX)
        .unwrap_or((MAX, "H"));
    HeaderValue::try_from(format!("{amount}{unit}"))
        .unwrap_or_else(|_| HeaderValue::from_static("99999999H"))
}

/// What a server's `grpc-retry-pushback-ms` tells a retrying client.
#[cfg(feature = "retry")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushback {
    /// No pushback: the client's own backoff applies.
    None,
    /// Retry after this long.
    After(Duration),
    /// Do not retry: a negative, malformed or repeated value.
    Stop,
}

/// The pushback of `headers`, read as grpc-go reads it (`strconv.Atoi`:
/// an optional sign and decimal digits that fit in 64 bits; negative,
/// malformed, or more than one value: stop retrying).
#[cfg(feature = "retry")]
pub(crate) fn pushback(headers: &HeaderMap) -> Pushback {
    let mut values = headers.get_all(&GRPC_RETRY_PUSHBACK_MS).iter();
    let Some(value) = values.next() else {
        return Pushback::None;
    };
    if values.next().is_some() {
        return Pushback::Stop;
    }
    match value
        .to_str()
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
    {
        Some(millis) if millis >= 0 => {
            Pushback::After(Duration::from_millis(millis.unsigned_abs()))
        }
        _ => Pushback::Stop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "retry")]
    #[test]
    fn timeouts_are_written_as_tonic_writes_them_and_read_back() {
        for (timeout, text) in [
            (Duration::from_millis(500), "500000u"),
            (Duration::from_secs(30), "30000000u"),
            (Duration::from_secs(3600), "3600000m"),
            (Duration::from_nanos(1), "1n"),
            (Duration::ZERO, "0n"),
            (Duration::from_secs(200_000), "200000S"),
            (Duration::MAX, "99999999H"),
        ] {
            let encoded = encode_timeout(timeout);
            assert_eq!(encoded, text, "{timeout:?}");
            if timeout < Duration::from_secs(1_000_000) {
                assert_eq!(parse_timeout(encoded.as_bytes()), Some(timeout));
            }
        }
    }

    #[cfg(feature = "retry")]
    #[test]
    fn pushback_is_read_as_grpc_go_reads_it() {
        let of = |values: &[&'static str]| {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(&GRPC_RETRY_PUSHBACK_MS, HeaderValue::from_static(value));
            }
            pushback(&headers)
        };
        assert_eq!(of(&[]), Pushback::None);
        assert_eq!(of(&["250"]), Pushback::After(Duration::from_millis(250)));
        assert_eq!(of(&["+7"]), Pushback::After(Duration::from_millis(7)));
        assert_eq!(of(&["-0"]), Pushback::After(Duration::ZERO));
        for stop in [
            &["-1"][..],
            &["1.5"],
            &["abc"],
            &[""],
            &[" 1"],
            &["1", "2"],
            &["99999999999999999999"],
        ] {
            assert_eq!(of(stop), Pushback::Stop, "{stop:?}");
        }
    }

    #[test]
    fn timeouts_read_as_tonic_reads_them() {
        assert_eq!(parse_timeout(b"5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_timeout(b"20m"), Some(Duration::from_millis(20)));
        assert_eq!(parse_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_timeout(b"2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_timeout(b"7n"), Some(Duration::from_nanos(7)));
        assert_eq!(parse_timeout(b"3u"), Some(Duration::from_micros(3)));
        assert_eq!(parse_timeout(b"00000005S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_timeout(b"+5S"), Some(Duration::from_secs(5)));
        assert_eq!(
            parse_timeout(b"99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        for bad in [
            &b""[..],
            b"S",
            b"+S",
            b"-5S",
            b"5",
            b"5s",
            b"5x",
            b" 5S",
            b"5 S",
            b"123456789S",
            b"++5S",
        ] {
            assert_eq!(
                parse_timeout(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn messages_decode_as_grpc_go_decodes_them() {
        assert_eq!(percent_decode(b"plain"), "plain");
        assert_eq!(percent_decode(b"a%20b%2Fc%2fd"), "a b/c/d");
        assert_eq!(percent_decode(b"100%"), "100%");
        assert_eq!(percent_decode(b"%%41"), "%A");
        assert_eq!(percent_decode(b"%zz%4"), "%zz%4");
        assert_eq!(percent_decode(b"a+b"), "a+b");
        assert_eq!(percent_decode(b"%E2%9C%93"), "\u{2713}");
        assert_eq!(percent_decode(b"%FF"), "\u{FFFD}");
    }

    #[test]
    fn a_status_is_its_first_value_and_unknown_when_unparsable() {
        let mut headers = HeaderMap::new();
        assert_eq!(status_code(&headers), None);
        assert!(!has_status(&headers));
        headers.insert(GRPC_STATUS, "12".parse().unwrap());
        headers.append(GRPC_STATUS, "0".parse().unwrap());
        assert_eq!(status_code(&headers), Some(Code::Unimplemented));
        for unparsable in ["00", " 0", "17", "-1", ""] {
            headers.insert(GRPC_STATUS, unparsable.parse().unwrap());
            assert_eq!(status_code(&headers), Some(Code::Unknown), "{unparsable:?}");
        }
        headers.insert(GRPC_MESSAGE, "not%20found".parse().unwrap());
        assert_eq!(message(&headers).as_deref(), Some("not found"));
    }
}
