//! The response body of [`TenantLimit`](super::TenantLimit):
//! [`RequireOrgId`](crate::tenant::RequireOrgId)'s body carrying the call's
//! in-flight slot.

use super::state::Slot;
use crate::tenant::require_org_id;

/// The response body of [`TenantLimit`](super::TenantLimit): the inner
/// service's body when the call was admitted, or the body of a refusal
/// (none for gRPC, whose status travels in the response headers as a
/// trailers-only response; the refusal's text for plain HTTP).
///
/// An admitted call's [`InFlightSlot`] rides in this body: it is given
/// back when the body ends (its last frame or an error was read) or is
/// dropped, however the call ended: OK, an error status, a client cancel,
/// a deadline, a reset stream. The inner body needs no `Default`, so the
/// layer sits above or below any other layer; every frame, size hint and
/// error is forwarded unchanged, and no allocation is added.
///
/// It is [`require_org_id::ResponseBody`] carrying the slot: one body type
/// for both tenant layers, with the same methods (`inner` wraps a body
/// with no slot: a call the layer did not count; `into_inner` gives the
/// slot back).
///
/// ```
/// use http_body::Body as _;
/// use tonic_hotpath::limits::ResponseBody;
///
/// let refused = ResponseBody::<String>::default();
/// assert!(refused.is_end_stream());
/// let uncounted = ResponseBody::inner(String::from("payload"));
/// assert_eq!(uncounted.size_hint().exact(), Some(7));
/// ```
pub type ResponseBody<B> = require_org_id::ResponseBody<B, InFlightSlot>;

/// An admitted call's in-flight places (one per tenant it was charged to),
/// carried by its [`ResponseBody`] and given back when that body ends or is
/// dropped. Only [`TenantLimit`](super::TenantLimit) makes one holding
/// places; the default holds none (a call the layer did not count).
///
/// ```
/// use tonic_hotpath::limits::{InFlightSlot, ResponseBody};
/// use tonic_hotpath::tenant::require_org_id;
///
/// // The limits layer's body is the tenant layers' one body, with a slot.
/// let uncounted: require_org_id::ResponseBody<String, InFlightSlot> =
///     ResponseBody::inner(String::from("payload"));
/// assert_eq!(uncounted.into_inner().as_deref(), Some("payload"));
/// ```
#[derive(Debug, Default)]
pub struct InFlightSlot {
    /// Held for its `Drop`, which gives the places back.
    _slot: Option<Slot>,
}

impl<B> ResponseBody<B> {
    /// Wraps the inner body with the call's slot, given back when the body
    /// ends or is dropped.
    #[inline]
    pub(crate) fn with_slot(body: B, slot: Option<Slot>) -> Self {
        Self::guarded(body, InFlightSlot { _slot: slot })
    }
}
