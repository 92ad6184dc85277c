//! The chain on its own: a property test against a plain `Vec` model, every
//! error class, reads, limits and `Debug` redaction.
#![cfg(feature = "grpc")]

use bytes::Bytes;
use http::HeaderMap;
use proptest::prelude::*;
use tonic::metadata::{Ascii, MetadataKey, MetadataMap, MetadataValue};
use tonic_hotpath::metadata::{MetadataEntry, MetadataError, OutgoingMetadata};

/// The chain's FIFO read as owned pairs.
fn pairs(chain: &OutgoingMetadata) -> Vec<(String, String)> {
    chain
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect()
}

/// One step of a random history.
#[derive(Debug, Clone)]
enum Op {
    /// Replace handle `handle` by a chain on a new base of these pairs.
    NewBase {
        handle: usize,
        pairs: Vec<(usize, String)>,
    },
    /// Append one pair to handle `handle`, replacing it.
    Append {
        handle: usize,
        key: usize,
        value: String,
    },
    /// Append several pairs as one node.
    AppendMany {
        handle: usize,
        pairs: Vec<(usize, String)>,
    },
    /// Push a copy of handle `handle` as a new handle.
    Fork { handle: usize },
}

const KEYS: [&str; 5] = ["x-a", "x-b", "x-c", "X-D", "y.e_f"];

fn value() -> impl Strategy<Value = String> {
    "[ -~]{0,6}"
}

fn op() -> impl Strategy<Value = Op> {
    let pairs = || prop::collection::vec((0..KEYS.len(), value()), 0..5);
    prop_oneof![
        (0..8usize, pairs()).prop_map(|(handle, pairs)| Op::NewBase { handle, pairs }),
        (0..8usize, 0..KEYS.len(), value()).prop_map(|(handle, key, value)| Op::Append {
            handle,
            key,
            value
        }),
        (0..8usize, pairs()).prop_map(|(handle, pairs)| Op::AppendMany { handle, pairs }),
        (0..8usize).prop_map(|handle| Op::Fork { handle }),
    ]
}

