//! `metadata` benches: the persistent chain beside what a tonic user does
//! today, in the same group so one run shows the ratio.
//!
//! - `append_one`: one append onto a 10-entry chain (the new node's drop
//!   timed too, except where the name says otherwise) vs cloning a 10-entry
//!   `MetadataMap` and inserting;
//! - `chain_static` / `chain_runtime`: N = 1 … 10 000 appends from empty
//!   (throughput = appends, so criterion's time / N is the per-append
//!   cost), with and without timing the chain's drop, vs clone-per-append
//!   and mutate-in-place `MetadataMap` (their drop timed);
//! - `issue_8860`: 4 base keys + 2 appends read for sending, written into a
//!   fresh `HeaderMap`, a pre-sized one, or a request's headers that already
//!   hold tonic's `te` and `content-type` (beside building those alone), or
//!   materialised to a `MetadataMap`;
//! - `get_all`: one key's values from chains of 10 and 100 vs
//!   materialise-then-get;
//! - `base64`: `-bin` values encoded and decoded, this crate's codec
//!   beside the `base64` crate (with `--features bench-internals`);
//! - `layer write` (printed first, interleaved, not a criterion row): the
//!   client layer's whole call beside a naive layer and the floor, for
//!   chains of 2 to 50 entries (see `metadata_layer/mod.rs` for the rows).
//!
//! Allocation counts per operation are asserted and printed by
//! `cargo test --test metadata metadata_alloc -- --nocapture`.
//!
//! Run: `cargo bench --bench metadata`.

#[path = "interleaved/mod.rs"]
mod interleaved;
#[path = "metadata_layer/mod.rs"]
mod layer_write;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use http::{HeaderMap, HeaderValue};
use tonic::metadata::{Ascii, MetadataKey, MetadataMap, MetadataValue};
use tonic_hotpath::metadata::{MetadataEntry, OutgoingMetadata};

const SIZES: [usize; 5] = [1, 10, 100, 1_000, 10_000];
/// Clone-per-append is O(N²); beyond this it takes minutes per sample.
const CLONE_PER_APPEND_MAX: usize = 1_000;

const STATIC_KEYS: [&str; 8] = [
    "x-trace-id",
    "x-span-id",
    "x-tenant",
    "x-route",
    "x-caller",
    "x-region",
    "x-priority",
    "x-attempt",
];

fn static_key(i: usize) -> &'static str {
    STATIC_KEYS[i % STATIC_KEYS.len()]
}

/// Keys and values as runtime strings, built outside the timed loop.
fn runtime_pairs(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("x-key-{}", i % 64), format!("value-{i}")))
        .collect()
}

fn unlimited() -> OutgoingMetadata {
    OutgoingMetadata::with_limit(usize::MAX)
}

fn chain_of(n: usize) -> OutgoingMetadata {
    (0..n).fold(unlimited(), |chain, i| {
        chain.append_static(static_key(i), "v").unwrap()
    })
}

fn map_of(n: usize) -> MetadataMap {
    let mut map = MetadataMap::new();
    for i in 0..n {
        map.append(static_key(i), MetadataValue::from_static("v"));
    }
    map
}

