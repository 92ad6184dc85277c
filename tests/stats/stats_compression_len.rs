//! `stats::compression::uncompressed_len` against tonic's own decoder: the
//! exact length of every message tonic accepts, split into pieces any way,
//! and tonic's verdict (`INTERNAL` with the same text, or
//! `RESOURCE_EXHAUSTED`) on every message it rejects.
//!
//! zstd is checked with both decoders: the zstd C library (feature `zstd`,
//! tonic's own decoder, held to the same exact agreement as gzip and
//! deflate) and `ruzstd` (pure Rust, held to agreement on valid messages
//! and on the edge cases listed in `ruzstd_len`'s docs; its known
//! disagreements on corrupt input are measured and printed by
//! `ruzstd_disagreements_on_mutated_messages`).

use proptest::prelude::*;
use support::compression::{
    DEFAULT_LIMIT, ENCODINGS, Rng, Verdict, compress, protobuf_like, read_all, reference_verdict,
    tonic_verdict,
};
use tonic::Code;
use tonic_hotpath::stats::compression::{
    DecompressError, Encoding, ruzstd_len, uncompressed_len, uncompressed_len_fresh,
};

/// Our verdicts for `pieces`: every decoder that decodes `encoding`, named.
fn ours(encoding: Encoding, pieces: &[&[u8]], limit: u32) -> Vec<(&'static str, Verdict)> {
    let mut verdicts = vec![
        (
            "uncompressed_len",
            uncompressed_len(encoding, pieces, limit).into(),
        ),
        (
            "uncompressed_len_fresh",
            uncompressed_len_fresh(encoding, pieces, limit).into(),
        ),
    ];
    if encoding == Encoding::Zstd {
        #[cfg(feature = "zstd")]
        verdicts.push((
            "libzstd_len",
            tonic_hotpath::stats::compression::libzstd_len(pieces, limit).into(),
        ));
        verdicts.push(("ruzstd_len", ruzstd_len(pieces, limit).into()));
    }
    verdicts
}

/// Whether `name`'s verdict must match tonic's exactly (text included), or
/// only in kind (`ruzstd`, whose error texts are its own).
fn exact(encoding: Encoding, name: &str) -> bool {
    encoding != Encoding::Zstd
        || name == "libzstd_len"
        || cfg!(feature = "zstd") && name != "ruzstd_len"
}

/// Checks every decoder against the reference (and tonic itself, where the
/// message fits the limit on the wire) for `compressed` split at `splits`.
fn check(encoding: Encoding, compressed: &[u8], splits: &[usize], limit: u32) -> Verdict {
    let expected = reference_verdict(encoding, compressed, limit);
    if let Some(tonic) = tonic_verdict(encoding, compressed, limit) {
        assert_eq!(tonic, expected, "the reference is tonic's decoder");
    }
    let pieces = split(compressed, splits);
    for (name, verdict) in ours(encoding, &pieces, limit) {
        if exact(encoding, name) {
            assert_eq!(
                verdict, expected,
                "{name} {encoding} limit {limit} splits {splits:?}"
            );
        } else {
            assert_eq!(
                verdict.kind(),
                expected.kind(),
                "{name} {encoding} limit {limit} splits {splits:?}: {verdict:?} vs {expected:?}"
            );
        }
    }
    expected
}

/// `bytes` cut at `splits` (clamped, in any order, repeats give empty pieces).
fn split<'a>(bytes: &'a [u8], splits: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = splits.iter().map(|&at| at.min(bytes.len())).collect();
    cuts.sort_unstable();
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for cut in cuts {
        pieces.push(&bytes[start..cut]);
        start = cut;
    }
    pieces.push(&bytes[start..]);
    pieces
}

#[derive(Debug, Clone, Copy)]
enum Data {
    Random,
    Protobuf,
    Zeros,
}

fn data(kind: Data, len: usize, seed: u64) -> Vec<u8> {
    match kind {
        Data::Random => Rng::new(seed).bytes(len),
        Data::Protobuf => protobuf_like(len, seed),
        Data::Zeros => vec![0; len],
    }
}

