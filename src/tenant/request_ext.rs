//! Handler-side access to the org id that [`RequireOrgIdLayer`] validated.
//!
//! [`RequireOrgIdLayer`]: super::RequireOrgIdLayer

use super::org_id::OrgId;
use super::tenant_ids::TenantIds;

/// Reads the tenants that [`RequireOrgIdLayer`](super::RequireOrgIdLayer)
/// put into a request's extensions: a one-line accessor for handlers.
///
/// ```
/// use tonic::{Request, Status};
/// use tonic_hotpath::tenant::{OrgId, OrgIdRequestExt, TenantIds};
///
/// fn handler(request: &Request<()>) -> Result<String, Status> {
///     let org_id = request
///         .org_id()
///         .ok_or_else(|| Status::unauthenticated("no org id"))?;
///     Ok(format!("hello {org_id}"))
/// }
///
/// let mut request = Request::new(());
/// assert!(handler(&request).is_err());
/// request
///     .extensions_mut()
///     .insert(TenantIds::from(OrgId::new("team-a").unwrap()));
/// assert_eq!(handler(&request).unwrap(), "hello team-a");
/// ```
pub trait OrgIdRequestExt {
    /// All tenants of the request (one unless multi-tenant ids are allowed),
    /// or `None` if no layer validated an org id.
    fn tenant_ids(&self) -> Option<&TenantIds>;

    /// The request's org id when it names exactly one tenant; `None` if no
    /// layer validated an org id or it names several tenants.
    fn org_id(&self) -> Option<&OrgId> {
        self.tenant_ids().and_then(TenantIds::single)
    }
}

impl<T> OrgIdRequestExt for tonic::Request<T> {
    fn tenant_ids(&self) -> Option<&TenantIds> {
        self.extensions().get()
    }
}

impl<B> OrgIdRequestExt for http::Request<B> {
    fn tenant_ids(&self) -> Option<&TenantIds> {
        self.extensions().get()
    }
}

/// The request's single org id, as [`OrgIdRequestExt::org_id`].
pub fn org_id<R: OrgIdRequestExt>(request: &R) -> Option<&OrgId> {
    request.org_id()
}