fn append_one(c: &mut Criterion) {
    let mut group = c.benchmark_group("metadata/append_one");
    let chain = chain_of(10);
    let map = map_of(10);
    let (key, value) = (String::from("x-request-id"), String::from("r-12345"));
    let shared = bytes::Bytes::from_static(b"r-12345");

    group.bench_function("chain append_static", |b| {
        b.iter(|| {
            black_box(&chain)
                .append_static("x-request-id", "r-12345")
                .unwrap()
        })
    });
    group.bench_function("chain append_static (node drop not timed)", |b| {
        b.iter_with_large_drop(|| {
            black_box(&chain)
                .append_static("x-request-id", "r-12345")
                .unwrap()
        })
    });
    let entry = MetadataEntry::from_static("x-request-id", "r-12345").unwrap();
    group.bench_function("chain append_entry (pre-built entry)", |b| {
        b.iter(|| black_box(&chain).append_entry(entry.clone()).unwrap())
    });
    const REQUEST_ID: MetadataEntry = tonic_hotpath::metadata_entry!("x-request-id", "r-12345");
    group.bench_function("chain append_entry (const entry)", |b| {
        b.iter(|| black_box(&chain).append_entry(REQUEST_ID).unwrap())
    });
    group.bench_function("chain append (runtime strings)", |b| {
        b.iter(|| {
            black_box(&chain)
                .append(black_box(&key), black_box(&value))
                .unwrap()
        })
    });
    group.bench_function("chain append_bytes", |b| {
        b.iter(|| {
            black_box(&chain)
                .append_bytes(black_box(&key), shared.clone())
                .unwrap()
        })
    });
    group.bench_function("chain append_bin (16 bytes)", |b| {
        b.iter(|| {
            black_box(&chain)
                .append_bin("x-token-bin", &[7; 16])
                .unwrap()
        })
    });
    // The floor: what any persistent node costs, whatever it holds.
    let parent = std::sync::Arc::new(0u64);
    group.bench_function(
        "floor: Arc::new(128-byte node holding a parent Arc clone)",
        |b| b.iter(|| std::sync::Arc::new((black_box(&parent).clone(), [0u64; 15]))),
    );
    group.bench_function("MetadataMap clone + append (static)", |b| {
        b.iter(|| {
            let mut next = black_box(&map).clone();
            next.append("x-request-id", MetadataValue::from_static("r-12345"));
            next
        })
    });
    group.bench_function("MetadataMap clone + append (runtime strings)", |b| {
        b.iter(|| {
            let mut next = black_box(&map).clone();
            let key: MetadataKey<Ascii> = black_box(&key).parse().unwrap();
            next.append(key, black_box(&value).parse().unwrap());
            next
        })
    });
    group.finish();
}

fn chain_static(c: &mut Criterion) {
    let mut group = c.benchmark_group("metadata/chain_static");
    for n in SIZES {
        group.throughput(Throughput::Elements(n as u64));
        if n >= 1_000 {
            group.sample_size(10);
        }
        let build = |n: usize| {
            let mut chain = unlimited();
            for i in 0..n {
                chain = chain.append_static(static_key(i), "v").unwrap();
            }
            chain
        };
        group.bench_with_input(BenchmarkId::new("chain", n), &n, |b, &n| {
            b.iter(|| build(n))
        });
        group.bench_with_input(
            BenchmarkId::new("chain (drop not timed)", n),
            &n,
            |b, &n| b.iter_with_large_drop(|| build(n)),
        );
        group.bench_with_input(
            BenchmarkId::new("MetadataMap mutate-in-place", n),
            &n,
            |b, &n| {
                b.iter(|| {
                    let mut map = MetadataMap::new();
                    for i in 0..n {
                        map.append(static_key(i), MetadataValue::from_static("v"));
                    }
                    map
                })
            },
        );
        if n <= CLONE_PER_APPEND_MAX {
            group.bench_with_input(
                BenchmarkId::new("MetadataMap clone-per-append", n),
                &n,
                |b, &n| {
                    b.iter(|| {
                        let mut map = MetadataMap::new();
                        for i in 0..n {
                            let mut next = map.clone();
                            next.append(static_key(i), MetadataValue::from_static("v"));
                            map = next;
                        }
                        map
                    })
                },
            );
        }
    }
    group.finish();
}

