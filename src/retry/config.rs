//! [`RetryConfig`]: the retry part of a gRPC service config (gRFC A6), read
//! from the JSON grpc-go accepts or built by hand, and the policy of a
//! method looked up as grpc-go looks it up.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Map, Value};
use tonic::Code;

use super::error::{RetryConfigError, RetryConfigErrorKind};
use super::policy::RetryPolicy;
use super::throttle::RetryThrottling;

/// The retry policies of a channel's methods and its retry budget: the
/// `methodConfig[].retryPolicy` and `retryThrottling` of a gRPC service
/// config, read as grpc-go reads them.
///
/// A call's policy is its method's (`/service/method`), else its
/// service's (a name with no method), else the default (a name with
/// neither); a method config without a `retryPolicy` means no retries
/// for what it names. Calls without a policy are still retried
/// transparently when the server never saw them (A6).
///
/// What grpc-go ignores is ignored: other fields of a method config
/// (`timeout`, `waitForReady`, sizes), the load-balancing config, and
/// `hedgingPolicy` (grpc-go has no hedging). Field names match
/// case-insensitively, as Go's `encoding/json` matches them.
///
/// ```
/// use tonic::Code;
/// use tonic_hotpath::retry::RetryConfig;
///
/// let config = RetryConfig::from_json(r#"{
///   "methodConfig": [{
///     "name": [{"service": "echo.Echo"}],
///     "retryPolicy": {
///       "maxAttempts": 4,
///       "initialBackoff": "0.01s",
///       "maxBackoff": "0.3s",
///       "backoffMultiplier": 2,
///       "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
///     }
///   }],
///   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
/// }"#)?;
/// let policy = config.policy("/echo.Echo/UnaryEcho").unwrap();
/// assert_eq!(policy.max_attempts(), 4);
/// assert!(policy.is_retryable(Code::ResourceExhausted));
/// assert!(config.policy("/other.Service/Call").is_none());
/// # Ok::<(), tonic_hotpath::retry::RetryConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RetryConfig {
    /// By name: `/service/method`, `/service/`, or `` (the default).
    methods: HashMap<Box<str>, Option<RetryPolicy>>,
    throttling: Option<RetryThrottling>,
    max_call_attempts: u32,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            methods: HashMap::new(),
            throttling: None,
            max_call_attempts: Self::DEFAULT_MAX_CALL_ATTEMPTS,
        }
    }
}

impl RetryConfig {
    /// The cap on any policy's `maxAttempts` unless set otherwise: 5, as
    /// A6 and grpc-go's `WithMaxCallAttempts` default.
    pub const DEFAULT_MAX_CALL_ATTEMPTS: u32 = 5;

    /// No policy: only transparent retries.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the retry part of a gRPC service config, or says why grpc-go
    /// would refuse it.
    pub fn from_json(json: &str) -> Result<Self, RetryConfigError> {
        let root: Value = serde_json::from_str(json)
            .map_err(|e| RetryConfigError::new(RetryConfigErrorKind::Json, e.to_string()))?;
        let root = object(&root, "service config")?;
        let mut config = Self::new();
        if let Some(methods) = field(root, "methodConfig").filter(|v| !v.is_null()) {
            let methods = methods
                .as_array()
                .ok_or_else(|| wrong_type("methodConfig", "an array"))?;
            for method in methods {
                config.read_method_config(object(method, "methodConfig[]")?)?;
            }
        }
        if let Some(throttling) = field(root, "retryThrottling").filter(|v| !v.is_null()) {
            let throttling = object(throttling, "retryThrottling")?;
            let number = |name| {
                field(throttling, name)
                    .filter(|v| !v.is_null())
                    .map(|v| v.as_f64().ok_or_else(|| wrong_type(name, "a number")))
                    .transpose()
                    .map(Option::unwrap_or_default)
            };
            config.throttling = Some(RetryThrottling::new(
                number("maxTokens")?,
                number("tokenRatio")?,
            )?);
        }
        Ok(config)
    }

