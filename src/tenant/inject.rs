//! Putting an org id into outgoing metadata, with Cortex's conflict rules.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use tonic::metadata::MetadataMap;

use crate::metadata::{ClaimedHeaderError, ClaimedHeaders, OutgoingMetadata};

use super::error::InjectError;
use super::extract::{ORG_ID_HEADER, ORG_ID_HEADER_NAME};
use super::org_id::OrgId;
use super::tenant_ids::TenantIds;

/// Something an org id can be injected into: outgoing metadata of a call.
///
/// As dskit's (Cortex's) `InjectIntoGRPCRequest`: if the target already
/// carries the same id, nothing changes; a different id is
/// [`InjectError::DifferentOrgIdPresent`]; several ids are
/// [`InjectError::TooManyHeaders`]. On error the target is left unchanged.
/// What counts as already present depends on the target: a map's own
/// values; for a `tonic::Request` or `http::Request`, its headers *and*
/// the outgoing-metadata chain pending for it (see the `tonic::Request`
/// impl), because the request is meant to go through an
/// [`OutgoingMetadataLayer`](crate::metadata::OutgoingMetadataLayer),
/// which sends that chain. ([`SetOrgIdLayer`](super::SetOrgIdLayer) judges
/// differently: the headers only, leaving the chain to that layer.)
///
/// Implemented for `http::HeaderMap`, tonic's `MetadataMap`,
/// `tonic::Request<T>`, `http::Request<B>` and the
/// [`metadata`](crate::metadata) module's [`OutgoingMetadata`] chain. Another
/// carrier of outgoing metadata implements only
/// [`InjectOrgId::inject_org_id_value`], following the same rules; the other
/// methods build on it.
///
/// ```
/// use tonic_hotpath::tenant::{InjectOrgId, OrgId};
///
/// let mut request = tonic::Request::new(());
/// let id = OrgId::new("team-a")?;
/// request.inject_org_id(&id)?;
/// request.inject_org_id(&id)?; // the same id again is fine
/// assert!(request.inject_org_id(&OrgId::new("team-b")?).is_err());
/// assert_eq!(request.metadata().get("x-scope-orgid").unwrap(), "team-a");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait InjectOrgId {
    /// Injects `value`, an `x-scope-orgid` value built from a validated
    /// [`OrgId`] or [`TenantIds`] (see their `to_header_value`).
    fn inject_org_id_value(&mut self, value: &HeaderValue) -> Result<(), InjectError>;

    /// Injects one org id.
    fn inject_org_id(&mut self, id: &OrgId) -> Result<(), InjectError> {
        self.inject_org_id_value(&id.to_header_value())
    }

    /// Injects a federated id (`a|b|c`).
    fn inject_tenant_ids(&mut self, ids: &TenantIds) -> Result<(), InjectError> {
        self.inject_org_id_value(&ids.to_header_value())
    }
}

/// The rule shared by every target, given the values already present:
/// `Ok(true)` if `value` must be added, `Ok(false)` if the same id is
/// already there, an error for a different id or several.
fn needs_insert<'a>(
    present: impl Iterator<Item = &'a HeaderValue>,
    value: &HeaderValue,
) -> Result<bool, InjectError> {
    let (first, count) = first_and_count(present);
    decide(first, count, value)
}

/// The first of the `present` values and how many there are.
#[inline]
fn first_and_count<'a>(
    mut present: impl Iterator<Item = &'a HeaderValue>,
) -> (Option<&'a HeaderValue>, usize) {
    let first = present.next();
    (first, first.map_or(0, |_| 1 + present.count()))
}

/// [`needs_insert`] given the first present value and how many values are
/// present in all.
#[inline]
fn decide(
    first: Option<&HeaderValue>,
    count: usize,
    value: &HeaderValue,
) -> Result<bool, InjectError> {
    match first {
        None => Ok(true),
        Some(existing) if count == 1 && existing == value => Ok(false),
        Some(existing) if count == 1 => Err(different_org_id(existing, value)),
        Some(_) => Err(InjectError::TooManyHeaders { count }),
    }
}

