//! Standard base64 without padding, as tonic's `MetadataValue<Binary>`
//! sends `-bin` values.

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
        }
    }
}
