//! A compressed message's uncompressed length and bytes
//! (`stats::compression`), in every encoding, from arbitrary pieces, with
//! a decode limit: the same verdict as tonic's own decoder on the same
//! message (the same length and bytes, or the same kind of error), and the same
//! verdict from the length-only path and the path that keeps the bytes.

use tonic_hotpath::internals;
use tonic_hotpath::stats::compression::{
    DecompressError, Encoding, uncompressed_len, uncompressed_len_fresh,
};

use super::compression_support::{ENCODINGS, Verdict, tonic_verdict};
use super::input::{Input, split};

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let encoding = ENCODINGS[usize::from(input.byte() % 3)];
    // Small limits reach the limit; the largest is tonic's default.
    let limit = match input.byte() % 4 {
        0 => u32::from(input.byte()),
        1 => u32::from(input.u16()),
        2 => 1 << 20,
        _ => 4 << 20,
    };
    let sizes = input.until(0xff).to_vec();
    let message = input.rest();
    let pieces = split(message, &sizes);

    let counted = Verdict::from(uncompressed_len(encoding, &pieces, limit));
    let kept = internals::decompress(encoding, &pieces, limit);
    let kept_verdict = match &kept {
        Ok(bytes) => Verdict::Len(bytes.len() as u32),
        Err(DecompressError::Corrupt(error)) => Verdict::Corrupt(error.to_string()),
        Err(DecompressError::TooLarge { .. }) => Verdict::TooLarge,
    };
    assert_eq!(
        counted, kept_verdict,
        "length and bytes paths: {encoding:?}"
    );
    // The thread's decoders, reused from message to message, keep nothing
    // of the messages before: the verdict (its kind: see below for the
    // text) of decoders made for this one.
    let fresh = Verdict::from(uncompressed_len_fresh(encoding, &pieces, limit));
    assert_eq!(
        counted.kind(),
        fresh.kind(),
        "reused and fresh decoders: {encoding:?}: {counted:?}, {fresh:?}"
    );

    // tonic refuses a message longer on the wire than the limit before
    // decompressing it: nothing to compare then.
    let Some(tonic) = tonic_verdict(encoding, message, limit) else {
        return;
    };
    // The same verdict; for a corrupt message the same kind, not always
    // the same text: zstd names the first problem it meets, and where it
    // meets one depends on how much of the frame each call gets (tonic
    // hands it the whole message, the layer the body's chunks).
    assert_eq!(
        counted.kind(),
        tonic.kind(),
        "{encoding:?} limit {limit}: ours {counted:?}, tonic's {tonic:?}"
    );
    if let Ok(bytes) = &kept {
        assert_eq!(bytes.as_slice(), decoded(encoding, message), "the bytes");
    }
}

/// The whole decompressed message, by the decoders tonic uses.
fn decoded(encoding: Encoding, message: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let read = match encoding {
        Encoding::Gzip => flate2::read::GzDecoder::new(message).read_to_end(&mut out),
        Encoding::Deflate => flate2::read::ZlibDecoder::new(message).read_to_end(&mut out),
        Encoding::Zstd => zstd::stream::read::Decoder::new(message)
            .and_then(|mut decoder| decoder.read_to_end(&mut out)),
    };
    read.expect("tonic decoded it");
    out
}
