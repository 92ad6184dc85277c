//! Property tests: the table-driven validator and the federated-id parser
//! agree with a direct transcription of Cortex's rules on arbitrary input.
use proptest::prelude::*;
use tonic_hotpath::tenant::{OrgId, TenantIds, validate_org_id};

/// Cortex `ValidTenantID` (rune loop, length, `.`/`..`, reserved names),
/// plus this crate's refusal of the empty id.
fn cortex_valid(id: &[u8]) -> bool {
    let allowed = |c: u8| {
        c.is_ascii_lowercase()
            || c.is_ascii_uppercase()
            || c.is_ascii_digit()
            || b"!-_.*'()".contains(&c)
    };
    !id.is_empty()
        && id.iter().all(|&c| allowed(c))
        && id.len() <= OrgId::MAX_LEN
        && id != b"."
        && id != b".."
        && id != b"__markers__"
        && id != b"user-index.json.gz"
}

/// Bytes biased towards the interesting ones: allowed characters, their
/// neighbours, `|`, and anything else.
fn id_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => prop::sample::select(b"aZ09!-_.*'()".to_vec()),
        1 => prop::sample::select(b"/:@[`{|~ \t".to_vec()),
        1 => any::<u8>(),
    ];
    prop_oneof![
        prop::collection::vec(byte.clone(), 0..8),
        prop::collection::vec(byte, 140..160),
    ]
}

proptest! {
    #[test]
    fn validator_matches_cortex(id in id_bytes()) {
        prop_assert_eq!(validate_org_id(&id).is_ok(), cortex_valid(&id));
        prop_assert_eq!(OrgId::from_bytes(&id).is_ok(), cortex_valid(&id));
    }

    #[test]
    fn federated_ids_are_split_validated_sorted_and_deduplicated(
        members in prop::collection::vec("[a-c.|]{0,3}", 1..5)
    ) {
        let value = members.join("|");
        let mut expected: Vec<&str> = value.split('|').collect();
        let all_valid = expected.iter().all(|m| cortex_valid(m.as_bytes()));
        expected.sort_unstable();
        expected.dedup();
        match TenantIds::parse(&value) {
            Ok(ids) => {
                prop_assert!(all_valid, "{value:?} accepted");
                let got: Vec<&str> = ids.iter().map(OrgId::as_str).collect();
                prop_assert_eq!(got, expected);
            }
            Err(_) => prop_assert!(!all_valid, "{value:?} refused"),
        }
    }

    #[test]
    fn org_id_order_and_equality_are_those_of_the_text(
        a in "[a-zA-Z0-9]{1,60}", b in "[a-zA-Z0-9]{1,60}"
    ) {
        let (x, y) = (OrgId::new(&a).unwrap(), OrgId::new(&b).unwrap());
        prop_assert_eq!(x.cmp(&y), a.cmp(&b));
        prop_assert_eq!(x == y, a == b);
        prop_assert_eq!(x.as_str(), a.as_str());
    }
}