fn chain_runtime(c: &mut Criterion) {
    let mut group = c.benchmark_group("metadata/chain_runtime");
    for n in SIZES {
        let pairs = runtime_pairs(n);
        group.throughput(Throughput::Elements(n as u64));
        if n >= 1_000 {
            group.sample_size(10);
        }
        let build = |pairs: &[(String, String)]| {
            let mut chain = unlimited();
            for (key, value) in pairs {
                chain = chain.append(key, value).unwrap();
            }
            chain
        };
        group.bench_with_input(BenchmarkId::new("chain", n), &pairs, |b, pairs| {
            b.iter(|| build(pairs))
        });
        group.bench_with_input(
            BenchmarkId::new("chain (drop not timed)", n),
            &pairs,
            |b, pairs| b.iter_with_large_drop(|| build(pairs)),
        );
        group.bench_with_input(
            BenchmarkId::new("MetadataMap mutate-in-place", n),
            &pairs,
            |b, pairs| {
                b.iter(|| {
                    let mut map = MetadataMap::new();
                    for (key, value) in pairs {
                        let key: MetadataKey<Ascii> = key.parse().unwrap();
                        map.append(key, value.parse().unwrap());
                    }
                    map
                })
            },
        );
        if n <= CLONE_PER_APPEND_MAX {
            group.bench_with_input(
                BenchmarkId::new("MetadataMap clone-per-append", n),
                &pairs,
                |b, pairs| {
                    b.iter(|| {
                        let mut map = MetadataMap::new();
                        for (key, value) in pairs {
                            let mut next = map.clone();
                            let key: MetadataKey<Ascii> = key.parse().unwrap();
                            next.append(key, value.parse().unwrap());
                            map = next;
                        }
                        map
                    })
                },
            );
        }
    }
    group.finish();
}

/// grpc-go issue #8860: a base of 4 keys plus 2 appends.
fn issue_8860(c: &mut Criterion) {
    let mut group = c.benchmark_group("metadata/issue_8860");
    let mut base = MetadataMap::new();
    base.insert("authorization", MetadataValue::from_static("Bearer token"));
    base.insert("x-request-id", MetadataValue::from_static("req-1"));
    base.insert("x-tenant", MetadataValue::from_static("acme"));
    base.insert("x-region", MetadataValue::from_static("eu-west-1"));
    let chain = OutgoingMetadata::from_metadata_map(base.clone())
        .unwrap()
        .append_static("x-trace-id", "trace-1")
        .unwrap()
        .append_static("x-span-id", "span-1")
        .unwrap();

    group.bench_function("chain write_to HeaderMap", |b| {
        b.iter(|| {
            let mut headers = HeaderMap::new();
            black_box(&chain).write_to(&mut headers).unwrap();
            headers
        })
    });
    group.bench_function("chain write_to HeaderMap::with_capacity(len)", |b| {
        b.iter(|| {
            let mut headers = HeaderMap::with_capacity(black_box(&chain).len());
            black_box(&chain).write_to(&mut headers).unwrap();
            headers
        })
    });
    // The map the client layer really writes into: a request's headers,
    // already holding what tonic set (`te`, `content-type`).
    group.bench_function("request headers (te, content-type) alone", |b| {
        b.iter(request_headers)
    });
    group.bench_function("chain write_to request headers (te, content-type)", |b| {
        b.iter(|| {
            let mut headers = request_headers();
            black_box(&chain).write_to(&mut headers).unwrap();
            headers
        })
    });
    group.bench_function("chain to_metadata_map", |b| {
        b.iter(|| black_box(&chain).to_metadata_map())
    });
    group.bench_function("MetadataMap clone + 2 appends + into_headers", |b| {
        b.iter(|| {
            let mut map = black_box(&base).clone();
            map.append("x-trace-id", MetadataValue::from_static("trace-1"));
            map.append("x-span-id", MetadataValue::from_static("span-1"));
            map.into_headers()
        })
    });
    group.bench_function(
        "MetadataMap clone + 2 appends + into_headers + te, content-type",
        |b| {
            b.iter(|| {
                let mut map = black_box(&base).clone();
                map.append("x-trace-id", MetadataValue::from_static("trace-1"));
                map.append("x-span-id", MetadataValue::from_static("span-1"));
                let mut headers = map.into_headers();
                headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
                headers.insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/grpc"),
                );
                headers
            })
        },
    );
    group.finish();
}

