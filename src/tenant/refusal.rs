//! How [`RequireOrgId`](super::RequireOrgId) answers a request it refuses:
//! a gRPC status to gRPC and grpc-web callers, a plain HTTP error to
//! anything else (axum routes served beside gRPC), as dskit's HTTP
//! middleware `AuthenticateUser` does.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderMap, HeaderValue, StatusCode};
use tonic::Status;

use super::body::RequireOrgIdBody;
use super::error::OrgIdError;

/// A refused request's error and the protocol to answer it in.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// A gRPC or grpc-web call: a trailers-only status.
    Grpc(OrgIdError),
    /// Any other request: `401 Unauthorized` with the error's text.
    PlainHttp(OrgIdError),
}

impl Refusal {
    /// The refusal of a request with `headers` for `error`. Called only on
    /// the refusal path, so the content type is read only then.
    #[cold]
    pub(crate) fn of(headers: &HeaderMap, error: OrgIdError) -> Self {
        if is_grpc(headers) {
            Self::Grpc(error)
        } else {
            Self::PlainHttp(error)
        }
    }

    /// The response answering the refusal (`status` when the future was
    /// polled after answering it).
    pub(crate) fn into_response<B>(
        refusal: Result<Self, Status>,
    ) -> http::Response<RequireOrgIdBody<B>> {
        match refusal {
            Ok(Self::Grpc(error)) => Status::from(error).into_http(),
            Ok(Self::PlainHttp(error)) => plain_http(&error),
            Err(status) => status.into_http(),
        }
    }
}

/// Whether the request is gRPC or grpc-web, by its `content-type`:
/// `application/grpc`, `application/grpc+...` or `application/grpc;...`
/// (gRPC over HTTP/2), or `application/grpc-web...` (grpc-web, text or
/// binary); the media type compared case-insensitively. A request without
/// a content type (a `GET`) is plain HTTP.
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    let Some(content_type) = headers.get(CONTENT_TYPE) else {
        return false;
    };
    let bytes = content_type.as_bytes();
    let Some((media_type, rest)) = bytes.split_at_checked(GRPC.len()) else {
        return false;
    };
    media_type.eq_ignore_ascii_case(GRPC)
        && match rest {
            [] | [b'+' | b';', ..] => true,
            [b'-', web @ ..] => web
                .get(..3)
                .is_some_and(|web| web.eq_ignore_ascii_case(b"web")),
            _ => false,
        }
}

/// A plain HTTP refusal, as Go's `http.Error(w, err.Error(), 401)` in
/// dskit's `AuthenticateUser`: `401 Unauthorized`, the error's text and a
/// newline as a `text/plain` body, `X-Content-Type-Options: nosniff`.
fn plain_http<B>(error: &OrgIdError) -> http::Response<RequireOrgIdBody<B>> {
    let text = format!("{error}\n");
    let mut response = http::Response::new(RequireOrgIdBody::refusal_text(Bytes::from(text)));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
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
            assert!(is_grpc(&with_content_type(grpc)), "{grpc}");
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
            "application/grp",
            "",
        ] {
            assert!(!is_grpc(&with_content_type(plain)), "{plain}");
        }
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn a_plain_http_refusal_is_401_with_the_error_text() {
        let response = Refusal::into_response::<String>(Ok(Refusal::of(
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

        let grpc = Refusal::into_response::<String>(Ok(Refusal::of(
            &with_content_type("application/grpc-web+proto"),
            OrgIdError::Missing,
        )));
        assert_eq!(grpc.status(), StatusCode::OK);
        assert_eq!(grpc.headers()["grpc-status"], "16");
    }
}
