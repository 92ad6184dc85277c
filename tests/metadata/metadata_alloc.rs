//! Allocation counts of the chain's hot paths, from a counting global
//! allocator (per thread, so parallel tests do not disturb each other).
//! Run with `--nocapture` to see the table.
#![cfg(feature = "grpc")]

use bytes::Bytes;
use http::HeaderMap;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic_hotpath::metadata::{MetadataEntry, OutgoingMetadata};

use support::alloc_count::allocations;

/// Runs `f` and returns its result with the allocations it made.
fn count<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let (allocations, out) = allocations(f);
    (out, allocations)
}

fn chain_of(n: usize) -> OutgoingMetadata {
    (0..n).fold(OutgoingMetadata::new(), |chain, i| {
        chain
            .append(if i % 3 == 0 { "x-hot" } else { "x-cold" }, "v")
            .unwrap()
    })
}

#[test]
fn static_append_allocates_exactly_once() {
    let chain = chain_of(10);
    let (next, allocations) = count(|| chain.append_static("x-trace", "abc").unwrap());
    println!("append_static: {allocations} allocation(s)");
    assert_eq!(allocations, 1);
    assert_eq!(next.len(), 11);
}

#[test]
fn runtime_string_append_allocates_at_most_three_times() {
    let chain = chain_of(10);
    let key = String::from("x-trace");
    let value = String::from("abc");
    let (_, allocations) = count(|| chain.append(&key, &value).unwrap());
    println!("append (runtime key and value): {allocations} allocation(s)");
    assert_eq!(allocations, 3, "key copy + value copy + node");
}

#[test]
fn bytes_value_append_does_not_copy_the_value() {
    let chain = chain_of(10);
    let value = Bytes::from(vec![b'a'; 64]);
    // (The first clone of a Vec-backed `Bytes` allocates its shared header.)
    let shared = value.clone();
    let (_, allocations) = count(|| chain.append_bytes("x-payload", shared).unwrap());
    println!("append_bytes: {allocations} allocation(s)");
    assert_eq!(allocations, 2, "key copy + node");
}

#[test]
fn prevalidated_entry_append_allocates_exactly_once() {
    let chain = chain_of(10);
    let entry = MetadataEntry::ascii("x-tenant", "acme").unwrap();
    let copy = entry.clone();
    let (_, allocations) = count(|| chain.append_entry(copy).unwrap());
    println!("append_entry (pre-built): {allocations} allocation(s)");
    assert_eq!(allocations, 1);
}

#[test]
fn binary_append_allocates_at_most_three_times() {
    let chain = chain_of(10);
    let (_, allocations) = count(|| chain.append_bin("x-token-bin", &[7; 32]).unwrap());
    println!("append_bin: {allocations} allocation(s)");
    assert_eq!(allocations, 3, "key copy + base64 buffer + node");
}

#[test]
fn reads_do_not_allocate() {
    for n in [10, 100] {
        let chain = chain_of(n);
        let (found, allocations) = count(|| chain.get_all("x-hot").count());
        println!("get_all on {n} entries ({found} values): {allocations} allocation(s)");
        assert_eq!(allocations, 0);
        assert_eq!(found, n.div_ceil(3));

        let (_, allocations) = count(|| chain.get("x-cold").is_some());
        assert_eq!(allocations, 0, "get on {n}");
        let (_, allocations) = count(|| (chain.len(), chain.size()));
        assert_eq!(allocations, 0, "len/size on {n}");
    }
    let chain = chain_of(30);
    let (_, allocations) = count(|| chain.iter().count());
    println!("iter on 30 entries: {allocations} allocation(s)");
    assert_eq!(allocations, 0, "iter on a chain of up to 32 nodes");
}

#[test]
fn failed_append_allocates_nothing_but_its_error() {
    let chain = chain_of(3);
    let (_, allocations) = count(|| chain.append_static("x-v", "bad\n").is_err());
    println!("refused append: {allocations} allocation(s) (the error's key)");
    assert_eq!(allocations, 1);
}

/// grpc-go issue #8860: 4 base keys and 2 appends, read for sending.
fn issue_8860_chain() -> OutgoingMetadata {
    let mut base = MetadataMap::new();
    base.insert("authorization", MetadataValue::from_static("Bearer token"));
    base.insert("x-request-id", MetadataValue::from_static("req-1"));
    base.insert("x-tenant", MetadataValue::from_static("acme"));
    base.insert("x-region", MetadataValue::from_static("eu-west-1"));
    OutgoingMetadata::from_metadata_map(base)
        .unwrap()
        .append_static("x-trace-id", "trace-1")
        .unwrap()
        .append_static("x-span-id", "span-1")
        .unwrap()
}

#[test]
fn issue_8860_header_write_allocation_count() {
    let chain = issue_8860_chain();
    let (_, allocations) = count(|| {
        let mut headers = HeaderMap::new();
        chain.write_to(&mut headers).unwrap();
        headers
    });
    println!("#8860 write into a fresh HeaderMap: {allocations} allocation(s)");
    assert_eq!(
        allocations, 3,
        "the base's index and entry tables copied, the entry table grown once"
    );

    // Into a map that already has room (as a request's headers may):
    let mut headers = HeaderMap::with_capacity(16);
    let (_, allocations) = count(|| chain.write_to(&mut headers).unwrap());
    println!("#8860 write into a HeaderMap with room: {allocations} allocation(s)");
    assert_eq!(allocations, 0);

    // Runtime-string values are promoted to shared buffers the first time
    // they are written (one allocation each, once); later writes are free.
    let chain = issue_8860_chain().append("x-copied", "v").unwrap();
    let (mut first_map, mut second_map) =
        (HeaderMap::with_capacity(16), HeaderMap::with_capacity(16));
    let (_, first) = count(|| chain.write_to(&mut first_map).unwrap());
    let (_, second) = count(|| chain.write_to(&mut second_map).unwrap());
    println!("write with a copied pair: first {first}, then {second} allocation(s)");
    assert_eq!((first, second), (2, 0));
}

#[test]
fn const_entry_append_allocates_exactly_once() {
    const TRACE: MetadataEntry = tonic_hotpath::metadata_entry!("x-trace", "abc");
    let chain = chain_of(10);
    let (next, allocations) = count(|| chain.append_entry(TRACE).unwrap());
    println!("append_entry (const entry): {allocations} allocation(s)");
    assert_eq!(allocations, 1);
    assert_eq!(next.get("x-trace").unwrap(), "abc");
}

/// Dropping the reserved keys of an incoming map (in order, through the
/// map's own tables) allocates nothing beyond the chain's base node: the
/// boxed map and the node, as for a map with nothing to drop.
#[test]
fn base_from_an_incoming_map_allocates_only_the_node() {
    let incoming = || {
        let mut map = MetadataMap::new();
        for (key, value) in [
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("user-agent", "grpc-go/1.74.2"),
            ("grpc-accept-encoding", "identity,deflate,gzip"),
            ("x-scope-orgid", "team-a"),
            ("grpc-timeout", "4999870u"),
            (
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
            ("x-request-id", "5f1b9a2c"),
            ("authorization", "Bearer t"),
            ("x-forwarded-for", "10.1.2.3"),
        ] {
            map.append(key, MetadataValue::from_static(value));
        }
        map
    };
    let map = incoming();
    let (chain, allocations) = count(|| OutgoingMetadata::from_metadata_map(map).unwrap());
    println!("from_metadata_map (10 incoming keys, 5 reserved): {allocations} allocation(s)");
    assert_eq!(allocations, 2, "the boxed map + the node");
    assert_eq!(chain.len(), 5);
}
