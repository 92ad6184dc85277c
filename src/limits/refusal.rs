//! A refused call: [`LimitError`], and how it is answered (a gRPC
//! `RESOURCE_EXHAUSTED`, or `429 Too Many Requests` to plain HTTP).

use std::fmt;
use std::time::Duration;

use http::StatusCode;
use tonic::Status;
use tonic::metadata::MetadataValue;

use super::config::Rate;
use crate::tenant::OrgId;
use crate::tenant::refusal::RefusalError;

impl LimitError {
    /// The trailer that tells a gRPC client when to retry (gRFC A6):
    /// `grpc-retry-pushback-ms`, a whole number of milliseconds. A grpc-go
    /// client with a retry policy waits exactly that long before its next
    /// attempt (instead of its backoff); a negative or malformed value would
    /// tell it not to retry at all, so none is ever sent.
    pub const RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";
}

/// Why [`TenantLimitLayer`](super::TenantLimitLayer) refused a call, or
/// [`TenantBudget::charge`](super::TenantBudget::charge) a charge: the
/// tenant and the limit it was over (the limit in force on this replica:
/// under the global strategy, the rate divided by the replicas), and when
/// a retry may succeed.
///
/// Its text is the refusal's message, stable (clients may match on it):
///
/// - `in-flight request limit (4) exceeded for tenant "team-a"`
/// - `request rate limit (10 per second, burst 20) exceeded for tenant "team-a"`
/// - `work rate limit (1000 per second, burst 5000) exceeded for tenant "team-a" by a charge of 800`
///
/// (rates with up to 3 decimals: `0.5 per second`, `33.333 per second`).
/// A federated call names the first of its tenants that was over a limit.
///
/// As a [`Status`] it is `RESOURCE_EXHAUSTED` with that message and, with a
/// [`retry_after`](Self::retry_after), the trailer [`LimitError::RETRY_PUSHBACK_MS`]
/// (milliseconds, rounded up); the layer answers plain HTTP with `429` and
/// `Retry-After` (whole seconds, rounded up, at least 1).
///
/// ```
/// use std::time::Duration;
/// use tonic_hotpath::tenant::OrgId;
/// use tonic_hotpath::limits::{LimitKind, LimitError};
///
/// let refused = LimitError::new(OrgId::new("team-a")?, LimitKind::InFlight { max: 4 });
/// assert_eq!(
///     refused.to_string(),
///     "in-flight request limit (4) exceeded for tenant \"team-a\""
/// );
/// assert_eq!(refused.retry_after(), None);
/// let status = tonic::Status::from(refused.clone());
/// assert_eq!(status.code(), tonic::Code::ResourceExhausted);
/// assert!(status.metadata().get("grpc-retry-pushback-ms").is_none());
///
/// // With a pushback: 1.2 ms rounds up to 2.
/// let status = tonic::Status::from(refused.with_retry_after(Duration::from_micros(1_200)));
/// assert_eq!(status.metadata().get("grpc-retry-pushback-ms").unwrap(), "2");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LimitError {
    tenant: OrgId,
    limit: LimitKind,
    retry_after: Option<Duration>,
}

/// The limit a refused call was over.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum LimitKind {
    /// The tenant already had `max` calls in flight.
    InFlight {
        /// The in-flight limit.
        max: u32,
    },
    /// The tenant's calls came faster than its rate limit.
    Rate(Rate),
    /// A charge of `units` work units was more than the tenant's work
    /// bucket held ([`TenantBudget::charge`](super::TenantBudget::charge)).
    WorkRate {
        /// The work rate limit.
        rate: Rate,
        /// The units the refused charge asked for.
        units: u64,
    },
}

impl LimitKind {
    /// The reason as a metric attribute value: `in_flight_limited`,
    /// `rate_limited` (Cortex's discarded-samples reason is
    /// `rate_limited`) or `work_rate_limited`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InFlight { .. } => "in_flight_limited",
            Self::Rate(_) => "rate_limited",
            Self::WorkRate { .. } => "work_rate_limited",
        }
    }
}

impl LimitError {
    /// A refusal of a call of `tenant` over `limit`, without a pushback.
    pub fn new(tenant: OrgId, limit: LimitKind) -> Self {
        Self {
            tenant,
            limit,
            retry_after: None,
        }
    }

    /// This refusal telling the caller to retry `after` from now.
    #[must_use]
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// How long from the refusal until a retry may succeed: for a rate or
    /// work-rate refusal, until the tenant's bucket holds what was asked
    /// (on this replica; none for a charge above the burst, which never
    /// succeeds); for an in-flight refusal, the
    /// [configured pushback](super::TenantLimitLayer::in_flight_pushback),
    /// if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The tenant that was over its limit.
    pub fn tenant(&self) -> &OrgId {
        &self.tenant
    }

    /// The limit it was over.
    pub fn limit(&self) -> LimitKind {
        self.limit
    }
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.limit {
            LimitKind::InFlight { max } => write!(
                f,
                "in-flight request limit ({max}) exceeded for tenant \"{}\"",
                self.tenant
            ),
            LimitKind::Rate(rate) => write!(
                f,
                "request rate limit ({rate}) exceeded for tenant \"{}\"",
                self.tenant
            ),
            LimitKind::WorkRate { rate, units } => write!(
                f,
                "work rate limit ({rate}) exceeded for tenant \"{}\" by a charge of {units}",
                self.tenant
            ),
        }
    }
}

impl std::error::Error for LimitError {}