    fn read_method_config(&mut self, method: &Map<String, Value>) -> Result<(), RetryConfigError> {
        // grpc-go skips a method config without names.
        let Some(names) = field(method, "name").filter(|v| !v.is_null()) else {
            return Ok(());
        };
        let names = names
            .as_array()
            .ok_or_else(|| wrong_type("name", "an array"))?;
        let policy = match field(method, "retryPolicy").filter(|v| !v.is_null()) {
            Some(policy) => Some(read_policy(object(policy, "retryPolicy")?)?),
            None => None,
        };
        for name in names {
            let name = object(name, "name[]")?;
            let path = path_of(text(name, "service")?, text(name, "method")?)?;
            if self.methods.contains_key(path.as_str()) {
                return Err(RetryConfigError::new(
                    RetryConfigErrorKind::DuplicateName,
                    format!("{path:?} is named twice"),
                ));
            }
            self.methods.insert(path.into_boxed_str(), policy);
        }
        Ok(())
    }

    /// Sets the policy of one method (`service` as `package.Service`).
    pub fn method(mut self, service: &str, method: &str, policy: RetryPolicy) -> Self {
        self.methods.insert(
            format!("/{service}/{method}").into_boxed_str(),
            Some(policy),
        );
        self
    }

    /// Sets the policy of a service's methods without one of their own.
    pub fn service(mut self, service: &str, policy: RetryPolicy) -> Self {
        self.methods
            .insert(format!("/{service}/").into_boxed_str(), Some(policy));
        self
    }

    /// Sets the policy of every method with none of its own or its
    /// service's.
    pub fn default_policy(mut self, policy: RetryPolicy) -> Self {
        self.methods.insert(Box::from(""), Some(policy));
        self
    }

    /// Sets the channel's retry budget.
    pub fn throttling(mut self, throttling: RetryThrottling) -> Self {
        self.throttling = Some(throttling);
        self
    }

    /// Caps every policy's `maxAttempts` at `attempts`; below 2, the
    /// default (5) is kept, as grpc-go's `WithMaxCallAttempts` does.
    pub fn max_call_attempts(mut self, attempts: u32) -> Self {
        self.max_call_attempts = if attempts < 2 {
            Self::DEFAULT_MAX_CALL_ATTEMPTS
        } else {
            attempts
        };
        self
    }

    /// The cap on attempts per call.
    pub fn call_attempts_cap(&self) -> u32 {
        self.max_call_attempts
    }

    /// The retry budget, if one is set.
    pub fn retry_throttling(&self) -> Option<RetryThrottling> {
        self.throttling
    }

    /// The policy of the method at `path` (`/package.Service/Method`):
    /// its own, else its service's, else the default.
    pub fn policy(&self, path: &str) -> Option<&RetryPolicy> {
        if self.methods.is_empty() {
            return None;
        }
        let found = self.methods.get(path).or_else(|| {
            let service = &path[..path.rfind('/').map_or(0, |slash| slash + 1)];
            self.methods.get(service).or_else(|| self.methods.get(""))
        });
        found.and_then(Option::as_ref)
    }
}

/// A string field (absent or `null`: empty).
fn text<'a>(object: &'a Map<String, Value>, key: &str) -> Result<&'a str, RetryConfigError> {
    match field(object, key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(wrong_type(key, "a string")),
    }
}

/// grpc-go's `generatePath`: `/service/method`, `/service/`, or ``.
fn path_of(service: &str, method: &str) -> Result<String, RetryConfigError> {
    if service.is_empty() {
        if !method.is_empty() {
            return Err(RetryConfigError::new(
                RetryConfigErrorKind::MethodWithoutService,
                format!("cannot combine empty 'service' and non-empty 'method' ({method:?})"),
            ));
        }
        return Ok(String::new());
    }
    Ok(format!("/{service}/{method}"))
}

fn read_policy(policy: &Map<String, Value>) -> Result<RetryPolicy, RetryConfigError> {
    let mut builder = RetryPolicy::builder();
    if let Some(attempts) = field(policy, "maxAttempts").filter(|v| !v.is_null()) {
        let attempts = attempts
            .as_i64()
            .ok_or_else(|| wrong_type("maxAttempts", "an integer"))?;
        builder = builder.max_attempts_signed(attempts);
    }
    if let Some(backoff) = field(policy, "initialBackoff").filter(|v| !v.is_null()) {
        builder = builder.initial_backoff(duration(backoff, "initialBackoff")?);
    }
    if let Some(backoff) = field(policy, "maxBackoff").filter(|v| !v.is_null()) {
        builder = builder.max_backoff(duration(backoff, "maxBackoff")?);
    }
    if let Some(multiplier) = field(policy, "backoffMultiplier").filter(|v| !v.is_null()) {
        let multiplier = multiplier
            .as_f64()
            .ok_or_else(|| wrong_type("backoffMultiplier", "a number"))?;
        builder = builder.backoff_multiplier(multiplier);
    }
    if let Some(codes) = field(policy, "retryableStatusCodes").filter(|v| !v.is_null()) {
        let codes = codes
            .as_array()
            .ok_or_else(|| wrong_type("retryableStatusCodes", "an array"))?;
        for code in codes {
            builder = builder.retryable_code(status_code(code)?);
        }
    }
    builder.build()
}

