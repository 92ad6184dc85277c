//! Compile-time entries (`MetadataEntry::try_from_static`, `metadata_entry!`)
//! accept exactly what the runtime checks accept (for lower-case keys), and
//! behave like runtime-built entries once appended.
#![cfg(feature = "grpc")]

use proptest::prelude::*;
use tonic_hotpath::metadata::{MetadataEntry, OutgoingMetadata};

const TENANT: MetadataEntry = tonic_hotpath::metadata_entry!("x-tenant", "acme");
// A standard header name (`http`'s own constant, not a custom name);
// `user-agent` would be one too, but it is reserved (grpc-go drops it).
const STANDARD: MetadataEntry = tonic_hotpath::metadata_entry!("accept-language", "en");

/// Leaks `s` so that it can stand in for a `'static` literal.
fn leaked(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Keys near every rule's edge: reserved names, `-bin`, upper case, bytes
/// outside `0-9 a-z - _ .`, empty.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9._-]{1,12}",
        "[a-zA-Z0-9._ :/-]{0,12}",
        "[a-z-]{1,6}-bin",
        prop::sample::select(vec![
            "te",
            "content-type",
            "grpc-status",
            "grpc-message",
            "grpc-encoding",
            "grpc-accept-encoding",
            "grpc-status-details-bin",
            "grpc-message-type",
            "grpc-timeout",
            "user-agent",
            "User-Agent",
            "GRPC-Timeout",
            "x-bin",
            "-bin",
            "bin",
            "tee",
        ])
        .prop_map(String::from),
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof!["[ -~]{0,16}", "[ -~\t\n\u{7f}é]{0,8}"]
}

proptest! {
    #[test]
    fn try_from_static_agrees_with_from_static(key in key(), value in value()) {
        let lower_case = key == key.to_ascii_lowercase();
        let (key, value) = (leaked(key), leaked(value));
        let checked = MetadataEntry::try_from_static(key, value);
        let runtime = MetadataEntry::from_static(key, value);
        match (&checked, &runtime) {
            (Some(entry), Ok(expected)) => {
                prop_assert_eq!(entry.name(), expected.name());
                prop_assert_eq!(entry.value(), expected.value());
                prop_assert_eq!(entry.size(), expected.size());
            }
            (None, Ok(_)) => prop_assert!(!lower_case, "refused a valid lower-case key {:?}", key),
            (None, Err(_)) => {}
            (Some(_), Err(error)) => prop_assert!(false, "accepted what from_static refuses: {}", error),
        }
    }
}

#[test]
fn const_entries_append_like_runtime_entries() {
    let md = OutgoingMetadata::new()
        .append_entry(TENANT)
        .unwrap()
        .append_entry(STANDARD)
        .unwrap()
        .append_static("x-tenant", "beta")
        .unwrap();
    let tenants: Vec<_> = md.get_all("x-tenant").collect();
    assert_eq!(tenants, ["acme", "beta"]);
    assert_eq!(md.get("accept-language").unwrap(), "en");
    assert_eq!(
        md.size(),
        TENANT.size() + STANDARD.size() + "x-tenantbeta".len() + 32
    );
}

#[test]
fn const_entry_append_still_checks_the_size_limit() {
    let small = OutgoingMetadata::with_limit(TENANT.size() - 1);
    assert!(small.append_entry(TENANT).is_err());
    assert_eq!(small.len(), 0);
}
