//! How the tenant layers answer a request they refuse
//! ([`RequireOrgId`](super::RequireOrgId): no valid org id;
//! [`TenantLimit`](crate::limits::TenantLimit): over a limit): a gRPC
//! status to gRPC and grpc-web callers, a plain HTTP error with the
//! refusal's text to anything else (axum routes served beside gRPC), as
//! dskit's HTTP middleware `AuthenticateUser` and Cortex's HTTP push path
//! do.

use std::fmt;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderMap, HeaderValue, StatusCode};
use tonic::Status;

use super::error::OrgIdError;
use super::require_org_id::ResponseBody;
use crate::wire::content_type::is_grpc;

/// Why a tenant layer refused a request.
pub(crate) trait RefusalError: fmt::Display + Into<Status> {
    /// The status of the plain HTTP answer.
    const HTTP_STATUS: StatusCode;

    /// The plain HTTP answer's `Retry-After`, in seconds (none by
    /// default).
    fn retry_after_seconds(&self) -> Option<u64> {
        None
    }
}

impl RefusalError for OrgIdError {
    /// dskit's `http.Error(w, err.Error(), 401)`.
    const HTTP_STATUS: StatusCode = StatusCode::UNAUTHORIZED;
}

/// A tenant layer's response body: empty for a gRPC refusal (its
/// `Default`), the refusal's text for a plain HTTP one.
pub(crate) trait RefusalBody: Default {
    /// The body of a plain HTTP refusal: `text`, in one frame.
    fn refusal_text(text: Bytes) -> Self;
}

impl<B, G> RefusalBody for ResponseBody<B, G> {
    fn refusal_text(text: Bytes) -> Self {
        ResponseBody::refusal_text(text)
    }
}

/// A refused request's error and the protocol to answer it in.
#[derive(Debug)]
pub(crate) enum Refusal<E> {
    /// A gRPC or grpc-web call: a trailers-only status.
    Grpc(E),
    /// Any other request: `E::HTTP_STATUS` with the error's text.
    PlainHttp(E),
}

impl<E: RefusalError> Refusal<E> {
    /// The refusal of a request with `headers` for `error`. Called only on
    /// the refusal path, so the content type is read only then.
    #[cold]
    pub(crate) fn of(headers: &HeaderMap, error: E) -> Self {
        if is_grpc(headers, GRPC_WEB) {
            Self::Grpc(error)
        } else {
            Self::PlainHttp(error)
        }
    }

    /// The response answering the refusal (`status` when the future was
    /// polled after answering it).
    pub(crate) fn into_response<Body: RefusalBody>(
        refusal: Result<Self, Status>,
    ) -> http::Response<Body> {
        match refusal {
            Ok(Self::Grpc(error)) => error.into().into_http(),
            Ok(Self::PlainHttp(error)) => plain_http(&error),
            Err(status) => status.into_http(),
        }
    }
}

/// grpc-web requests are answered in gRPC too: tonic-web turns the status
/// into grpc-web's, which its clients read.
const GRPC_WEB: bool = true;

/// A plain HTTP refusal, as Go's `http.Error(w, err.Error(), status)`:
/// `E::HTTP_STATUS`, the error's text and a newline as a `text/plain`
/// body, `X-Content-Type-Options: nosniff`, and `Retry-After` when the
/// error says when to retry.
fn plain_http<E: RefusalError, Body: RefusalBody>(error: &E) -> http::Response<Body> {
    let text = format!("{error}\n");
    let mut response = http::Response::new(Body::refusal_text(Bytes::from(text)));
    *response.status_mut() = E::HTTP_STATUS;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Some(seconds) = error.retry_after_seconds() {
        headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_content_type(content_type: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers
    }

    #[test]
    fn grpc_and_grpc_web_content_types_are_grpc() {
        for grpc in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc+json",
            "application/grpc;charset=utf-8",
            "Application/gRPC+proto",
            "application/grpc-web",
            "application/grpc-web+proto",
            "application/grpc-web-text",
            "application/grpc-web-text+proto",
        ] {
            assert!(is_grpc(&with_content_type(grpc), GRPC_WEB), "{grpc}");
        }
    }

    #[test]
    fn other_content_types_and_none_are_plain_http() {
        for plain in [
            "application/json",
            "text/plain",
            "application/grpcx",
            "application/grpc-",
            "application/grpc-we",
            "application/grpc-webx",
            "application/grp",
            "",
        ] {
            assert!(!is_grpc(&with_content_type(plain), GRPC_WEB), "{plain}");
        }
        assert!(!is_grpc(&HeaderMap::new(), GRPC_WEB));
    }

    #[test]
    fn a_plain_http_refusal_is_401_with_the_error_text() {
        let response = Refusal::into_response::<ResponseBody<String>>(Ok(Refusal::of(
            &HeaderMap::new(),
            OrgIdError::Missing,
        )));
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            response.headers()[CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        assert_eq!(response.headers()[X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert!(response.headers().get("grpc-status").is_none());

        let grpc = Refusal::into_response::<ResponseBody<String>>(Ok(Refusal::of(
            &with_content_type("application/grpc-web+proto"),
            OrgIdError::Missing,
        )));
        assert_eq!(grpc.status(), StatusCode::OK);
        assert_eq!(grpc.headers()["grpc-status"], "16");
    }
}