#[test]
fn messages_of_every_size_give_their_exact_length() {
    for encoding in ENCODINGS {
        for len in [0, 1, 1024, 64 * 1024, 1024 * 1024] {
            for kind in [Data::Random, Data::Protobuf, Data::Zeros] {
                let message = data(kind, len, len as u64);
                let compressed = compress(encoding, &message);
                let len = len as u32;
                let whole = check(encoding, &compressed, &[], DEFAULT_LIMIT);
                assert_eq!(whole, Verdict::Len(len), "{encoding} {kind:?} {len}");
                // Exactly the limit is accepted, one byte over is not.
                assert_eq!(check(encoding, &compressed, &[], len), Verdict::Len(len));
                if len > 0 {
                    assert_eq!(
                        check(encoding, &compressed, &[], len - 1),
                        Verdict::TooLarge
                    );
                }
                // Split into thirds, and at every 4 KiB boundary.
                let third = compressed.len() / 3;
                check(encoding, &compressed, &[third, 2 * third], len);
                let every_4k: Vec<usize> = (0..compressed.len()).step_by(4096).collect();
                check(encoding, &compressed, &every_4k, len);
            }
        }
    }
}

#[test]
fn the_errors_carry_tonics_codes_and_messages() {
    let compressed = compress(Encoding::Gzip, b"hello, world");
    let too_large = uncompressed_len(Encoding::Gzip, &[&compressed[..]], 11).unwrap_err();
    assert!(matches!(too_large, DecompressError::TooLarge { limit: 11 }));
    assert_eq!(too_large.code(), Code::ResourceExhausted);
    assert_eq!(
        too_large.to_string(),
        "Error decompressing: size limit, of 11 bytes, exceeded while decompressing message"
    );
    let corrupt = uncompressed_len(Encoding::Gzip, &[&compressed[..5]], 100).unwrap_err();
    assert_eq!(corrupt.code(), Code::Internal);
    assert_eq!(
        corrupt.to_string(),
        "Error decompressing: unexpected end of file"
    );
    let corrupt = uncompressed_len(Encoding::Gzip, &[&compressed[..10]], 100).unwrap_err();
    assert_eq!(
        corrupt.to_string(),
        "Error decompressing: incomplete deflate stream"
    );

    assert_eq!(
        Encoding::from_header(b"gzip").unwrap(),
        Some(Encoding::Gzip)
    );
    assert_eq!(
        Encoding::from_header(b"deflate").unwrap(),
        Some(Encoding::Deflate)
    );
    assert_eq!(
        Encoding::from_header(b"zstd").unwrap(),
        Some(Encoding::Zstd)
    );
    assert_eq!(Encoding::from_header(b"identity").unwrap(), None);
    for unknown in [&b"br"[..], b"GZIP", b"gzip ", b"", b"\xff"] {
        let error = Encoding::from_header(unknown).unwrap_err();
        assert_eq!(error.code(), Code::Unimplemented);
        assert!(
            error
                .to_string()
                .starts_with("Content is compressed with `")
        );
    }
}

/// A message whose every prefix, and every single-byte corruption of which,
/// gets tonic's verdict.
fn every_truncation_and_flip(encoding: Encoding, compressed: &[u8], limit: u32) {
    for end in 0..compressed.len() {
        check(encoding, &compressed[..end], &[end / 2], limit);
    }
    for at in 0..compressed.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut corrupt = compressed.to_vec();
            corrupt[at] ^= flip;
            let expected = reference_verdict(encoding, &corrupt, limit);
            let pieces = split(&corrupt, &[at]);
            for (name, verdict) in ours(encoding, &pieces, limit) {
                if exact(encoding, name) {
                    assert_eq!(verdict, expected, "{name} {encoding} byte {at} ^ {flip:#x}");
                }
            }
        }
    }
}

#[test]
fn truncated_and_corrupted_messages_get_tonics_verdict() {
    for encoding in ENCODINGS {
        for message in [&b""[..], b"a", &protobuf_like(300, 7)] {
            let compressed = compress(encoding, message);
            every_truncation_and_flip(encoding, &compressed, DEFAULT_LIMIT);
            every_truncation_and_flip(encoding, &compressed, 10);
        }
    }
}

