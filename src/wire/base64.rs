//! `-bin` values: standard base64 without padding, as tonic's
//! `MetadataValue<Binary>` sends them, and read padded or not, as tonic
//! reads them. One hand-written codec for every part (the metadata chain,
//! trace propagation, the binary log): small, and no dependency for the
//! `metadata` feature; the binary log's fuzz check holds its decoding to
//! the `base64` crate in tonic's configuration.

const BASE64_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 without padding, into a buffer of exactly the right size.
pub(crate) fn base64_encode_no_pad(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity((input.len() * 4).div_ceil(3));
    let symbol = |index: u32| BASE64_ALPHABET[(index & 0x3f) as usize];
    let mut chunks = input.chunks_exact(3);
    for chunk in &mut chunks {
        let n = u32::from(chunk[0]) << 16 | u32::from(chunk[1]) << 8 | u32::from(chunk[2]);
        out.extend_from_slice(&[symbol(n >> 18), symbol(n >> 12), symbol(n >> 6), symbol(n)]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend_from_slice(&[symbol(n >> 18), symbol(n >> 12)]);
        }
        [a, b] => {
            let n = u32::from(a) << 16 | u32::from(b) << 8;
            out.extend_from_slice(&[symbol(n >> 18), symbol(n >> 12), symbol(n >> 6)]);
        }
        _ => {}
    }
    out
}

/// The 6-bit value of a standard base64 symbol.
fn symbol_value(symbol: u8) -> Option<u32> {
    let value = match symbol {
        b'A'..=b'Z' => symbol - b'A',
        b'a'..=b'z' => symbol - b'a' + 26,
        b'0'..=b'9' => symbol - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(value))
}

/// Decodes standard base64 with or without padding, as tonic's
/// `MetadataValue<Binary>::to_bytes` does (the `base64` crate's
/// `DecodePaddingMode::Indifferent`): the last group may carry one or two
/// `=`, no more than it lacks (`Zg`, `Zg=` and `Zg==` are all `f`), and
/// the unused bits of the last symbol must be zero. `None` for anything
/// else: another byte, whitespace included, or a URL-safe symbol.
pub(crate) fn base64_decode(input: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len() / 4 * 3 + 2);
    base64_decode_with(input, |bytes| out.extend_from_slice(bytes))?;
    Some(out)
}

/// The length `input` decodes to, `None` where [`base64_decode`] refuses
/// it; decodes nothing into memory.
pub(crate) fn base64_decoded_len(input: &[u8]) -> Option<usize> {
    let mut len = 0;
    base64_decode_with(input, |bytes| len += bytes.len())?;
    Some(len)
}

/// Appends what `input` decodes to onto `out`, as [`base64_decode`]
/// reads it; `false`, with `out` as it was, where it refuses it.
pub(crate) fn base64_decode_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let decoded = base64_decode_with(input, |bytes| out.extend_from_slice(bytes)).is_some();
    if !decoded {
        out.truncate(start);
    }
    decoded
}

/// Decodes `input` group by group into `emit`; `None` (after emitting
/// the groups before the fault) where it is not base64 as
/// [`base64_decode`] reads it.
fn base64_decode_with(input: &[u8], mut emit: impl FnMut(&[u8])) -> Option<()> {
    let data = match input {
        [rest @ .., b'=', b'='] | [rest @ .., b'='] => rest,
        _ => input,
    };
    let padding = input.len() - data.len();
    if data.len() % 4 == 1 || (padding > 0 && (data.len() % 4 == 0 || data.len() % 4 + padding > 4))
    {
        return None;
    }
    let mut chunks = data.chunks(4);
    for chunk in &mut chunks {
        let mut n = 0u32;
        for &symbol in chunk {
            n = n << 6 | symbol_value(symbol)?;
        }
        match chunk.len() {
            4 => emit(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]),
            3 if n & 0b11 == 0 => emit(&[(n >> 10) as u8, (n >> 2) as u8]),
            2 if n & 0b1111 == 0 => emit(&[(n >> 4) as u8]),
            _ => return None,
        }
    }
    Some(())
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
            assert_eq!(base64_decode(expected.as_bytes()).unwrap(), input);
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

    /// Every string of up to 6 symbols over an alphabet with each kind of
    /// symbol (last-symbol bit patterns, padding, bytes outside the
    /// alphabet) decodes as tonic's engine decodes it.
    #[test]
    fn decode_agrees_with_tonics_engine() {
        use base64::Engine as _;
        use base64::engine::DecodePaddingMode;
        use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
        let tonic = GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
        );
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
                    base64_decode(&input),
                    tonic.decode(&input).ok(),
                    "{:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
    }
}