#[cold]
#[inline(never)]
fn different_org_id(present: &HeaderValue, injected: &HeaderValue) -> InjectError {
    InjectError::DifferentOrgIdPresent {
        present: String::from_utf8_lossy(present.as_bytes()).into_owned(),
        injected: String::from_utf8_lossy(injected.as_bytes()).into_owned(),
    }
}

/// Adds `value` to `headers`, which hold no org id (checked by the caller).
/// Out of line, so that the map's insert is inlined here once.
#[inline(never)]
fn add_org_id(headers: &mut HeaderMap, value: &HeaderValue) {
    headers.insert(ORG_ID_HEADER_NAME, value.clone());
}

/// Insert if absent, accept the same value, refuse a different one or
/// several.
fn inject_into_headers(headers: &mut HeaderMap, value: &HeaderValue) -> Result<(), InjectError> {
    if needs_insert(headers.get_all(&ORG_ID_HEADER_NAME).iter(), value)? {
        add_org_id(headers, value);
    }
    Ok(())
}

/// [`needs_insert`] for a request about to be sent, whose org ids are
/// those in its `headers` followed by those of the outgoing-metadata chain
/// [`OutgoingMetadataLayer`](crate::metadata::OutgoingMetadataLayer) would
/// add: the one attached to its `extensions`, else the task's current one
/// (dskit's `InjectIntoGRPCRequest` reads `metadata.FromOutgoingContext`,
/// appended pairs included). Below that layer the chain is already in the
/// headers and neither in the extensions nor in scope, so either way each
/// id is counted once. The chain is read in place (a single-key walk; no
/// map is built, nothing is cloned).
fn needs_insert_before_send(
    headers: &HeaderMap,
    extensions: &http::Extensions,
    value: &HeaderValue,
) -> Result<bool, InjectError> {
    let (first, count) = first_and_count(headers.get_all(&ORG_ID_HEADER_NAME).iter());
    OutgoingMetadata::with_pending(extensions, |chain| match chain {
        None => decide(first, count, value),
        Some(chain) => {
            let (chain_first, chain_count) = chain.first_and_count(&ORG_ID_HEADER_NAME);
            decide(first.or(chain_first), count + chain_count, value)
        }
    })
}

/// Injects into an `http::Request` about to be sent (see
/// [`needs_insert_before_send`]): the value goes into its headers only if
/// neither they nor the pending chain carry an org id.
#[inline]
fn inject_into_request<B>(
    request: &mut http::Request<B>,
    value: &HeaderValue,
) -> Result<(), InjectError> {
    if needs_insert_before_send(request.headers(), request.extensions(), value)? {
        add_org_id(request.headers_mut(), value);
    }
    Ok(())
}

/// What [`SetOrgId`](super::SetOrgId) does to each request: judges the
/// org ids in its headers only (absent: `value` is added; the same: nothing
/// changes; a different one or several: the error, nothing changed), then,
/// if an outgoing-metadata chain is pending (attached or in scope), claims
/// the header ([`ClaimedHeaders`]) so that an
/// [`OutgoingMetadataLayer`](crate::metadata::OutgoingMetadataLayer) below
/// judges the chain's ids against it when it writes them. Without a
/// pending chain nothing is claimed and nothing is allocated.
#[inline]
pub(crate) fn stamp_into_request<B>(
    request: &mut http::Request<B>,
    value: &HeaderValue,
) -> Result<(), InjectError> {
    inject_into_headers(request.headers_mut(), value)?;
    if OutgoingMetadata::is_pending(request.extensions()) {
        claim_org_id(request.extensions_mut(), value);
    }
    Ok(())
}

/// Claims `x-scope-orgid: value`, which the request's headers now carry.
#[inline(never)]
fn claim_org_id(extensions: &mut http::Extensions, value: &HeaderValue) {
    ClaimedHeaders::claim(extensions, ORG_ID_HEADER_NAME, value.clone());
}

