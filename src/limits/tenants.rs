//! The tenants a call names: read once per call by each admission layer
//! ([`TenantLimitLayer`](super::TenantLimitLayer) and
//! [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer)), borrowed from the
//! request.

use crate::tenant::extract::single_value;
use crate::tenant::tenant_ids::Parsed;
use crate::tenant::{OrgId, TenantIds};
use crate::wire::org_id;

/// The tenants of a call.
pub(crate) enum Tenants<'a> {
    /// One tenant, borrowed from the request.
    One(&'a str),
    /// Several, validated by `RequireOrgIdLayer` (its extension).
    Many(&'a [OrgId]),
    /// Several, parsed here from a federated `a|b` header.
    Parsed(TenantIds),
}

/// The tenants of `request`: those `RequireOrgIdLayer` put into its
/// extensions when that layer is outside this one; otherwise read from
/// its `x-scope-orgid` header by the same rules (borrowed, no allocation
/// for one tenant). `None` without a valid org id.
#[inline]
pub(crate) fn tenants_of<B>(request: &http::Request<B>) -> Option<Tenants<'_>> {
    if let Some(ids) = request.extensions().get::<TenantIds>() {
        return Some(match ids.single() {
            Some(id) => Tenants::One(id.as_str()),
            None => Tenants::Many(ids.as_slice()),
        });
    }
    let value = single_value(request.headers()).ok()?.as_bytes();
    // One walk: a single id is borrowed; a federated one is split once.
    match TenantIds::parse_borrowed(value).ok()? {
        Parsed::One(id) => org_id::ascii_str(id, 0).ok().map(Tenants::One),
        Parsed::Several(ids) => Some(Tenants::Parsed(ids)),
    }
}
