//! A call refused for overload: [`OverloadError`], answered as a gRPC
//! `UNAVAILABLE` with a pushback, or `503 Service Unavailable` to plain
//! HTTP.

use std::fmt;
use std::time::Duration;

use http::StatusCode;
use tonic::Status;
use tonic::metadata::MetadataValue;

use crate::limits::LimitError;
use crate::limits::refusal::{pushback_ms, retry_after_seconds};
use crate::tenant::OrgId;
use crate::tenant::refusal::RefusalError;

/// Why [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer) refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OverloadReason {
    /// The server was at its concurrency limit and the call's tenant
    /// already held its fair share of it.
    Limit,
    /// A shed-first call (a [batch method](super::AdaptiveLimitLayer::shed_first_methods)),
    /// refused once the calls in flight reach a fraction of the limit.
    ShedFirst,
    /// The call's deadline (`grpc-timeout`) was shorter than the latency
    /// calls have now: it would expire before it is answered.
    Deadline,
}

impl OverloadReason {
    /// The reason as a metric attribute value: `concurrency_limited`,
    /// `shed_first` or `deadline_too_short`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Limit => "concurrency_limited",
            Self::ShedFirst => "shed_first",
            Self::Deadline => "deadline_too_short",
        }
    }
}

/// A call [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer) refused: the
/// server is over what it can serve now. Retryable elsewhere, so as a
/// [`Status`] it is `UNAVAILABLE` (gRPC's code for "try again, maybe on
/// another server"; `RESOURCE_EXHAUSTED` stays the answer for a tenant
/// over its quota), always with a pushback
/// ([`LimitError::RETRY_PUSHBACK_MS`]), and `503 Service Unavailable`
/// with `Retry-After` to plain HTTP.
///
/// Its text is stable:
///
/// - `server overloaded: concurrency limit 12 reached, tenant "team-a" holds its share (6)`
/// - `server overloaded: concurrency limit 12 reached` (a call without a tenant)
/// - `server overloaded: shed-first call refused at 10 of 12 in flight`
/// - `server overloaded: deadline 3ms is shorter than the current latency 9ms`
///
/// ```
/// use std::time::Duration;
/// use tonic_hotpath::limits::{OverloadError, OverloadReason};
///
/// let refused = OverloadError::limit(12, None, 0, Duration::from_millis(9));
/// assert_eq!(refused.reason(), OverloadReason::Limit);
/// let status = tonic::Status::from(refused);
/// assert_eq!(status.code(), tonic::Code::Unavailable);
/// assert_eq!(status.metadata().get("grpc-retry-pushback-ms").unwrap(), "9");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OverloadError {
    reason: OverloadReason,
    tenant: Option<OrgId>,
    /// The limit, the tenant's share, or (deadline) the deadline and the
    /// latency, by reason.
    figures: Figures,
    retry_after: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Figures {
    Limit {
        limit: u32,
        share: u64,
    },
    ShedFirst {
        in_flight: u32,
        limit: u32,
    },
    Deadline {
        deadline: Duration,
        latency: Duration,
    },
}

impl OverloadError {
    /// A call refused at `limit`, its tenant (if any) holding its `share`;
    /// retry after `retry_after`.
    pub fn limit(limit: u32, tenant: Option<OrgId>, share: u64, retry_after: Duration) -> Self {
        Self {
            reason: OverloadReason::Limit,
            tenant,
            figures: Figures::Limit { limit, share },
            retry_after,
        }
    }

    /// A shed-first call refused at `in_flight` calls of `limit`.
    pub fn shed_first(
        in_flight: u32,
        limit: u32,
        tenant: Option<OrgId>,
        retry_after: Duration,
    ) -> Self {
        Self {
            reason: OverloadReason::ShedFirst,
            tenant,
            figures: Figures::ShedFirst { in_flight, limit },
            retry_after,
        }
    }