/// The [`InjectError`] that a refusal by an
/// [`OutgoingMetadataLayer`](crate::metadata::OutgoingMetadataLayer) below
/// means when the claimed header it names is the org id: the chain
/// carries a different org id (`present`), or several. `None` for any
/// other error.
pub(crate) fn inject_error_of_claim_conflict(conflict: &ClaimedHeaderError) -> Option<InjectError> {
    if conflict.header() != ORG_ID_HEADER {
        return None;
    }
    match conflict {
        ClaimedHeaderError::DifferentValue {
            claimed, outgoing, ..
        } => Some(InjectError::DifferentOrgIdPresent {
            present: outgoing.clone(),
            injected: claimed.clone(),
        }),
        ClaimedHeaderError::SeveralValues { count, .. } => {
            Some(InjectError::TooManyHeaders { count: *count })
        }
    }
}

/// The chain is persistent: injecting replaces `self` with a handle that
/// has the org id appended (the previous handle, if cloned, is unchanged).
///
/// ```
/// use tonic_hotpath::metadata::OutgoingMetadata;
/// use tonic_hotpath::tenant::{InjectOrgId, OrgId};
///
/// let mut chain = OutgoingMetadata::new().append_static("x-request-id", "42")?;
/// chain.inject_org_id(&OrgId::new("team-a")?)?;
/// chain.inject_org_id(&OrgId::new("team-a")?)?; // the same id again is fine
/// assert!(chain.inject_org_id(&OrgId::new("team-b")?).is_err());
/// assert_eq!(chain.get("x-scope-orgid").unwrap(), "team-a");
/// assert_eq!(chain.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl InjectOrgId for OutgoingMetadata {
    fn inject_org_id_value(&mut self, value: &HeaderValue) -> Result<(), InjectError> {
        let (first, count) = self.first_and_count(&ORG_ID_HEADER_NAME);
        if decide(first, count, value)? {
            let value = Bytes::copy_from_slice(value.as_bytes());
            *self = self
                .append_bytes(ORG_ID_HEADER, value)
                .map_err(InjectError::Metadata)?;
        }
        Ok(())
    }
}

impl InjectOrgId for HeaderMap {
    fn inject_org_id_value(&mut self, value: &HeaderValue) -> Result<(), InjectError> {
        inject_into_headers(self, value)
    }
}

impl InjectOrgId for MetadataMap {
    fn inject_org_id_value(&mut self, value: &HeaderValue) -> Result<(), InjectError> {
        inject_into_headers(self.as_mut(), value)
    }
}

/// Judged on the request's own metadata and the outgoing-metadata chain
/// pending for it, counted together: the chain attached with
/// [`set_outgoing_metadata`](crate::metadata::OutgoingMetadataExt::set_outgoing_metadata),
/// else the task's current [`scope`](OutgoingMetadata::scope) at the time
/// of this call (not at send time). So an id the chain already carries is
/// not added again, and a different one, or several in all, is refused, as
/// dskit's `InjectIntoGRPCRequest` counts the pairs appended to the
/// outgoing context. The id, when added, goes into the request's metadata.
///
/// That is what is sent when the request goes through an
/// [`OutgoingMetadataLayer`](crate::metadata::OutgoingMetadataLayer), which
/// writes the chain. A client without one never sends the chain, and an id
/// found only there would not be sent either: inject into the request's
/// metadata map instead (`request.metadata_mut().inject_org_id(..)`), which
/// judges the metadata alone.
///
/// ```
/// use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataExt};
/// use tonic_hotpath::tenant::{InjectOrgId, OrgId};
///
/// let mut request = tonic::Request::new(());
/// let chain = OutgoingMetadata::new().append_static("x-scope-orgid", "team-a")?;
/// request.set_outgoing_metadata(chain);
/// request.inject_org_id(&OrgId::new("team-a")?)?; // the chain has it: nothing added
/// assert!(request.metadata().get("x-scope-orgid").is_none());
/// assert!(request.inject_org_id(&OrgId::new("team-b")?).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<T> InjectOrgId for tonic::Request<T> {
    fn inject_org_id_value(&mut self, value: &HeaderValue) -> Result<(), InjectError> {
        if needs_insert_before_send(self.metadata().as_ref(), self.extensions(), value)? {
            add_org_id(self.metadata_mut().as_mut(), value);
        }
        Ok(())
    }
}

