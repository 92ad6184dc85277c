//! `-bin` values: standard base64 without padding, as tonic's
//! `MetadataValue<Binary>` sends them, and read padded or not, as tonic
//! reads them. The `base64` crate (the version tonic itself depends on, so
//! nothing new is built) in tonic's configuration, for every part (the
//! metadata chain, trace propagation, the binary log, ORCA reports).
//! BENCHMARKS.md ("base64: the crate beside our own codec") has the
//! measurement behind the choice.

use base64::Engine as _;
use base64::alphabet::STANDARD;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};

/// tonic's engine (`metadata::encoding`): the standard alphabet, no
/// padding out; in, padded, unpadded or partly padded (`Zg`, `Zg=` and
/// `Zg==` are all `f`), the unused bits of the last symbol zero.
const ENGINE: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Symbols validated per step of [`base64_decoded_len`] (a whole number of
/// 4-symbol groups).
const CHUNK_SYMBOLS: usize = 256;

/// Standard base64 without padding, into a buffer of exactly the right size.
pub(crate) fn base64_encode_no_pad(input: &[u8]) -> Vec<u8> {
    // `None` only past `usize::MAX` output bytes, which no slice reaches;
    // the crate's own `encode` sizes it then.
    let Some(len) = base64::encoded_len(input.len(), false) else {
        return ENGINE.encode(input).into_bytes();
    };
    let mut out = vec![0; len];
    let written = ENGINE.encode_slice(input, &mut out).unwrap_or_default();
    out.truncate(written);
    out
}

/// Decodes standard base64 with or without padding, as tonic's
/// `MetadataValue<Binary>::to_bytes` does: the last group may carry one or
/// two `=`, no more than it lacks, and the unused bits of the last symbol
/// must be zero. `None` for anything else: another byte, whitespace
/// included, or a URL-safe symbol.
///
/// The buffer is exactly as long as what it holds (one allocation; a
/// `Bytes` made from it takes no second one).
pub(crate) fn base64_decode(input: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0; len_if_valid(input)];
    let written = ENGINE.decode_slice(input, &mut out).ok()?;
    out.truncate(written);
    Some(out)
}

/// What `input` decodes to, if it decodes: three bytes for each whole
/// group of four symbols, one or two for a last group of two or three,
/// the padding left out.
fn len_if_valid(input: &[u8]) -> usize {
    let data = match input {
        [rest @ .., b'=', b'='] | [rest @ .., b'='] => rest,
        _ => input,
    };
    data.len() / 4 * 3 + data.len() % 4 * 3 / 4
}

/// Appends what `input` decodes to onto `out`, as [`base64_decode`]
/// reads it; `false`, with `out` as it was, where it refuses it.
pub(crate) fn base64_decode_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let decoded = ENGINE.decode_vec(input, out).is_ok();
    if !decoded {
        out.truncate(start);
    }
    decoded
}

