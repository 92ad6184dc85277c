//! The org-id constants, on the types they describe.

use super::{OrgId, TenantIds};
use crate::wire::org_id;

impl OrgId {
    /// The header that carries the org id, lower case as HTTP/2 carries it
    /// (Cortex `user.lowerOrgIDHeaderName`).
    ///
    /// ```
    /// assert_eq!(tonic_hotpath::tenant::OrgId::HEADER, "x-scope-orgid");
    /// ```
    pub const HEADER: &'static str = super::extract::ORG_ID_HEADER;

    /// The longest valid org id, in bytes (Cortex's `MaxTenantIDLength`).
    pub const MAX_LEN: usize = org_id::MAX_ORG_ID_LEN;

    /// Ids Cortex refuses because they name objects in its block storage
    /// layout (`__markers__` directories, the `user-index.json.gz` bucket
    /// index). They are refused here too, so an id that passes this crate
    /// passes Cortex.
    pub const RESERVED: [&'static str; 2] = org_id::RESERVED_ORG_IDS;

    /// Ids up to this many bytes are stored inline: making or cloning them
    /// allocates nothing. A UUID (36 bytes) fits.
    pub const INLINE_CAPACITY: usize = super::org_id::INLINE_CAPACITY;
}

impl TenantIds {
    /// The separator between the tenants of a federated (multi-tenant) id.
    pub const SEPARATOR: u8 = org_id::TENANT_SEPARATOR;
}