#[test]
fn gzip_edge_cases() {
    let message = protobuf_like(5000, 1);
    let member = compress(Encoding::Gzip, &message);
    let len = message.len() as u32;
    // Bytes after the member are ignored (flate2's GzDecoder reads one
    // member), a second member included.
    let mut trailing = member.clone();
    trailing.extend_from_slice(b"garbage");
    assert_eq!(
        check(Encoding::Gzip, &trailing, &[], DEFAULT_LIMIT),
        Verdict::Len(len)
    );
    let mut two = member.clone();
    two.extend_from_slice(&member);
    assert_eq!(
        check(Encoding::Gzip, &two, &[member.len()], DEFAULT_LIMIT),
        Verdict::Len(len)
    );
    // A bad CRC-32, a bad length in the trailer.
    for at in [member.len() - 8, member.len() - 1] {
        let mut bad = member.clone();
        bad[at] ^= 1;
        let verdict = check(Encoding::Gzip, &bad, &[at], DEFAULT_LIMIT);
        assert!(matches!(verdict, Verdict::Corrupt(_)), "{verdict:?}");
        // Too large wins over a bad trailer: the output passes the limit
        // before the trailer is read.
        assert_eq!(check(Encoding::Gzip, &bad, &[], len - 1), Verdict::TooLarge);
    }
    // Headers with every optional field, a header CRC (right and wrong),
    // reserved flags, a bad magic or method; the deflate body and trailer
    // of `member` after them.
    let body = &member[10..];
    let mut headers: Vec<Vec<u8>> = Vec::new();
    for flags in 0u8..=0xff {
        let mut header = vec![0x1f, 0x8b, 8, flags, 1, 2, 3, 4, 0, 3];
        if flags & 0x04 != 0 {
            header.extend_from_slice(&[5, 0, b'x', b't', b'r', b'a', b'!']);
        }
        if flags & 0x08 != 0 {
            header.extend_from_slice(b"name.bin\0");
        }
        if flags & 0x10 != 0 {
            header.extend_from_slice(b"a comment\0");
        }
        if flags & 0x02 != 0 {
            let mut crc = flate2::Crc::new();
            crc.update(&header);
            header.extend_from_slice(&(crc.sum() as u16).to_le_bytes());
        }
        headers.push(header);
    }
    let mut bad_crc = headers[0x1e].clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    headers.push(bad_crc);
    headers.push(vec![0x1f, 0x8c, 8, 0, 0, 0, 0, 0, 0, 3]);
    headers.push(vec![0x1f, 0x8b, 7, 0, 0, 0, 0, 0, 0, 3]);
    for header in headers {
        let mut message = header.clone();
        message.extend_from_slice(body);
        for splits in [&[][..], &[1], &[header.len() - 1, header.len() + 1]] {
            check(Encoding::Gzip, &message, splits, DEFAULT_LIMIT);
        }
        for end in 0..=header.len() {
            check(Encoding::Gzip, &message[..end], &[], DEFAULT_LIMIT);
        }
    }
    // A name or comment longer than flate2's 65535-byte limit, and exactly
    // at it; an extra field big enough to bypass flate2's 32 KiB window.
    for name_len in [65535, 65536] {
        let mut message = vec![0x1f, 0x8b, 8, 0x08, 0, 0, 0, 0, 0, 3];
        message.extend(std::iter::repeat_n(b'n', name_len));
        message.push(0);
        message.extend_from_slice(body);
        check(Encoding::Gzip, &message, &[40_000], DEFAULT_LIMIT);
    }
    for xlen in [32_000u16, 32_760, 40_000, 65_535] {
        let mut message = vec![0x1f, 0x8b, 8, 0x04, 0, 0, 0, 0, 0, 3];
        message.extend_from_slice(&xlen.to_le_bytes());
        message.extend(std::iter::repeat_n(7, usize::from(xlen)));
        message.extend_from_slice(body);
        assert_eq!(
            check(Encoding::Gzip, &message, &[100], DEFAULT_LIMIT),
            Verdict::Len(len)
        );
    }
}

#[test]
fn deflate_edge_cases() {
    let message = protobuf_like(50_000, 2);
    let stream = compress(Encoding::Deflate, &message);
    let len = message.len() as u32;
    let mut trailing = stream.clone();
    trailing.extend_from_slice(b"garbage after the zlib stream");
    check(Encoding::Deflate, &trailing, &[stream.len()], DEFAULT_LIMIT);
    // A bad Adler-32. It is checked in the same decoder call that hands
    // out the last bytes, so it wins over a limit crossed by those bytes,
    // not over one crossed earlier.
    let mut bad = stream.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(matches!(
        check(Encoding::Deflate, &bad, &[], DEFAULT_LIMIT),
        Verdict::Corrupt(_)
    ));
    assert!(matches!(
        check(Encoding::Deflate, &bad, &[], len - 1),
        Verdict::Corrupt(_)
    ));
    assert_eq!(check(Encoding::Deflate, &bad, &[], 100), Verdict::TooLarge);
    // A raw deflate stream (no zlib header) and a gzip member.
    let raw = read_all(flate2::read::DeflateEncoder::new(
        &message[..],
        flate2::Compression::new(6),
    ));
    check(Encoding::Deflate, &raw, &[], DEFAULT_LIMIT);
    check(
        Encoding::Deflate,
        &compress(Encoding::Gzip, &message),
        &[],
        DEFAULT_LIMIT,
    );
}