/// A field of `object` by name: the exact name first, else any that
/// equals it ignoring ASCII case (Go's `encoding/json`).
fn field<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    object.get(name).or_else(|| {
        object
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    })
}

fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, RetryConfigError> {
    value
        .as_object()
        .ok_or_else(|| wrong_type(what, "an object"))
}

fn wrong_type(what: &str, expected: &str) -> RetryConfigError {
    RetryConfigError::new(
        RetryConfigErrorKind::Json,
        format!("{what} must be {expected}"),
    )
}

/// A status code as grpc-go's `codes.Code` reads it from JSON: its number
/// (below 17), or its name in capitals (`"UNAVAILABLE"`).
fn status_code(value: &Value) -> Result<Code, RetryConfigError> {
    let invalid = || {
        RetryConfigError::new(
            RetryConfigErrorKind::Value,
            format!("invalid code: {value}"),
        )
    };
    if let Some(number) = value.as_u64() {
        return if number < 17 {
            Ok(Code::from_i32(number as i32))
        } else {
            Err(invalid())
        };
    }
    let name = value.as_str().ok_or_else(invalid)?;
    (0..17)
        .map(Code::from_i32)
        .find(|code| code_name(*code) == name)
        .ok_or_else(invalid)
}

/// A code's name as the service config spells it.
pub(crate) fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// A protobuf JSON duration as grpc-go reads one: a string of seconds
/// with an `s` unit and at most 9 decimals (`"0.1s"`, `".01s"`, `"3s"`).
/// Negative durations parse (and then fail the policy's checks).
fn duration(value: &Value, what: &str) -> Result<Duration, RetryConfigError> {
    let text = value
        .as_str()
        .ok_or_else(|| wrong_type(what, "a duration string such as \"0.1s\""))?;
    parse_duration(text).ok_or_else(|| {
        RetryConfigError::new(
            RetryConfigErrorKind::Value,
            format!("{what}: malformed duration {text:?}"),
        )
    })
}

