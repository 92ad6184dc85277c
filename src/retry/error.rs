//! [`RetryConfigError`]: a retry configuration that grpc-go would refuse.

use std::fmt;

/// What is wrong with a retry configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryConfigErrorKind {
    /// The service config is not JSON, or a field has the wrong JSON type
    /// (grpc-go: `json.Unmarshal` fails).
    Json,
    /// A duration is not a protobuf JSON duration (`"0.1s"`), or a status
    /// code is neither a code's name (`"UNAVAILABLE"`) nor its number.
    Value,
    /// A `retryPolicy` breaks A6's rules: `maxAttempts` ≤ 1, a backoff or
    /// multiplier ≤ 0, or no retryable status code.
    RetryPolicy,
    /// `retryThrottling` out of range: `maxTokens` not in (0, 1000], or
    /// `tokenRatio` ≤ 0.
    Throttling,
    /// Two method configs name the same method (grpc-go: "duplicated
    /// name").
    DuplicateName,
    /// A name with a method but no service (grpc-go: "cannot combine empty
    /// 'service' and non-empty 'method'").
    MethodWithoutService,
}

/// A retry configuration refused when it is built, as grpc-go refuses the
/// same service config: the kind, and what was wrong in words.
///
/// ```
/// use tonic_hotpath::retry::{RetryConfig, RetryConfigErrorKind};
///
/// let json = r#"{"methodConfig": [{
///     "name": [{"service": "echo.Echo"}],
///     "retryPolicy": {"maxAttempts": 1, "initialBackoff": "0.1s",
///         "maxBackoff": "1s", "backoffMultiplier": 2,
///         "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;
/// let error = RetryConfig::from_json(json).unwrap_err();
/// assert_eq!(error.kind(), RetryConfigErrorKind::RetryPolicy);
/// assert!(error.to_string().contains("maxAttempts"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryConfigError {
    kind: RetryConfigErrorKind,
    detail: String,
}

impl RetryConfigError {
    pub(crate) fn new(kind: RetryConfigErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
        }
    }

    /// What kind of mistake it is.
    pub fn kind(&self) -> RetryConfigErrorKind {
        self.kind
    }
}

impl fmt::Display for RetryConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            RetryConfigErrorKind::Json => "malformed service config",
            RetryConfigErrorKind::Value => "invalid value in service config",
            RetryConfigErrorKind::RetryPolicy => "invalid retry policy",
            RetryConfigErrorKind::Throttling => "invalid retry throttling config",
            RetryConfigErrorKind::DuplicateName => "duplicated name in service config",
            RetryConfigErrorKind::MethodWithoutService => "invalid name in service config",
        };
        write!(f, "{what}: {}", self.detail)
    }
}

impl std::error::Error for RetryConfigError {}
