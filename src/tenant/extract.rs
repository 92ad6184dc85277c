//! Reading the org id from a request's `x-scope-orgid` header, borrowed.

use http::{HeaderMap, HeaderName, HeaderValue};
use tonic::metadata::MetadataMap;

use super::error::OrgIdError;
use super::org_id::OrgId;
use super::tenant_ids::TenantIds;
use crate::wire;
use crate::wire::headers::NotOne;
use crate::wire::org_id::{Tenants, classify};

/// The org-id header, lower case as HTTP/2 carries it (Cortex
/// `user.lowerOrgIDHeaderName`).
pub(crate) const ORG_ID_HEADER: &str = "x-scope-orgid";

/// The header name, built at compile time: a lookup hashes it without
/// parsing a string, and a compare against it sees its bytes (inlined).
pub(crate) const ORG_ID_HEADER_NAME: HeaderName = HeaderName::from_static(ORG_ID_HEADER);

/// The single `x-scope-orgid` value: none is [`OrgIdError::Missing`],
/// several is [`OrgIdError::TooManyHeaders`]. (Small maps are scanned:
/// see `crate::wire::headers`.)
#[inline(always)]
pub(crate) fn single_value(headers: &HeaderMap) -> Result<&HeaderValue, OrgIdError> {
    wire::headers::single_value(headers, &ORG_ID_HEADER_NAME).map_err(|not_one| match not_one {
        NotOne::Missing => OrgIdError::Missing,
        NotOne::Several(count) => OrgIdError::TooManyHeaders { count },
    })
}

/// The one tenant a value names (dskit's `TenantID`: the members checked
/// first, so an invalid member is the error; `a|a` is `a`); several are
/// [`OrgIdError::MultipleTenants`], at the first `|`.
#[inline]
fn single_tenant(value: &[u8]) -> Result<&[u8], OrgIdError> {
    match classify(value).map_err(OrgIdError::from_fault)? {
        Tenants::One(id) => Ok(id),
        Tenants::Several { separator } => Err(OrgIdError::MultipleTenants {
            position: separator,
        }),
    }
}

/// The validated org id of a request, borrowed from its headers: no copy of
/// the map, no copy of the value, no allocation.
///
/// Exactly one `x-scope-orgid` header naming exactly one tenant is
/// accepted, by dskit's `tenant.TenantID` rule: a federated value whose
/// members are all one tenant (`a|a`) is that tenant; several tenants are
/// [`OrgIdError::MultipleTenants`]; an invalid member is its error.
///
/// ```
/// use http::HeaderMap;
/// use tonic_hotpath::tenant::{self, OrgIdError};
///
/// let mut headers = HeaderMap::new();
/// assert_eq!(tenant::extract_from_headers(&headers), Err(OrgIdError::Missing));
/// headers.insert("x-scope-orgid", "team-a".parse().unwrap());
/// assert_eq!(tenant::extract_from_headers(&headers), Ok("team-a"));
/// headers.append("x-scope-orgid", "team-b".parse().unwrap());
/// assert_eq!(
///     tenant::extract_from_headers(&headers),
///     Err(OrgIdError::TooManyHeaders { count: 2 })
/// );
/// ```
#[inline]
pub fn extract_from_headers(headers: &HeaderMap) -> Result<&str, OrgIdError> {
    let id = single_tenant(single_value(headers)?.as_bytes())?;
    wire::org_id::ascii_str(id, 0).map_err(OrgIdError::from_fault)
}

/// [`extract_from_headers`] over tonic metadata.
///
/// ```
/// use tonic::metadata::MetadataMap;
/// use tonic_hotpath::tenant;
///
/// let mut metadata = MetadataMap::new();
/// metadata.insert("x-scope-orgid", "team-a".parse().unwrap());
/// assert_eq!(tenant::extract(&metadata), Ok("team-a"));
/// ```
#[inline]
pub fn extract(metadata: &MetadataMap) -> Result<&str, OrgIdError> {
    extract_from_headers(metadata.as_ref())
}

/// The validated org id of a request as an owned [`OrgId`]. Ids up to
/// [`OrgId::INLINE_CAPACITY`](super::OrgId::INLINE_CAPACITY) bytes are copied inline
/// (no allocation); longer ones take one allocation.
#[inline]
pub fn extract_owned_from_headers(headers: &HeaderMap) -> Result<OrgId, OrgIdError> {
    let id = single_tenant(single_value(headers)?.as_bytes())?;
    Ok(OrgId::from_checked(id))
}

/// [`extract_owned_from_headers`] over tonic metadata.
#[inline]
pub fn extract_owned(metadata: &MetadataMap) -> Result<OrgId, OrgIdError> {
    extract_owned_from_headers(metadata.as_ref())
}

