//! Zero-copy org-id (tenant id) extraction, validation and propagation, with
//! tower layers for server and client: Cortex's `x-scope-orgid` handling at
//! the cost of a bare header read.
//!
//! Cortex's `user.ExtractFromGRPCRequest` copied the whole incoming metadata
//! to read one header. Here extraction borrows from the request's headers
//! (no copy of the map or the value) and still enforces every rule:
//!
//! - exactly one `x-scope-orgid` value ([`OrgIdError::Missing`],
//!   [`OrgIdError::TooManyHeaders`]);
//! - Cortex's tenant rules in one table-driven pass: at most 150 bytes,
//!   characters `a-z A-Z 0-9 ! - _ . * ' ( )`, not `.` or `..`, not empty,
//!   not Cortex's reserved names `__markers__` / `user-index.json.gz`
//!   (refused, so an id accepted here is accepted by Cortex storage);
//! - federated ids `a|b|c` as [`TenantIds`]: validated, sorted and
//!   de-duplicated, with no allocation for a single tenant.
//!
//! Errors name the offending character and its byte position.
//!
//! # Server
//!
//! [`RequireOrgIdLayer`] answers a missing id with `UNAUTHENTICATED` and an
//! invalid one with `INVALID_ARGUMENT` without calling the service (a plain
//! HTTP request served beside gRPC gets dskit's `401 Unauthorized` with the
//! error's text instead); a valid id reaches the handler through
//! [`OrgIdRequestExt`]:
//!
//! ```no_run
//! use tonic::{Request, Status};
//! use tonic_hotpath::tenant::{OrgIdRequestExt, RequireOrgIdLayer};
//!
//! fn handle(request: &Request<()>) -> Result<(), Status> {
//!     let org_id = request.org_id().ok_or_else(|| Status::unauthenticated("no org id"))?;
//!     println!("call for tenant {org_id}");
//!     Ok(())
//! }
//!
//! let server = tonic::transport::Server::builder().layer(RequireOrgIdLayer::new());
//! // server.add_service(EchoServer::new(..)).serve(addr)
//! # drop(server);
//! ```
//!
//! # Client and forwarding
//!
//! [`SetOrgIdLayer`] stamps a fixed id on every call over a `Channel`. To
//! forward the incoming id downstream (Cortex's distributor → ingester), a
//! handler injects its request's tenants into the request it sends with
//! [`InjectOrgId`]:
//!
//! ```
//! use tonic::{Request, Status};
//! use tonic_hotpath::tenant::{InjectOrgId, OrgIdRequestExt};
//!
//! fn downstream_request<M, N>(incoming: &Request<M>, message: N) -> Result<Request<N>, Status> {
//!     let tenants = incoming
//!         .tenant_ids()
//!         .ok_or_else(|| Status::unauthenticated("no org id"))?;
//!     let mut outgoing = Request::new(message);
//!     outgoing.inject_tenant_ids(tenants)?;
//!     Ok(outgoing)
//! }
//! ```
//!
//! # Borrowed and owned extraction
//!
//! ```
//! use tonic::metadata::MetadataMap;
//! use tonic_hotpath::tenant;
//!
//! let mut metadata = MetadataMap::new();
//! metadata.insert("x-scope-orgid", "team-a".parse().unwrap());
//! let borrowed: &str = tenant::extract(&metadata)?; // no allocation
//! let owned: tenant::OrgId = tenant::extract_owned(&metadata)?; // inline copy
//! assert_eq!(borrowed, owned.as_str());
//! # Ok::<(), tenant::OrgIdError>(())
//! ```

mod consts;
mod error;
pub(crate) mod extract;
mod inject;
mod inner_or_rejected;
#[cfg(feature = "limits")]
#[deprecated(note = "moved to `tonic_hotpath::limits`: import from there")]
pub mod limits;
mod org_id;
pub(crate) mod paths;
pub(crate) mod refusal;
mod request_ext;
pub mod require_org_id;
pub mod set_org_id;
pub(crate) mod tenant_ids;

pub use error::{InjectError, InvalidOrgIdError, OrgIdError};
pub use extract::{
    extract, extract_from_headers, extract_owned, extract_owned_from_headers, extract_tenant_ids,
    extract_tenant_ids_from_headers,
};
pub use inject::InjectOrgId;
pub use org_id::{OrgId, validate_org_id};
pub use request_ext::{OrgIdRequestExt, org_id};
pub use require_org_id::{RequireOrgId, RequireOrgIdLayer};
pub use set_org_id::{SetOrgId, SetOrgIdLayer};
pub use tenant_ids::TenantIds;
