//! A refused call: [`LimitExceeded`], and how it is answered (a gRPC
//! `RESOURCE_EXHAUSTED`, or `429 Too Many Requests` to plain HTTP).

use std::fmt;

use bytes::Bytes;
use http::StatusCode;
use tonic::Status;

use super::body::TenantLimitBody;
use super::config::Rate;
use crate::tenant::OrgId;
use crate::tenant::refusal::{RefusalBody, RefusalError};

/// Why [`TenantLimitLayer`](super::TenantLimitLayer) refused a call: the
/// tenant and the limit it was over (the limit in force on this replica:
/// under the global strategy, the rate divided by the replicas).
///
/// Its text is the refusal's message, stable (clients may match on it):
///
/// - `in-flight request limit (4) exceeded for tenant "team-a"`
/// - `request rate limit (10 per second, burst 20) exceeded for tenant "team-a"`
///
/// (rates with up to 3 decimals: `0.5 per second`, `33.333 per second`).
/// A federated call names the first of its tenants that was over a limit.
///
/// ```
/// use tonic_hotpath::tenant::OrgId;
/// use tonic_hotpath::tenant::limits::{ExceededLimit, LimitExceeded};
///
/// let refused = LimitExceeded::new(OrgId::new("team-a")?, ExceededLimit::InFlight { max: 4 });
/// assert_eq!(
///     refused.to_string(),
///     "in-flight request limit (4) exceeded for tenant \"team-a\""
/// );
/// let status = tonic::Status::from(refused);
/// assert_eq!(status.code(), tonic::Code::ResourceExhausted);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LimitExceeded {
    tenant: OrgId,
    limit: ExceededLimit,
}

/// The limit a refused call was over.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum ExceededLimit {
    /// The tenant already had `max` calls in flight.
    InFlight {
        /// The in-flight limit.
        max: u32,
    },
    /// The tenant's calls came faster than its rate limit.
    Rate(Rate),
}

impl ExceededLimit {
    /// The reason as a metric attribute value: `in_flight_limited` or
    /// `rate_limited` (Cortex's discarded-samples reason is
    /// `rate_limited`).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InFlight { .. } => "in_flight_limited",
            Self::Rate(_) => "rate_limited",
        }
    }
}

impl LimitExceeded {
    /// A refusal of a call of `tenant` over `limit`.
    pub fn new(tenant: OrgId, limit: ExceededLimit) -> Self {
        Self { tenant, limit }
    }

    /// The tenant that was over its limit.
    pub fn tenant(&self) -> &OrgId {
        &self.tenant
    }

    /// The limit it was over.
    pub fn limit(&self) -> ExceededLimit {
        self.limit
    }
}

impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.limit {
            ExceededLimit::InFlight { max } => write!(
                f,
                "in-flight request limit ({max}) exceeded for tenant \"{}\"",
                self.tenant
            ),
            ExceededLimit::Rate(rate) => write!(
                f,
                "request rate limit ({rate}) exceeded for tenant \"{}\"",
                self.tenant
            ),
        }
    }
}

impl std::error::Error for LimitExceeded {}

impl From<LimitExceeded> for Status {
    /// `RESOURCE_EXHAUSTED` with the refusal's text.
    fn from(refused: LimitExceeded) -> Self {
        Status::resource_exhausted(refused.to_string())
    }
}

impl RefusalError for LimitExceeded {
    /// `429 Too Many Requests`, as Cortex's HTTP push path answers a
    /// rate-limited tenant.
    const HTTP_STATUS: StatusCode = StatusCode::TOO_MANY_REQUESTS;
}

impl<B> RefusalBody for TenantLimitBody<B> {
    fn refusal_text(text: Bytes) -> Self {
        TenantLimitBody::refusal_text(text)
    }
}

/// A refused call and the protocol to answer it in: a trailers-only
/// `RESOURCE_EXHAUSTED`, or `429` with the text to plain HTTP.
pub(crate) type Refusal = crate::tenant::refusal::Refusal<LimitExceeded>;

#[cfg(test)]
mod tests {
    use http::header::CONTENT_TYPE;
    use http::{HeaderMap, HeaderValue};

    use super::*;

    fn refused(limit: ExceededLimit) -> LimitExceeded {
        LimitExceeded::new(OrgId::new("team-a").unwrap(), limit)
    }

    #[test]
    fn the_messages_name_the_tenant_and_the_limit() {
        assert_eq!(
            refused(ExceededLimit::InFlight { max: 4 }).to_string(),
            "in-flight request limit (4) exceeded for tenant \"team-a\""
        );
        let rate = Rate::new(10.0, 20).unwrap();
        let message = refused(ExceededLimit::Rate(rate)).to_string();
        assert_eq!(
            message,
            "request rate limit (10 per second, burst 20) exceeded for tenant \"team-a\""
        );
        assert_eq!(ExceededLimit::Rate(rate).reason(), "rate_limited");
    }

    #[test]
    fn grpc_gets_a_trailers_only_status_and_plain_http_a_429() {
        let mut grpc = HeaderMap::new();
        grpc.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        let limit = ExceededLimit::InFlight { max: 1 };
        let response = Refusal::into_response::<TenantLimitBody<String>>(Ok(Refusal::of(
            &grpc,
            refused(limit),
        )));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "8");

        let response = Refusal::into_response::<TenantLimitBody<String>>(Ok(Refusal::of(
            &HeaderMap::new(),
            refused(limit),
        )));
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            response.headers()[CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        assert!(response.headers().get("grpc-status").is_none());
    }
}