/// The length `input` decodes to, `None` where [`base64_decode`] refuses
/// it; allocates nothing. Whole groups are decoded a chunk at a time onto
/// the stack: a chunk before the last holds no padding (`=` there is
/// refused, as a decode of the whole refuses it), the last is decoded as
/// the end of the value.
pub(crate) fn base64_decoded_len(input: &[u8]) -> Option<usize> {
    let mut scratch = [0u8; CHUNK_SYMBOLS / 4 * 3];
    let mut chunks = input.chunks(CHUNK_SYMBOLS).peekable();
    let mut len = 0;
    while let Some(chunk) = chunks.next() {
        if chunks.peek().is_some() && chunk.contains(&b'=') {
            return None;
        }
        len += ENGINE.decode_slice(chunk, &mut scratch).ok()?;
    }
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_known_vectors() {
        let cases: [(&[u8], &str); 7] = [
            (b"", ""),
            (b"f", "Zg"),
            (b"fo", "Zm8"),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg"),
            (b"fooba", "Zm9vYmE"),
            (&[0xff, 0xfe, 0x00], "//4A"),
        ];
        for (input, expected) in cases {
            assert_eq!(base64_encode_no_pad(input), expected.as_bytes());
            let decoded = base64_decode(expected.as_bytes()).unwrap();
            assert_eq!(decoded, input);
            assert_eq!(decoded.capacity(), input.len(), "exactly sized");
            assert_eq!(base64_decoded_len(expected.as_bytes()), Some(input.len()));
            let mut out = b">".to_vec();
            assert!(base64_decode_into(expected.as_bytes(), &mut out));
            assert_eq!(out[1..], *input);
        }
    }

    #[test]
    fn decode_takes_padded_input_and_refuses_malformed_input() {
        assert_eq!(base64_decode(b"Zg==").unwrap(), b"f");
        assert_eq!(base64_decode(b"Zm8=").unwrap(), b"fo");
        assert_eq!(base64_decode(b"Zm9v").unwrap(), b"foo");
        // Partial padding, as tonic (and the base64 crate's Indifferent
        // mode) reads it.
        assert_eq!(base64_decode(b"Zg=").unwrap(), b"f");
        assert_eq!(base64_decode(b"Zm9vYg=").unwrap(), b"foob");
        for bad in [
            &b"Z"[..],
            b"Zh",    // unused bits set
            b"Zm9",   // unused bits set
            b"Zm8==", // more padding than the group lacks
            b"Zm9v=",
            b"Zm9v==",
            b"Zg===",
            b"====",
            b"=",
            b" Zm9v",
            b"Zm9v\n",
            b"Zm9v====",
            b"Z===",
            b"Zm 9",
            b"Zm-_",
            b"Zg==Zg==",
        ] {
            let decoded = base64_decode(bad);
            assert_eq!(decoded, None, "{:?}", String::from_utf8_lossy(bad));
            assert_eq!(base64_decoded_len(bad), None);
            let mut out = b"kept".to_vec();
            assert!(!base64_decode_into(bad, &mut out));
            assert_eq!(out, b"kept", "nothing appended");
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(base64_decode(&base64_encode_no_pad(&all)).unwrap(), all);
    }

    /// The length without decoding agrees with decoding, on every short
    /// string over an alphabet with each kind of symbol (last-symbol bit
    /// patterns, padding, bytes outside the alphabet).
    #[test]
    fn decoded_len_agrees_with_decode_on_short_values() {
        let symbols = b"AQgZw/=- ";
        let mut input = Vec::new();
        for len in 0..=6u32 {
            for mut n in 0..symbols.len().pow(len) {
                input.clear();
                for _ in 0..len {
                    input.push(symbols[n % symbols.len()]);
                    n /= symbols.len();
                }
                assert_eq!(
                    base64_decoded_len(&input),
                    base64_decode(&input).map(|bytes| bytes.len()),
                    "{:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
    }

    /// Values longer than one chunk: padding or a bad byte on either side
    /// of a chunk boundary, and each length around it.
    #[test]
    fn decoded_len_agrees_with_decode_across_chunks() {
        let raw: Vec<u8> = (0..3 * CHUNK_SYMBOLS)
            .map(|i| (i * 37 + 11) as u8)
            .collect();
        for len in (CHUNK_SYMBOLS / 4 * 3 - 4)..(CHUNK_SYMBOLS / 4 * 3 + 4) {
            let encoded = base64_encode_no_pad(&raw[..len]);
            assert_eq!(base64_decoded_len(&encoded), Some(len));
            let mut padded = encoded.clone();
            padded.resize(encoded.len().next_multiple_of(4), b'=');
            assert_eq!(base64_decoded_len(&padded), Some(len), "{len} padded");
        }
        let encoded = base64_encode_no_pad(&raw);
        for at in [
            0,
            CHUNK_SYMBOLS - 2,
            CHUNK_SYMBOLS - 1,
            CHUNK_SYMBOLS,
            CHUNK_SYMBOLS + 1,
        ] {
            for byte in [b'=', b' ', b'-'] {
                let mut bad = encoded.clone();
                bad[at] = byte;
                assert_eq!(base64_decode(&bad), None);
                assert_eq!(base64_decoded_len(&bad), None, "{} at {at}", byte as char);
            }
        }
        let mut two_values = base64_encode_no_pad(&raw[..CHUNK_SYMBOLS / 4 * 3 - 1]);
        two_values.push(b'=');
        two_values.extend_from_slice(b"Zm9v");
        assert_eq!(base64_decode(&two_values), None);
        assert_eq!(base64_decoded_len(&two_values), None);
    }
}
