//! `stats::compression` benches: the uncompressed length of one compressed
//! message, beside what tonic does with the same message (decompress it
//! into a fresh `BytesMut`, reserved with its growth policy and limited to
//! the decode limit, as for a unary RPC). The ratio is the extra cost per
//! compressed message that the stats layer adds to tonic's own decoding.
//!
//! Per encoding (one group each), messages of 1 KiB, 64 KiB and 1 MiB of
//! protobuf-like data compressed as tonic compresses them:
//! - `tonic`: tonic 0.14.9's `decompress` (a copy; see
//!   `support::compression`), the baseline;
//! - `uncompressed_len`: ours, with the thread's reused decoders;
//! - `fresh_decoders`: ours with decoders made per message (what reuse saves);
//! - `split_16k`: ours on the message split into 16 KiB pieces (HTTP/2's
//!   default DATA frame size), so windows straddle pieces and are copied;
//! - zstd only: `ruzstd` (pure Rust) and, with feature `zstd`, `libzstd`
//!   (the C library, as tonic), whichever `uncompressed_len` uses.
//!
//! `cargo bench --bench compression --features bench-internals -- --warm-up-time 1 --measurement-time 2`
//! (add `zstd` to the features for the `libzstd` rows).

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use support::compression::{DEFAULT_LIMIT, ENCODINGS, compress, protobuf_like, tonic_decompress};
use tonic_hotpath::stats::compression::{
    Encoding, ruzstd_len, uncompressed_len, uncompressed_len_fresh,
};

const SIZES: [(usize, &str); 3] = [(1024, "1KiB"), (64 * 1024, "64KiB"), (1024 * 1024, "1MiB")];

fn compression(c: &mut Criterion) {
    for encoding in ENCODINGS {
        let mut group = c.benchmark_group(format!("compression/{encoding}"));
        for (size, name) in SIZES {
            let message = protobuf_like(size, size as u64);
            let compressed = compress(encoding, &message);
            let pieces: Vec<&[u8]> = compressed.chunks(16 * 1024).collect();
            let whole = [&compressed[..]];
            assert_eq!(
                uncompressed_len(encoding, &pieces, DEFAULT_LIMIT).unwrap(),
                size as u32
            );
            println!(
                "{encoding} {name}: {} bytes compressed ({:.1}x)",
                compressed.len(),
                size as f64 / compressed.len() as f64
            );
            group.throughput(Throughput::Bytes(size as u64));
            group.bench_function(format!("tonic/{name}"), |b| {
                b.iter(|| {
                    let mut out = BytesMut::new();
                    tonic_decompress(encoding, black_box(&compressed), DEFAULT_LIMIT, &mut out)
                        .unwrap();
                    out
                })
            });
            group.bench_function(format!("uncompressed_len/{name}"), |b| {
                b.iter(|| uncompressed_len(encoding, black_box(&whole), DEFAULT_LIMIT).unwrap())
            });
            group.bench_function(format!("fresh_decoders/{name}"), |b| {
                b.iter(|| {
                    uncompressed_len_fresh(encoding, black_box(&whole), DEFAULT_LIMIT).unwrap()
                })
            });
            group.bench_function(format!("split_16k/{name}"), |b| {
                b.iter(|| uncompressed_len(encoding, black_box(&pieces), DEFAULT_LIMIT).unwrap())
            });
            if encoding == Encoding::Zstd {
                group.bench_function(format!("ruzstd/{name}"), |b| {
                    b.iter(|| ruzstd_len(black_box(&whole), DEFAULT_LIMIT).unwrap())
                });
                #[cfg(feature = "zstd")]
                group.bench_function(format!("libzstd/{name}"), |b| {
                    b.iter(|| {
                        tonic_hotpath::stats::compression::libzstd_len(
                            black_box(&whole),
                            DEFAULT_LIMIT,
                        )
                        .unwrap()
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, compression);
criterion_main!(benches);