/// zstd frames other than tonic's: with a checksum, with a content size,
/// with a dictionary id, concatenated, and skippable frames.
#[test]
fn zstd_edge_cases() {
    use std::io::Write;
    let message = protobuf_like(300_000, 3);
    let len = message.len() as u32;
    let plain = compress(Encoding::Zstd, &message);
    let with_checksum = {
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        encoder.include_checksum(true).unwrap();
        encoder.write_all(&message).unwrap();
        encoder.finish().unwrap()
    };
    // One-shot compression writes the content size (single segment).
    let with_size = zstd::bulk::compress(&message, 3).unwrap();
    let small_with_size = zstd::bulk::compress(b"tiny", 3).unwrap();
    let empty_with_size = zstd::bulk::compress(b"", 3).unwrap();
    // Compressed with a raw-content dictionary (no dictionary id in the
    // frame) and decodable without it, since the input is too short to
    // refer to it.
    let with_dict_id = {
        let dict: Vec<u8> = protobuf_like(4096, 9);
        zstd::bulk::Compressor::with_dictionary(3, &dict)
            .unwrap()
            .compress(b"needs a dictionary")
            .unwrap()
    };
    let skippable = |payload: &[u8]| {
        let mut frame = 0x184D_2A53u32.to_le_bytes().to_vec();
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(payload);
        frame
    };
    let concat = |frames: &[&[u8]]| frames.concat();
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("plain", plain.clone()),
        ("checksum", with_checksum.clone()),
        ("content size", with_size.clone()),
        ("small content size", small_with_size.clone()),
        ("empty content size", empty_with_size.clone()),
        ("raw-content dictionary", with_dict_id),
        ("two frames", concat(&[&plain, &with_checksum])),
        ("skippable first", concat(&[&skippable(b"meta"), &plain])),
        ("skippable last", concat(&[&plain, &skippable(b"")])),
        ("only skippable", skippable(b"nothing here")),
        ("truncated skippable", skippable(b"cut")[..9].to_vec()),
        ("trailing zeros", concat(&[&plain, &[0, 0, 0, 0]])),
        ("trailing byte", concat(&[&plain, &[0x28]])),
        (
            "trailing magic",
            concat(&[&plain, &0xFD2F_B528u32.to_le_bytes()]),
        ),
        ("empty", Vec::new()),
    ];
    // Corrupt checksum, content size and reserved bit.
    let mut bad_checksum = with_checksum.clone();
    *bad_checksum.last_mut().unwrap() ^= 1;
    cases.push(("bad checksum", bad_checksum));
    let mut bad_size = small_with_size.clone();
    bad_size[5] ^= 1; // the 1-byte content size of a single-segment frame
    cases.push(("bad content size", bad_size));
    let mut reserved = plain.clone();
    reserved[4] |= 0x08;
    cases.push(("reserved bit", reserved));
    // zstd's default window limit, 128 MiB (+1): the window tonic's frames
    // declare, at the limit and over it.
    assert_eq!(
        plain[4] & 0x20,
        0,
        "tonic's frames have a window descriptor"
    );
    for (name, descriptor) in [("window 128 MiB", 17 << 3), ("window 144 MiB", 17 << 3 | 1)] {
        let mut window = plain.clone();
        window[5] = descriptor;
        cases.push((name, window));
    }
    for (name, compressed) in &cases {
        for limit in [DEFAULT_LIMIT, len, len - 1, 3] {
            let verdict = check(Encoding::Zstd, compressed, &[compressed.len() / 2], limit);
            if limit == DEFAULT_LIMIT {
                println!("zstd {name}: {verdict:?}");
            }
        }
    }
}

/// The message is decoded in the same calls as in tonic, on the same input
/// windows, however it is split: a corrupt message that is also too large
/// gets the verdict tonic gives it, which depends on where the corruption
/// falls relative to tonic's 8 KiB reads.
#[test]
fn corrupt_and_too_large_gets_the_same_verdict_as_tonic() {
    let message = protobuf_like(200_000, 4);
    for encoding in ENCODINGS {
        let compressed = compress(encoding, &message);
        let mut rng = Rng::new(encoding as u64);
        for _ in 0..60 {
            let mut corrupt = compressed.clone();
            let at = rng.below(corrupt.len() as u64) as usize;
            corrupt[at] ^= 1 << rng.below(8);
            let limit = rng.below(message.len() as u64 + 10) as u32;
            let splits = [
                rng.below(corrupt.len() as u64) as usize,
                rng.below(corrupt.len() as u64) as usize,
            ];
            let expected = reference_verdict(encoding, &corrupt, limit);
            let pieces = split(&corrupt, &splits);
            for (name, verdict) in ours(encoding, &pieces, limit) {
                if exact(encoding, name) {
                    assert_eq!(
                        verdict, expected,
                        "{name} {encoding} byte {at} limit {limit}"
                    );
                }
            }
        }
    }
}