/// `None` when malformed; a negative duration is `Some(ZERO)` (no policy
/// accepts it).
fn parse_duration(text: &str) -> Option<Duration> {
    let seconds = text.strip_suffix('s')?;
    let (negative, seconds) = match seconds.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, seconds),
    };
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    // Go's `strconv.ParseInt` takes a sign before the whole seconds.
    let whole = match whole.strip_prefix('+') {
        Some("") => return None,
        Some(digits) => digits,
        None => whole,
    };
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) || fraction.len() > 9 {
        return None;
    }
    let secs: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    // Maximum seconds of a protobuf Duration.
    if secs > 315_576_000_000 {
        return None;
    }
    let nanos: u32 = if fraction.is_empty() {
        0
    } else {
        fraction.parse::<u32>().ok()? * 10u32.pow(9 - fraction.len() as u32)
    };
    let duration = Duration::new(secs, nanos);
    Some(if negative { Duration::ZERO } else { duration })
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#""retryPolicy": {"MaxAttempts": 4, "InitialBackoff": ".01s",
        "MaxBackoff": ".01s", "BackoffMultiplier": 1.0,
        "RetryableStatusCodes": ["ALREADY_EXISTS"]}"#;

    #[test]
    fn grpc_go_test_configs_parse_with_go_field_name_rules() {
        let config = RetryConfig::from_json(&format!(
            r#"{{"methodConfig": [{{"name": [{{"service": "grpc.testing.TestService"}}],
                "waitForReady": true, {POLICY}}}]}}"#
        ))
        .unwrap();
        let policy = config
            .policy("/grpc.testing.TestService/EmptyCall")
            .unwrap();
        assert_eq!(policy.max_attempts(), 4);
        assert_eq!(policy.initial_backoff(), Duration::from_millis(10));
        assert!(policy.is_retryable(Code::AlreadyExists));
        assert!(!policy.is_retryable(Code::Unavailable));
        assert!(config.retry_throttling().is_none());
    }

    #[test]
    fn a_method_s_own_config_comes_before_its_service_s_then_the_default() {
        let config = RetryConfig::from_json(&format!(
            r#"{{"methodConfig": [
                {{"name": [{{"service": "s", "method": "m"}}], "timeout": "1s"}},
                {{"name": [{{"service": "s"}}], {POLICY}}},
                {{"name": [{{}}], "retryPolicy": {{"maxAttempts": 2, "initialBackoff": "1s",
                    "maxBackoff": "1s", "backoffMultiplier": 1, "retryableStatusCodes": [14]}}}}
            ]}}"#
        ))
        .unwrap();
        assert!(
            config.policy("/s/m").is_none(),
            "its own config has no policy"
        );
        assert_eq!(config.policy("/s/other").unwrap().max_attempts(), 4);
        let default = config.policy("/t/x").unwrap();
        assert_eq!(default.max_attempts(), 2);
        assert!(default.is_retryable(Code::Unavailable));
        assert!(RetryConfig::new().policy("/s/m").is_none());
    }

    #[test]
    fn invalid_configs_are_refused_as_grpc_go_refuses_them() {
        let cases = [
            ("", RetryConfigErrorKind::Json),
            ("[]", RetryConfigErrorKind::Json),
            (r#"{"methodConfig": {}}"#, RetryConfigErrorKind::Json),
            (
                r#"{"methodConfig": [{"name": [{"method": "m"}]}]}"#,
                RetryConfigErrorKind::MethodWithoutService,
            ),
            (
                r#"{"methodConfig": [{"name": [{"service": "s"}]}, {"name": [{"service": "s"}]}]}"#,
                RetryConfigErrorKind::DuplicateName,
            ),
            (
                r#"{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 4,
                    "initialBackoff": "10ms", "maxBackoff": "1s", "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
                RetryConfigErrorKind::Value,
            ),
            (
                r#"{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 4,
                    "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                    "retryableStatusCodes": ["unavailable"]}}]}"#,
                RetryConfigErrorKind::Value,
            ),
            (
                r#"{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 4,
                    "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                    "retryableStatusCodes": [17]}}]}"#,
                RetryConfigErrorKind::Value,
            ),
            (
                r#"{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 4,
                    "initialBackoff": "-1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
                RetryConfigErrorKind::RetryPolicy,
            ),
            (
                r#"{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 4,
                    "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                    "retryableStatusCodes": []}}]}"#,
                RetryConfigErrorKind::RetryPolicy,
            ),
            (
                r#"{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 2.5,
                    "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
                RetryConfigErrorKind::Json,
            ),
            (
                r#"{"retryThrottling": {"maxTokens": 1001, "tokenRatio": 0.1}}"#,
                RetryConfigErrorKind::Throttling,
            ),
            (
                r#"{"retryThrottling": {"maxTokens": 10}}"#,
                RetryConfigErrorKind::Throttling,
            ),
        ];
        for (json, kind) in cases {
            let error = RetryConfig::from_json(json).unwrap_err();
            assert_eq!(error.kind(), kind, "{json}: {error}");
        }
    }

    #[test]
    fn durations_parse_as_grpc_go_parses_them() {
        let ok =
            |text, millis| assert_eq!(parse_duration(text), Some(Duration::from_millis(millis)));
        ok("1s", 1000);
        ok(".01s", 10);
        ok("0.5s", 500);
        ok("2.s", 2000);
        ok("+1s", 1000);
        assert_eq!(
            parse_duration("0.000000001s"),
            Some(Duration::from_nanos(1))
        );
        assert_eq!(parse_duration("-1s"), Some(Duration::ZERO));
        for bad in [
            "",
            "s",
            ".s",
            "1",
            "1ms",
            "1.2.3s",
            "0.0000000001s",
            "+s",
            "+.5s",
            "1es",
            "999999999999s",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_cap_on_attempts_follows_grpc_go() {
        assert_eq!(RetryConfig::new().call_attempts_cap(), 5);
        assert_eq!(
            RetryConfig::new().max_call_attempts(7).call_attempts_cap(),
            7
        );
        assert_eq!(
            RetryConfig::new().max_call_attempts(1).call_attempts_cap(),
            5
        );
    }
}