impl From<LimitError> for Status {
    /// `RESOURCE_EXHAUSTED` with the refusal's text and, with a
    /// [`retry_after`](LimitError::retry_after), the
    /// [`LimitError::RETRY_PUSHBACK_MS`] trailer.
    fn from(refused: LimitError) -> Self {
        let mut status = Status::resource_exhausted(refused.to_string());
        if let Some(after) = refused.retry_after {
            status.metadata_mut().insert(
                LimitError::RETRY_PUSHBACK_MS,
                MetadataValue::from(pushback_ms(after)),
            );
        }
        status
    }
}

/// `after` in whole milliseconds, rounded up (1 ns is 1 ms: a caller
/// told 0 would retry too early), at most `i32::MAX` (24.8 days: a client
/// parsing it into a 32-bit integer, as grpc-go's `strconv.Atoi` does on
/// 32-bit platforms, must not read a malformed value, which means "never
/// retry").
pub(crate) fn pushback_ms(after: Duration) -> u32 {
    const MAX: u32 = i32::MAX.unsigned_abs();
    let millis = after.as_nanos().div_ceil(1_000_000);
    u32::try_from(millis).map_or(MAX, |millis| millis.min(MAX))
}

/// `after` in whole seconds for `Retry-After`, rounded up, at least 1
/// (`Retry-After: 0` would invite an immediate retry).
pub(crate) fn retry_after_seconds(after: Duration) -> u64 {
    let seconds = after
        .as_secs()
        .saturating_add(u64::from(after.subsec_nanos() > 0));
    seconds.max(1)
}

impl RefusalError for LimitError {
    /// `429 Too Many Requests`, as Cortex's HTTP push path answers a
    /// rate-limited tenant.
    const HTTP_STATUS: StatusCode = StatusCode::TOO_MANY_REQUESTS;

    fn retry_after_seconds(&self) -> Option<u64> {
        self.retry_after.map(retry_after_seconds)
    }
}

/// A refused call and the protocol to answer it in: a trailers-only
/// `RESOURCE_EXHAUSTED`, or `429` with the text to plain HTTP.
pub(crate) type Refusal = crate::tenant::refusal::Refusal<LimitError>;

#[cfg(test)]
mod tests {
    use super::super::ResponseBody;
    use http::header::CONTENT_TYPE;
    use http::{HeaderMap, HeaderValue};

    use super::*;

    fn refused(limit: LimitKind) -> LimitError {
        LimitError::new(OrgId::new("team-a").unwrap(), limit)
    }

    #[test]
    fn the_messages_name_the_tenant_and_the_limit() {
        assert_eq!(
            refused(LimitKind::InFlight { max: 4 }).to_string(),
            "in-flight request limit (4) exceeded for tenant \"team-a\""
        );
        let rate = Rate::new(10.0, 20).unwrap();
        let message = refused(LimitKind::Rate(rate)).to_string();
        assert_eq!(
            message,
            "request rate limit (10 per second, burst 20) exceeded for tenant \"team-a\""
        );
        assert_eq!(LimitKind::Rate(rate).reason(), "rate_limited");
    }

    #[test]
    fn grpc_gets_a_trailers_only_status_and_plain_http_a_429() {
        let mut grpc = HeaderMap::new();
        grpc.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        let limit = LimitKind::InFlight { max: 1 };
        let response =
            Refusal::into_response::<ResponseBody<String>>(Ok(Refusal::of(&grpc, refused(limit))));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "8");

        let response = Refusal::into_response::<ResponseBody<String>>(Ok(Refusal::of(
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

    #[test]
    fn pushbacks_round_up_and_stay_in_range() {
        let ms = |nanos| pushback_ms(Duration::from_nanos(nanos));
        assert_eq!(ms(0), 0);
        assert_eq!(ms(1), 1);
        assert_eq!(ms(1_000_000), 1);
        assert_eq!(ms(1_000_001), 2);
        assert_eq!(ms(u64::MAX), i32::MAX.unsigned_abs());
        assert_eq!(pushback_ms(Duration::MAX), i32::MAX.unsigned_abs());
        let seconds = |nanos| retry_after_seconds(Duration::from_nanos(nanos));
        assert_eq!(seconds(0), 1);
        assert_eq!(seconds(1), 1);
        assert_eq!(seconds(1_000_000_000), 1);
        assert_eq!(seconds(1_000_000_001), 2);
        assert_eq!(retry_after_seconds(Duration::MAX), u64::MAX);
    }

    #[test]
    fn a_refusal_with_a_pushback_carries_it_in_the_trailers_and_retry_after() {
        let rate = Rate::new(0.1, 1).unwrap();
        let refusal =
            || refused(LimitKind::Rate(rate)).with_retry_after(Duration::from_millis(9_500));
        let mut grpc = HeaderMap::new();
        grpc.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        let response =
            Refusal::into_response::<ResponseBody<String>>(Ok(Refusal::of(&grpc, refusal())));
        assert_eq!(response.headers()["grpc-status"], "8");
        assert_eq!(response.headers()[LimitError::RETRY_PUSHBACK_MS], "9500");
        assert!(response.headers().get(http::header::RETRY_AFTER).is_none());

        let response = Refusal::into_response::<ResponseBody<String>>(Ok(Refusal::of(
            &HeaderMap::new(),
            refusal(),
        )));
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[http::header::RETRY_AFTER], "10");
        assert!(
            response
                .headers()
                .get(LimitError::RETRY_PUSHBACK_MS)
                .is_none()
        );
        // Without a pushback, neither.
        let response = Refusal::into_response::<ResponseBody<String>>(Ok(Refusal::of(
            &HeaderMap::new(),
            refused(LimitKind::Rate(rate)),
        )));
        assert!(response.headers().get(http::header::RETRY_AFTER).is_none());
        assert_eq!(
            LimitKind::WorkRate { rate, units: 3 }.reason(),
            "work_rate_limited"
        );
    }
}