/// Where `ruzstd` disagrees with the C library on mutated messages: only
/// on Huffman-coded literals whose four streams decode to the wrong
/// counts, which `ruzstd` rejects and the C library decodes (to the right
/// total length, wrong content; tonic's frames carry no checksum that
/// would catch it). Prints how often.
#[test]
fn ruzstd_disagrees_only_on_literal_counts() {
    let mut rng = Rng::new(99);
    let (mut tried, mut disagreements) = (0, 0);
    for round in 0..400u64 {
        let message = protobuf_like(1 + rng.below(40_000) as usize, round);
        let mut compressed = compress(Encoding::Zstd, &message);
        for _ in 0..=rng.below(3) {
            let at = rng.below(compressed.len() as u64) as usize;
            compressed[at] ^= 1 << rng.below(8);
        }
        for limit in [DEFAULT_LIMIT, rng.below(message.len() as u64 + 1) as u32] {
            tried += 1;
            let expected = reference_verdict(Encoding::Zstd, &compressed, limit);
            let verdict = Verdict::from(ruzstd_len(&[&compressed[..]], limit));
            if verdict.kind() != expected.kind() {
                disagreements += 1;
                assert!(
                    matches!(expected, Verdict::Len(_) | Verdict::TooLarge)
                        && matches!(&verdict, Verdict::Corrupt(text) if text.contains("DecompressLiteralsError")),
                    "libzstd {expected:?}, ruzstd {verdict:?}"
                );
            }
        }
    }
    println!("ruzstd disagrees with libzstd on {disagreements} of {tried} mutated messages");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Valid messages of any size, split anywhere, give their length.
    #[test]
    fn any_split_gives_the_exact_length(
        encoding in prop::sample::select(ENCODINGS.to_vec()),
        len in 0usize..200_000,
        seed in any::<u64>(),
        random in any::<bool>(),
        splits in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let message = if random { Rng::new(seed).bytes(len) } else { protobuf_like(len, seed) };
        let compressed = compress(encoding, &message);
        let splits: Vec<usize> = splits.iter().map(|i| i.index(compressed.len() + 1)).collect();
        let pieces = split(&compressed, &splits);
        for (name, verdict) in ours(encoding, &pieces, DEFAULT_LIMIT) {
            prop_assert_eq!(verdict, Verdict::Len(len as u32), "{}", name);
        }
        let limit = len as u32;
        prop_assert_eq!(Verdict::from(uncompressed_len(encoding, &pieces, limit)), Verdict::Len(limit));
        if len > 0 {
            prop_assert_eq!(
                Verdict::from(uncompressed_len(encoding, &pieces, limit - 1)),
                Verdict::TooLarge
            );
        }
    }

    /// Random bytes, random splits, random limits: never a panic, and
    /// tonic's verdict.
    #[test]
    fn random_bytes_get_tonics_verdict(
        encoding in prop::sample::select(ENCODINGS.to_vec()),
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        splits in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        limit in 0u32..4096,
    ) {
        let splits: Vec<usize> = splits.iter().map(|i| i.index(bytes.len() + 1)).collect();
        check(encoding, &bytes, &splits, limit);
    }

    /// Valid messages with a few bytes changed, random limits and splits.
    #[test]
    fn mutated_messages_get_tonics_verdict(
        encoding in prop::sample::select(ENCODINGS.to_vec()),
        len in 0usize..50_000,
        seed in any::<u64>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
        splits in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        limit in prop::option::of(0u32..60_000),
    ) {
        let message = protobuf_like(len, seed);
        let mut compressed = compress(encoding, &message);
        for (at, flip) in flips {
            let at = at.index(compressed.len());
            compressed[at] ^= flip;
        }
        if let Some(cut) = cut {
            compressed.truncate(cut.index(compressed.len() + 1));
        }
        let splits: Vec<usize> = splits.iter().map(|i| i.index(compressed.len() + 1)).collect();
        let limit = limit.unwrap_or(DEFAULT_LIMIT);
        let expected = reference_verdict(encoding, &compressed, limit);
        let pieces = split(&compressed, &splits);
        for (name, verdict) in ours(encoding, &pieces, limit) {
            if exact(encoding, name) {
                prop_assert_eq!(verdict, expected.clone(), "{}", name);
            }
        }
    }
}