    /// A call whose `deadline` is shorter than the current `latency`.
    pub fn deadline(
        deadline: Duration,
        latency: Duration,
        tenant: Option<OrgId>,
        retry_after: Duration,
    ) -> Self {
        Self {
            reason: OverloadReason::Deadline,
            tenant,
            figures: Figures::Deadline { deadline, latency },
            retry_after,
        }
    }

    /// Why the call was refused.
    pub fn reason(&self) -> OverloadReason {
        self.reason
    }

    /// The call's tenant (the first named, for a federated call), if it
    /// had a valid org id.
    pub fn tenant(&self) -> Option<&OrgId> {
        self.tenant.as_ref()
    }

    /// When a retry may find room: the current latency of calls (about
    /// the time for the calls in flight to turn over), at least 1 ms.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }
}

impl fmt::Display for OverloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("server overloaded: ")?;
        match (self.figures, &self.tenant) {
            (Figures::Limit { limit, share }, Some(tenant)) => write!(
                f,
                "concurrency limit {limit} reached, tenant \"{tenant}\" holds its share ({share})"
            ),
            (Figures::Limit { limit, .. }, None) => {
                write!(f, "concurrency limit {limit} reached")
            }
            (Figures::ShedFirst { in_flight, limit }, _) => write!(
                f,
                "shed-first call refused at {in_flight} of {limit} in flight"
            ),
            (Figures::Deadline { deadline, latency }, _) => write!(
                f,
                "deadline {deadline:?} is shorter than the current latency {latency:?}"
            ),
        }
    }
}

impl std::error::Error for OverloadError {}

impl From<OverloadError> for Status {
    /// `UNAVAILABLE` with the refusal's text and the
    /// [`LimitError::RETRY_PUSHBACK_MS`] trailer.
    fn from(refused: OverloadError) -> Self {
        let mut status = Status::unavailable(refused.to_string());
        status.metadata_mut().insert(
            LimitError::RETRY_PUSHBACK_MS,
            MetadataValue::from(pushback_ms(refused.retry_after)),
        );
        status
    }
}

impl RefusalError for OverloadError {
    /// `503 Service Unavailable`, with `Retry-After`.
    const HTTP_STATUS: StatusCode = StatusCode::SERVICE_UNAVAILABLE;

    fn retry_after_seconds(&self) -> Option<u64> {
        Some(retry_after_seconds(self.retry_after))
    }
}

/// A refused call and the protocol to answer it in.
pub(crate) type Refusal = crate::tenant::refusal::Refusal<OverloadError>;

#[cfg(test)]
mod tests {
    use super::*;

    fn team() -> Option<OrgId> {
        Some(OrgId::new("team-a").unwrap())
    }

    #[test]
    fn the_messages_are_stable() {
        let ms = Duration::from_millis;
        assert_eq!(
            OverloadError::limit(12, team(), 6, ms(9)).to_string(),
            "server overloaded: concurrency limit 12 reached, tenant \"team-a\" holds its share (6)"
        );
        assert_eq!(
            OverloadError::limit(12, None, 0, ms(9)).to_string(),
            "server overloaded: concurrency limit 12 reached"
        );
        assert_eq!(
            OverloadError::shed_first(10, 12, team(), ms(9)).to_string(),
            "server overloaded: shed-first call refused at 10 of 12 in flight"
        );
        let late = OverloadError::deadline(ms(3), ms(9), team(), ms(9));
        assert_eq!(
            late.to_string(),
            "server overloaded: deadline 3ms is shorter than the current latency 9ms"
        );
        assert_eq!(late.reason().as_str(), "deadline_too_short");
        assert_eq!(late.tenant().map(OrgId::as_str), Some("team-a"));
    }

    #[test]
    fn plain_http_gets_503_with_retry_after() {
        let refused = OverloadError::limit(1, None, 0, Duration::from_millis(1_500));
        assert_eq!(refused.retry_after_seconds(), Some(2));
        assert_eq!(OverloadError::HTTP_STATUS, StatusCode::SERVICE_UNAVAILABLE);
        let status = Status::from(refused);
        assert_eq!(
            status.metadata().get("grpc-retry-pushback-ms").unwrap(),
            "1500"
        );
    }
}