/// What a base map iterates like: grouped by key, keys in first-seen order.
fn grouped(pairs: &[(String, String)]) -> Vec<(String, String)> {
    let mut keys: Vec<&String> = Vec::new();
    for (key, _) in pairs {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .flat_map(|key| pairs.iter().filter(move |(k, _)| k == key).cloned())
        .collect()
}

fn lower(pairs: &[(usize, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(key, value)| (KEYS[*key].to_ascii_lowercase(), value.clone()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn chain_reads_like_a_vec_model(ops in prop::collection::vec(op(), 1..60)) {
        let mut handles = vec![(OutgoingMetadata::new(), Vec::<(String, String)>::new())];
        for op in ops {
            match op {
                Op::NewBase { handle, pairs } => {
                    let i = handle % handles.len();
                    let mut map = MetadataMap::new();
                    for (key, value) in &pairs {
                        let key: MetadataKey<Ascii> = KEYS[*key].to_ascii_lowercase().parse().unwrap();
                        map.append(key, value.parse::<MetadataValue<_>>().unwrap());
                    }
                    let chain = handles[i].0.with_base(map).unwrap();
                    handles[i] = (chain, grouped(&lower(&pairs)));
                }
                Op::Append { handle, key, value } => {
                    let i = handle % handles.len();
                    let chain = handles[i].0.append(KEYS[key], &value).unwrap();
                    handles[i].1.push((KEYS[key].to_ascii_lowercase(), value));
                    handles[i].0 = chain;
                }
                Op::AppendMany { handle, pairs } => {
                    let i = handle % handles.len();
                    let entries = pairs
                        .iter()
                        .map(|(key, value)| MetadataEntry::ascii(KEYS[*key], value).unwrap());
                    let chain = handles[i].0.append_entries(entries).unwrap();
                    handles[i].1.extend(lower(&pairs));
                    handles[i].0 = chain;
                }
                Op::Fork { handle } => {
                    let i = handle % handles.len();
                    let copy = handles[i].clone();
                    handles.push(copy);
                }
            }
            // Every handle, forks included, still reads like its model.
            for (chain, model) in &handles {
                prop_assert_eq!(&pairs(chain), model);
                prop_assert_eq!(chain.len(), model.len());
                for key in KEYS {
                    let key = key.to_ascii_lowercase();
                    let want: Vec<&str> =
                        model.iter().filter(|(k, _)| *k == key).map(|(_, v)| v.as_str()).collect();
                    let got: Vec<&str> =
                        chain.get_all(&key).map(|v| v.to_str().unwrap()).collect();
                    prop_assert_eq!(&got, &want);
                    prop_assert_eq!(chain.get(&key).map(|v| v.to_str().unwrap()), want.first().copied());
                }
                // Written into a fresh map (base copied whole) and into one
                // with room (every entry inserted): same content, same order.
                let fresh = chain.to_metadata_map().into_headers();
                let mut roomy = HeaderMap::with_capacity(64);
                chain.write_to(&mut roomy).unwrap();
                for headers in [&fresh, &roomy] {
                    prop_assert_eq!(headers.len(), model.len());
                    for key in KEYS {
                        let key = key.to_ascii_lowercase();
                        let want: Vec<&str> = model
                            .iter()
                            .filter(|(k, _)| *k == key)
                            .map(|(_, v)| v.as_str())
                            .collect();
                        let got: Vec<&str> = headers
                            .get_all(&key)
                            .iter()
                            .map(|v| v.to_str().unwrap())
                            .collect();
                        prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }

    #[test]
    fn get_all_walks_any_number_of_values_in_order(
        keys in prop::collection::vec(0..3usize, 0..80),
        batch in 1..6usize,
    ) {
        let mut chain = OutgoingMetadata::new();
        let mut model: Vec<(usize, String)> = Vec::new();
        for (i, chunk) in keys.chunks(batch).enumerate() {
            let entries: Vec<_> = chunk
                .iter()
                .enumerate()
                .map(|(j, &key)| {
                    let value = format!("{i}.{j}");
                    model.push((key, value.clone()));
                    MetadataEntry::ascii(KEYS[key], &value).unwrap()
                })
                .collect();
            chain = if i % 2 == 0 {
                chain.append_entries(entries).unwrap()
            } else {
                entries.into_iter().try_fold(chain, |c, e| c.append_entry(e)).unwrap()
            };
        }
        for (key, name) in KEYS.iter().enumerate().take(3) {
            let want: Vec<&str> =
                model.iter().filter(|(k, _)| *k == key).map(|(_, v)| v.as_str()).collect();
            let got: Vec<&str> = chain.get_all(name).map(|v| v.to_str().unwrap()).collect();
            prop_assert_eq!(got, want);
        }
    }
}

#[test]
fn every_invalid_key_and_value_class_is_an_error_and_appends_nothing() {
    let chain = OutgoingMetadata::new().append("x-keep", "1").unwrap();
    let cases: Vec<(Result<OutgoingMetadata, MetadataError>, &str)> = vec![
        (chain.append("", "v"), "empty key"),
        (chain.append("x key", "v"), "space in key"),
        (chain.append(":path", "v"), "pseudo header"),
        (chain.append("x-ü", "v"), "non-ASCII key"),
        (chain.append("x/y", "v"), "slash in key"),
        (chain.append("te", "trailers"), "reserved te"),
        (chain.append("Content-Type", "x"), "reserved content-type"),
        (chain.append("grpc-status", "0"), "reserved grpc-status"),
        (chain.append("grpc-message", "m"), "reserved grpc-message"),
        (
            chain.append("grpc-encoding", "gzip"),
            "reserved grpc-encoding",
        ),
        (chain.append("x-data-bin", "abc"), "ascii value on -bin key"),
        (
            chain.append_bin("x-data", b"abc"),
            "binary value on ascii key",
        ),
        (chain.append("x-v", "line\nbreak"), "newline in value"),
        (chain.append("x-v", "tab\there"), "tab in value"),
        (chain.append("x-v", "caf\u{e9}"), "non-ASCII value"),
        (chain.append("x-v", "nul\0"), "NUL in value"),
        (
            chain.append_bytes("x-v", Bytes::from_static(b"\x7f")),
            "DEL in bytes value",
        ),
        (chain.append_static("x-v", "\r"), "CR in static value"),
        (chain.append_static("bad key", "v"), "bad static key"),
        (chain.append(&"k".repeat(70_000), "v"), "key too long"),
        (
            chain.append("x-big", &"v".repeat(OutgoingMetadata::DEFAULT_SIZE_LIMIT)),
            "size limit",
        ),
    ];
    for (result, class) in cases {
        let error = result.expect_err(class);
        assert!(!error.to_string().is_empty(), "{class}: {error:?}");
        assert_eq!(
            pairs(&chain),
            [("x-keep".to_owned(), "1".to_owned())],
            "{class}"
        );
    }
}

#[test]
fn errors_say_precisely_what_is_wrong_and_never_echo_values() {
    let chain = OutgoingMetadata::new();
    assert_eq!(chain.append("", "v").unwrap_err(), MetadataError::EmptyKey);
    assert_eq!(
        chain.append("x key", "v").unwrap_err(),
        MetadataError::InvalidKeyByte {
            key: "x key".into(),
            byte: b' ',
            index: 1
        }
    );
    assert_eq!(
        chain.append("Grpc-Status", "0").unwrap_err(),
        MetadataError::ReservedKey {
            key: "grpc-status".into()
        }
    );
    let error = chain.append("x-secret", "hunter2\n").unwrap_err();
    assert_eq!(
        error,
        MetadataError::InvalidValueByte {
            key: "x-secret".into(),
            byte: b'\n',
            index: 7
        }
    );
    assert!(!error.to_string().contains("hunter2"));
    assert_eq!(
        chain.append("x-bin", "v").unwrap_err(),
        MetadataError::BinaryKeyWithAsciiValue {
            key: "x-bin".into()
        }
    );
    assert_eq!(
        chain.append_bin("x-b", b"v").unwrap_err(),
        MetadataError::AsciiKeyWithBinaryValue { key: "x-b".into() }
    );
}

#[test]
fn size_limit_counts_name_value_and_32_per_entry() {
    // "x-k" + "v" + 32 = 36 bytes per entry.
    let chain = OutgoingMetadata::with_limit(36 * 3);
    let full = chain
        .append("x-k", "v")
        .and_then(|c| c.append("x-k", "v"))
        .and_then(|c| c.append("x-k", "v"))
        .unwrap();
    assert_eq!(full.size(), 108);
    assert_eq!(full.limit(), 108);
    assert_eq!(
        full.append("x-k", "v").unwrap_err(),
        MetadataError::SizeLimitExceeded {
            limit: 108,
            size: 144
        }
    );
    assert_eq!(full.len(), 3);
    // A batch over the limit is refused whole.
    let batch = [
        MetadataEntry::ascii("x-k", "v").unwrap(),
        MetadataEntry::ascii("x-k", "v").unwrap(),
    ];
    let one = chain
        .append("x-k", "v")
        .unwrap()
        .append("x-k", "v")
        .unwrap();
    assert!(one.append_entries(batch).is_err());
    assert_eq!(one.len(), 2);
    // A base over the limit is refused.
    let mut map = MetadataMap::new();
    map.insert("x-big", "v".repeat(200).parse().unwrap());
    assert!(matches!(
        chain.with_base(map),
        Err(MetadataError::SizeLimitExceeded { .. })
    ));
}

#[test]
fn entry_count_is_capped_below_what_a_header_map_takes() {
    let entry = MetadataEntry::from_static("x", "").unwrap();
    let mut chain = OutgoingMetadata::with_limit(usize::MAX);
    for _ in 0..OutgoingMetadata::MAX_ENTRIES {
        chain = chain.append_entry(entry.clone()).unwrap();
    }
    assert_eq!(
        chain.append_entry(entry).unwrap_err(),
        MetadataError::TooManyEntries {
            limit: OutgoingMetadata::MAX_ENTRIES,
            len: OutgoingMetadata::MAX_ENTRIES + 1
        }
    );
    // It still fits a fresh request's headers.
    let mut headers = HeaderMap::new();
    chain.write_to(&mut headers).unwrap();
    assert_eq!(headers.len(), OutgoingMetadata::MAX_ENTRIES);
    assert_eq!(chain.to_metadata_map().len(), OutgoingMetadata::MAX_ENTRIES);
}

#[test]
fn writing_into_headers_that_cannot_take_the_chain_fails_and_writes_nothing() {
    let mut headers = HeaderMap::new();
    let mut n = 0;
    while headers.try_reserve(1).is_ok() && n < 40_000 {
        let name = http::HeaderName::from_bytes(format!("h{n}").as_bytes()).unwrap();
        if headers
            .try_append(name, http::HeaderValue::from_static("v"))
            .is_err()
        {
            break;
        }
        n += 1;
    }
    let before = headers.len();
    let mut chain = OutgoingMetadata::with_limit(usize::MAX);
    for i in 0..OutgoingMetadata::MAX_ENTRIES {
        chain = chain.append(&format!("x-{i}"), "v").unwrap();
    }
    assert_eq!(
        chain.write_to(&mut headers),
        Err(MetadataError::HeadersFull {
            existing: before,
            adding: OutgoingMetadata::MAX_ENTRIES
        })
    );
    assert_eq!(headers.len(), before);
}

#[test]
fn very_long_chains_drop_without_recursion() {
    let entry = MetadataEntry::from_static("x-n", "1").unwrap();
    let mut chain = OutgoingMetadata::with_limit(usize::MAX);
    for _ in 0..OutgoingMetadata::MAX_ENTRIES {
        chain = chain.append_entry(entry.clone()).unwrap();
    }
    // Drop on a small stack: a recursive drop of 16 Ki nodes would overflow.
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || drop(chain))
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn a_new_base_drops_what_was_appended_before() {
    let chain = OutgoingMetadata::new().append("x-old", "1").unwrap();
    let mut map = MetadataMap::new();
    map.insert("x-base", MetadataValue::from_static("b"));
    let rebased = chain.with_base(map).unwrap().append("x-new", "2").unwrap();
    assert_eq!(
        pairs(&rebased),
        [
            ("x-base".to_owned(), "b".to_owned()),
            ("x-new".to_owned(), "2".to_owned())
        ]
    );
    assert!(rebased.get("x-old").is_none());
    assert_eq!(pairs(&chain), [("x-old".to_owned(), "1".to_owned())]);
}

#[test]
fn reads_on_an_empty_chain() {
    let chain = OutgoingMetadata::default();
    assert!(chain.is_empty());
    assert_eq!(chain.size(), 0);
    assert_eq!(chain.iter().count(), 0);
    assert_eq!(chain.get_all("x").count(), 0);
    assert!(chain.get("x").is_none());
    assert!(chain.append_entries([]).unwrap().is_empty());
    assert!(chain.to_metadata_map().is_empty());
}

#[test]
fn get_is_case_insensitive_and_base_first() {
    let mut map = MetadataMap::new();
    map.insert("x-k", MetadataValue::from_static("base"));
    let chain = OutgoingMetadata::from_metadata_map(map)
        .unwrap()
        .append("X-K", "later")
        .unwrap();
    assert_eq!(chain.get("X-K").unwrap(), "base");
    let all: Vec<_> = chain.get_all("x-K").collect();
    assert_eq!(all, ["base", "later"]);
}

#[test]
fn binary_values_round_trip_through_tonic() {
    let bytes: Vec<u8> = (0..=255).collect();
    let chain = OutgoingMetadata::new()
        .append_bin("x-all-bin", &bytes)
        .unwrap();
    let map = chain.to_metadata_map();
    let value = map.get_bin("x-all-bin").unwrap();
    assert_eq!(value.to_bytes().unwrap(), bytes);
}

#[test]
fn debug_redacts_values_outside_the_allowlist() {
    let chain = OutgoingMetadata::new()
        .append("authorization", "Bearer hunter2")
        .unwrap()
        .append("x-client", "probe/1.0")
        .unwrap()
        .append_bin("x-key-bin", b"secret")
        .unwrap();
    let printed = format!("{chain:?}");
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(!printed.contains("c2VjcmV0"), "{printed}");
    assert!(!printed.contains("probe/1.0"), "{printed}");
    assert!(printed.contains("authorization"), "{printed}");
    assert!(printed.contains("x-client"), "{printed}");
    // The protocol headers whose values `Debug` used to show (`user-agent`,
    // `grpc-timeout`) are reserved now: a chain cannot hold them.
    assert!(chain.append("user-agent", "probe/1.0").is_err());
    assert!(chain.append("grpc-timeout", "5S").is_err());
    let entry = MetadataEntry::ascii("x-api-key", "hunter2").unwrap();
    assert!(!format!("{entry:?}").contains("hunter2"));
}