/// The tenants of a federated request (`x-scope-orgid: a|b|c`), validated,
/// sorted and de-duplicated. A single tenant allocates nothing (up to
/// [`OrgId::INLINE_CAPACITY`](super::OrgId::INLINE_CAPACITY) bytes).
///
/// ```
/// use http::HeaderMap;
/// use tonic_hotpath::tenant;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("x-scope-orgid", "b|a|b".parse().unwrap());
/// let ids = tenant::extract_tenant_ids_from_headers(&headers).unwrap();
/// assert_eq!(ids.as_slice(), ["a", "b"]);
/// ```
#[inline]
pub fn extract_tenant_ids_from_headers(headers: &HeaderMap) -> Result<TenantIds, OrgIdError> {
    Ok(TenantIds::parse_bytes(single_value(headers)?.as_bytes())?)
}

/// [`extract_tenant_ids_from_headers`] over tonic metadata.
pub fn extract_tenant_ids(metadata: &MetadataMap) -> Result<TenantIds, OrgIdError> {
    extract_tenant_ids_from_headers(metadata.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenant::InvalidOrgIdError;

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(ORG_ID_HEADER, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn exactly_one_value_is_required() {
        assert_eq!(
            extract_from_headers(&headers(&[])),
            Err(OrgIdError::Missing)
        );
        assert_eq!(extract_from_headers(&headers(&["a"])), Ok("a"));
        assert_eq!(
            extract_owned_from_headers(&headers(&["a", "a", "b"])),
            Err(OrgIdError::TooManyHeaders { count: 3 })
        );
        assert_eq!(
            extract_tenant_ids_from_headers(&headers(&["a", "b"])),
            Err(OrgIdError::TooManyHeaders { count: 2 })
        );
    }

    #[test]
    fn large_maps_are_searched_by_hash_with_the_same_rules() {
        let large = |values: &[&'static str]| {
            let mut map = headers(values);
            for i in 0..crate::wire::headers::SCAN_LIMIT {
                let name = HeaderName::from_bytes(format!("x-other-{i}").as_bytes()).unwrap();
                map.append(name, HeaderValue::from_static("v"));
            }
            map.append("x-other-0", HeaderValue::from_static("w"));
            assert!(map.len() > crate::wire::headers::SCAN_LIMIT);
            map
        };
        assert_eq!(extract_from_headers(&large(&[])), Err(OrgIdError::Missing));
        assert_eq!(extract_from_headers(&large(&["t-2"])), Ok("t-2"));
        assert_eq!(
            extract_from_headers(&large(&["a", "b"])),
            Err(OrgIdError::TooManyHeaders { count: 2 })
        );
    }

    #[test]
    fn small_maps_count_values_after_other_names_with_several_values() {
        let mut map = headers(&[]);
        map.append("x-other", HeaderValue::from_static("1"));
        map.append("x-other", HeaderValue::from_static("2"));
        map.append(ORG_ID_HEADER, HeaderValue::from_static("t"));
        map.append("x-last", HeaderValue::from_static("3"));
        assert_eq!(extract_from_headers(&map), Ok("t"));
        map.append(ORG_ID_HEADER, HeaderValue::from_static("t"));
        map.append("x-other", HeaderValue::from_static("4"));
        assert_eq!(
            extract_from_headers(&map),
            Err(OrgIdError::TooManyHeaders { count: 2 })
        );
    }

    #[test]
    fn single_extraction_refuses_several_tenants_distinctly() {
        let err = extract_from_headers(&headers(&["ab|c"])).unwrap_err();
        assert_eq!(err, OrgIdError::MultipleTenants { position: 2 });
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        let ids = extract_tenant_ids_from_headers(&headers(&["ab|c"])).unwrap();
        assert_eq!(ids.as_slice(), ["ab", "c"]);
    }

    #[test]
    fn invalid_values_are_reported_with_their_rule() {
        assert_eq!(
            extract_from_headers(&headers(&[".."])),
            Err(OrgIdError::Invalid(InvalidOrgIdError::DotSegment))
        );
        assert_eq!(
            extract_from_headers(&headers(&[""])),
            Err(OrgIdError::Invalid(InvalidOrgIdError::Empty {
                position: 0
            }))
        );
        let err = extract_from_headers(&headers(&["a b"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "org id has unsupported character ' ' at byte 1"
        );
        assert_eq!(OrgIdError::Missing.code(), tonic::Code::Unauthenticated);
    }

    #[test]
    fn non_ascii_bytes_are_named_in_the_error() {
        let mut map = HeaderMap::new();
        map.insert(ORG_ID_HEADER, HeaderValue::from_bytes(b"t\xe9").unwrap());
        let err = extract_from_headers(&map).unwrap_err();
        assert_eq!(
            err.to_string(),
            "org id has unsupported character '\\xe9' at byte 1"
        );
    }

    #[test]
    fn metadata_and_headers_agree() {
        let metadata = MetadataMap::from_headers(headers(&["t-1"]));
        assert_eq!(extract(&metadata), Ok("t-1"));
        assert_eq!(extract_owned(&metadata).unwrap(), "t-1");
        assert_eq!(extract_tenant_ids(&metadata).unwrap().as_slice(), ["t-1"]);
    }
}
