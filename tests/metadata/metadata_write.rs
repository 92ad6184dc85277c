//! `OutgoingMetadata::write_to` into maps that already hold headers: what
//! was there is kept, each key's values stay in order (existing first), and
//! a failed write leaves the map as it was.
#![cfg(feature = "grpc")]

use http::{HeaderMap, HeaderValue};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic_hotpath::metadata::OutgoingMetadata;

fn chain_on_base() -> OutgoingMetadata {
    let mut base = MetadataMap::new();
    base.insert("authorization", MetadataValue::from_static("Bearer t"));
    base.insert("x-request-id", MetadataValue::from_static("req-1"));
    base.append("x-tenant", MetadataValue::from_static("acme"));
    base.append("x-tenant", MetadataValue::from_static("beta"));
    base.insert("x-region", MetadataValue::from_static("eu"));
    OutgoingMetadata::from_metadata_map(base)
        .unwrap()
        .append_static("x-trace-id", "trace-1")
        .unwrap()
        .append_static("x-client", "from-chain")
        .unwrap()
}

/// Each key's values, as strings, sorted by key.
fn by_key(headers: &HeaderMap) -> Vec<(String, Vec<String>)> {
    let mut keys: Vec<_> = headers.keys().map(|k| k.as_str().to_owned()).collect();
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let values = headers
                .get_all(&key)
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect();
            (key, values)
        })
        .collect()
}

/// What `write_to` must produce: the existing map, then every chain entry
/// appended one by one.
fn appended_one_by_one(existing: &HeaderMap, chain: &OutgoingMetadata) -> HeaderMap {
    let mut expected = existing.clone();
    for (name, value) in chain.iter() {
        expected.append(name, value.clone());
    }
    expected
}

fn request_headers(extra: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("te", HeaderValue::from_static("trailers"));
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    for (name, value) in extra {
        headers.append(*name, HeaderValue::from_static(value));
    }
    headers
}

#[test]
fn request_headers_are_kept_and_every_key_keeps_its_order() {
    let chain = chain_on_base();
    let cases = [
        request_headers(&[]),
        // `x-client` is also appended by the chain: existing value first.
        request_headers(&[("x-client", "tonic/0.14")]),
        // A key of the base: the base is re-inserted after it.
        request_headers(&[("x-tenant", "first")]),
        request_headers(&[("x-tenant", "first"), ("x-tenant", "second")]),
        HeaderMap::new(),
        HeaderMap::with_capacity(32),
    ];
    for existing in cases {
        let expected = appended_one_by_one(&existing, &chain);
        let mut headers = existing.clone();
        chain.write_to(&mut headers).unwrap();
        assert_eq!(by_key(&headers), by_key(&expected), "into {existing:?}");
        assert_eq!(headers.len(), existing.len() + chain.len());
    }
}

#[test]
fn tenant_values_follow_existing_ones() {
    let chain = chain_on_base();
    let mut headers = request_headers(&[("x-tenant", "first")]);
    chain.write_to(&mut headers).unwrap();
    let tenants: Vec<_> = headers.get_all("x-tenant").iter().collect();
    assert_eq!(tenants, ["first", "acme", "beta"]);
}

#[test]
fn a_chain_without_base_appends_after_existing_headers() {
    let chain = OutgoingMetadata::new()
        .append_static("x-client", "from-chain")
        .unwrap();
    let mut headers = request_headers(&[("x-client", "tonic/0.14")]);
    chain.write_to(&mut headers).unwrap();
    let agents: Vec<_> = headers.get_all("x-client").iter().collect();
    assert_eq!(agents, ["tonic/0.14", "from-chain"]);
    assert_eq!(headers.len(), 4);
}

#[test]
fn a_write_that_overflows_the_map_leaves_it_as_it_was() {
    // 15 000 base entries + 12 000 existing ones exceed what one HeaderMap
    // holds (24 576), so the write must fail and change nothing.
    let mut base = HeaderMap::new();
    for i in 0..15_000 {
        base.append(
            http::HeaderName::try_from(format!("b-{i}")).unwrap(),
            HeaderValue::from_static("v"),
        );
    }
    let chain = OutgoingMetadata::with_limit(usize::MAX)
        .with_base(MetadataMap::from_headers(base))
        .unwrap();
    let mut headers = HeaderMap::new();
    for i in 0..12_000 {
        headers.append(
            http::HeaderName::try_from(format!("e-{i}")).unwrap(),
            HeaderValue::from_static("v"),
        );
    }
    let before = headers.clone();
    assert!(chain.write_to(&mut headers).is_err());
    assert_eq!(by_key(&headers), by_key(&before));
}