/// A request's headers as tonic hands them to the layers below the client:
/// `te` and `content-type` already set.
fn request_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers
}

fn get_all(c: &mut Criterion) {
    let mut group = c.benchmark_group("metadata/get_all");
    for n in [10, 100] {
        let chain = chain_of(n);
        let map = map_of(n);
        let sum = |values: &mut dyn Iterator<Item = usize>| values.sum::<usize>();
        group.bench_with_input(BenchmarkId::new("chain get_all", n), &n, |b, _| {
            b.iter(|| sum(&mut black_box(&chain).get_all("x-tenant").map(|v| v.len())))
        });
        group.bench_with_input(
            BenchmarkId::new("chain to_metadata_map + get_all", n),
            &n,
            |b, _| {
                b.iter(|| {
                    let map = black_box(&chain).to_metadata_map();
                    sum(&mut map.get_all("x-tenant").iter().map(|v| v.len()))
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("MetadataMap get_all (already a map)", n),
            &n,
            |b, _| b.iter(|| sum(&mut black_box(&map).get_all("x-tenant").iter().map(|v| v.len()))),
        );
    }
    group.finish();
}

/// `-bin` values: this crate's base64 (what every part sends and reads,
/// through `internals`) beside the `base64` crate in tonic's configuration,
/// on the sizes the parts carry: an 8-byte token, `grpc-trace-bin` (29
/// bytes), an ORCA report or `grpc-status-details-bin` (64), a large
/// binary-log value (512). Decoding reads the unpadded form we send.
#[cfg(feature = "bench-internals")]
fn base64_codec(c: &mut Criterion) {
    use base64::Engine as _;
    use base64::engine::DecodePaddingMode;
    use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD_NO_PAD};
    use tonic_hotpath::internals;

    let tonic = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let mut group = c.benchmark_group("metadata/base64");
    for size in [8usize, 29, 64, 512] {
        let raw: Vec<u8> = (0..size).map(|i| (i * 37 + 11) as u8).collect();
        let encoded = STANDARD_NO_PAD.encode(&raw).into_bytes();
        assert_eq!(internals::base64_encode(&raw), encoded);
        assert_eq!(
            internals::base64_decode(&encoded).as_deref(),
            Some(&raw[..])
        );
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("encode_ours", size), &raw, |b, raw| {
            b.iter(|| internals::base64_encode(black_box(raw)))
        });
        group.bench_with_input(BenchmarkId::new("encode_crate", size), &raw, |b, raw| {
            b.iter(|| STANDARD_NO_PAD.encode(black_box(raw)))
        });
        group.bench_with_input(
            BenchmarkId::new("encode_crate_slice", size),
            &raw,
            |b, raw| {
                b.iter(|| {
                    let raw = black_box(raw);
                    let mut out = vec![0; base64::encoded_len(raw.len(), false).unwrap_or(0)];
                    let written = STANDARD_NO_PAD.encode_slice(raw, &mut out).unwrap_or(0);
                    out.truncate(written);
                    out
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("decode_ours", size),
            &encoded,
            |b, encoded| b.iter(|| internals::base64_decode(black_box(encoded))),
        );
        group.bench_with_input(
            BenchmarkId::new("decode_crate", size),
            &encoded,
            |b, encoded| b.iter(|| tonic.decode(black_box(encoded))),
        );
    }
    group.finish();
}

#[cfg(not(feature = "bench-internals"))]
fn base64_codec(_: &mut Criterion) {}

criterion_group!(
    benches,
    append_one,
    chain_static,
    chain_runtime,
    issue_8860,
    get_all,
    base64_codec
);

fn main() {
    // First, whatever the filter (`-- layer_write` skips every criterion
    // row but still runs it), on a fresh heap.
    layer_write::interleaved_layer_write();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