/// As for `tonic::Request`: the headers and the chain pending for the
/// request (attached, else in the task's scope at the time of this call)
/// count together; for a request that goes through an
/// [`OutgoingMetadataLayer`](crate::metadata::OutgoingMetadataLayer).
/// Inject into `request.headers_mut()` to judge the headers alone.
impl<B> InjectOrgId for http::Request<B> {
    fn inject_org_id_value(&mut self, value: &HeaderValue) -> Result<(), InjectError> {
        inject_into_request(self, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_is_inserted_same_is_accepted_different_is_refused() {
        let mut headers = HeaderMap::new();
        let a = OrgId::new("a").unwrap();
        headers.inject_org_id(&a).unwrap();
        headers.inject_org_id(&a).unwrap();
        assert_eq!(headers.get_all("x-scope-orgid").iter().count(), 1);
        let err = headers
            .inject_org_id(&OrgId::new("b").unwrap())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot inject org id 'b': a different org id 'a' is already present"
        );
        assert_eq!(headers.get("x-scope-orgid").unwrap(), "a");
    }

    #[test]
    fn several_present_is_refused_even_if_one_matches() {
        let mut metadata = MetadataMap::new();
        metadata.append("x-scope-orgid", "a".parse().unwrap());
        metadata.append("x-scope-orgid", "b".parse().unwrap());
        let err = metadata
            .inject_org_id(&OrgId::new("a").unwrap())
            .unwrap_err();
        assert_eq!(err, InjectError::TooManyHeaders { count: 2 });
        assert_eq!(metadata.get_all("x-scope-orgid").iter().count(), 2);
    }

    #[test]
    fn tenant_ids_are_injected_in_normal_form() {
        let mut request = http::Request::new(());
        let ids = TenantIds::parse("b|a").unwrap();
        request.inject_tenant_ids(&ids).unwrap();
        assert_eq!(request.headers().get("x-scope-orgid").unwrap(), "a|b");
        request.inject_tenant_ids(&ids).unwrap();
        let status = tonic::Status::from(
            request
                .inject_org_id(&OrgId::new("a").unwrap())
                .unwrap_err(),
        );
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn outgoing_chain_follows_the_same_rules_and_keeps_earlier_handles() {
        let parent = OutgoingMetadata::new()
            .append_static("x-request-id", "42")
            .unwrap();
        let mut chain = parent.clone();
        chain.inject_org_id(&OrgId::new("a").unwrap()).unwrap();
        chain.inject_org_id(&OrgId::new("a").unwrap()).unwrap();
        assert_eq!(chain.get_all("x-scope-orgid").count(), 1);
        assert_eq!(parent.len(), 1, "the parent handle is unchanged");
        let err = chain.inject_org_id(&OrgId::new("b").unwrap()).unwrap_err();
        assert!(matches!(err, InjectError::DifferentOrgIdPresent { .. }));
        assert_eq!(chain.len(), 2);
    }

    #[test]
    fn outgoing_chain_size_limit_is_an_error_and_changes_nothing() {
        // Room for the request id only: name + value + 32 bytes per entry.
        let mut chain = OutgoingMetadata::with_limit(50)
            .append_static("x-request-id", "42")
            .unwrap();
        let err = chain
            .inject_org_id(&OrgId::new("team-a").unwrap())
            .unwrap_err();
        assert!(matches!(err, InjectError::Metadata(_)), "{err:?}");
        assert!(
            err.to_string().starts_with("cannot inject org id: "),
            "{err}"
        );
        assert!(std::error::Error::source(&err).is_some());
        assert_eq!(chain.len(), 1);
        assert!(chain.get("x-scope-orgid").is_none());
    }
}
