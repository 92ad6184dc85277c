//! The status a peer sees for what the layer observed: tonic's mappings of
//! errors, h2 reset reasons and HTTP statuses to gRPC codes, with grpc-go's
//! departures where a Go peer would report otherwise. Pure functions, no
//! per-RPC state; every mapping is pinned to tonic's own by a unit test.

use std::borrow::Cow;
use std::error::Error;

use http::StatusCode;
use tonic::Code;

use super::error_chain::{Cause, causes};
use crate::wire::status::http_status_code;

/// The code the *caller* is handed for an error from the client's
/// transport or a body (tonic's `Status::from_error`): a `tonic::Status`
/// anywhere in the source chain gives its code, an `h2::Error` (on top, or
/// under a `hyper::Error`) its reset reason's code, a hyper timeout
/// `Unavailable`, a hyper cancellation `Cancelled`, a connect failure
/// `Unavailable`, anything else `Unknown`. Two departures, to match
/// grpc-go: tonic's `TimeoutExpired` (the call's own deadline) is
/// `DeadlineExceeded` (tonic: `Cancelled`), and a connection that broke
/// (an I/O error under hyper or h2, which tonic reports as `Unknown`) is
/// `Unavailable`.
pub(crate) fn transport_error_code(error: &(dyn Error + 'static)) -> Code {
    causes(error)
        .find_map(|cause| match cause {
            Cause::H2(h2) | Cause::HyperH2(_, h2) => Some(code_from_h2(h2)),
            // tonic's `Unknown` may wrap a broken connection: look under it.
            Cause::Status(status) => (status.code() != Code::Unknown).then(|| status.code()),
            Cause::TimeoutExpired(_) => Some(Code::DeadlineExceeded),
            Cause::Connect(_) | Cause::Io | Cause::HyperTimeout(_) => Some(Code::Unavailable),
            Cause::HyperCanceled(_) => Some(Code::Cancelled),
            // The load-shed layer is on the server's side.
            Cause::Overloaded => None,
        })
        .unwrap_or(Code::Unknown)
}

/// The status a tonic *server* sends when the service inside its user
/// layers fails with `error` instead of answering: tonic's `RecoverError`
/// turns what `Status::try_from_error` recognises into a trailers-only
/// response (a `Status` in the source chain, an `h2::Error`, tower's
/// load-shed `Overloaded` as `ResourceExhausted`, `TimeoutExpired` as
/// `Cancelled`, hyper's timeout / cancellation); anything else reaches
/// hyper, which resets the stream with `INTERNAL_ERROR`, which the client
/// reads as `Internal` (tonic and grpc-go alike).
pub(crate) fn server_error_status(error: &(dyn Error + 'static)) -> (Code, Cow<'static, str>) {
    causes(error)
        .find_map(|cause| match cause {
            Cause::H2(h2) => Some((code_from_h2(h2), format!("h2 protocol error: {h2}").into())),
            Cause::Overloaded => Some((
                Code::ResourceExhausted,
                "Too many active requests for the connection".into(),
            )),
            Cause::Status(status) => Some((status.code(), status.message().to_owned().into())),
            Cause::TimeoutExpired(timeout) => Some((Code::Cancelled, timeout.to_string().into())),
            Cause::Connect(connect) => Some((Code::Unavailable, connect.to_string().into())),
            Cause::HyperTimeout(hyper) => Some((Code::Unavailable, hyper.to_string().into())),
            Cause::HyperCanceled(hyper) => Some((Code::Cancelled, hyper.to_string().into())),
            Cause::HyperH2(hyper, h2) => Some((
                code_from_h2(h2),
                format!("h2 protocol error: {hyper}").into(),
            )),
            // tonic's `try_from_error` does not look at I/O errors.
            Cause::Io => None,
        })
        .unwrap_or((Code::Internal, Cow::Borrowed("")))
}

/// tonic's mapping of an h2 error's reason (gRPC's PROTOCOL-HTTP2.md), and
/// `Unavailable` for a broken connection (grpc-go; tonic: `Unknown`).
pub(crate) fn code_from_h2(error: &h2::Error) -> Code {
    use h2::Reason;
    match error.reason() {
        Some(
            Reason::NO_ERROR
            | Reason::PROTOCOL_ERROR
            | Reason::INTERNAL_ERROR
            | Reason::FLOW_CONTROL_ERROR
            | Reason::SETTINGS_TIMEOUT
            | Reason::FRAME_SIZE_ERROR
            | Reason::COMPRESSION_ERROR
            | Reason::CONNECT_ERROR,
        ) => Code::Internal,
        Some(Reason::REFUSED_STREAM) => Code::Unavailable,
        Some(Reason::CANCEL) => Code::Cancelled,
        Some(Reason::ENHANCE_YOUR_CALM) => Code::ResourceExhausted,
        Some(Reason::INADEQUATE_SECURITY) => Code::PermissionDenied,
        None if error.is_io() => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// The status a tonic client hands its caller for a response that ended
/// without `grpc-status` (tonic's `infer_grpc_status`, after gRPC's
/// http-grpc-status-mapping.md): the HTTP status decides, and a `200`
/// without a status is `Unknown` (tonic ≥ 0.14.6, grpc-go ≥ 1.78).
pub(crate) fn missing_status(http: StatusCode) -> (Code, Cow<'static, str>) {
    let code = match http {
        StatusCode::OK => {
            return (
                Code::Unknown,
                Cow::Borrowed(
                    "protocol error: missing grpc-status trailer, stream was terminated \
                     without a final status (possible truncation by a proxy or load balancer)",
                ),
            );
        }
        other => http_status_code(other),
    };
    let message = format!(
        "grpc-status header missing, mapped from HTTP status code {}",
        http.as_u16()
    );
    (code, message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_errors_walk_sources() {
        let status = tonic::Status::not_found("x");
        assert_eq!(transport_error_code(&status), Code::NotFound);
        assert_eq!(
            transport_error_code(&tonic::TimeoutExpired(())),
            Code::DeadlineExceeded
        );
        // A broken connection: `Unavailable`, as grpc-go (tonic: `Unknown`).
        let io = std::io::Error::other("boom");
        assert_eq!(transport_error_code(&io), Code::Unavailable);
        let wrapped = tonic::Status::from_error(Box::new(std::io::Error::other("cut")));
        assert_eq!(wrapped.code(), Code::Unknown, "tonic's own mapping");
        assert_eq!(transport_error_code(&wrapped), Code::Unavailable);
        let other: Box<dyn Error> = "not transport".into();
        assert_eq!(transport_error_code(&*other), Code::Unknown);
    }

    #[test]
    fn h2_reasons_map_as_tonic_maps_them() {
        use h2::Reason;
        for (reason, code) in [
            (Reason::NO_ERROR, Code::Internal),
            (Reason::PROTOCOL_ERROR, Code::Internal),
            (Reason::REFUSED_STREAM, Code::Unavailable),
            (Reason::CANCEL, Code::Cancelled),
            (Reason::ENHANCE_YOUR_CALM, Code::ResourceExhausted),
            (Reason::INADEQUATE_SECURITY, Code::PermissionDenied),
        ] {
            let error = h2::Error::from(reason);
            let tonic_code = tonic::Status::from_error(Box::new(h2::Error::from(reason))).code();
            assert_eq!(transport_error_code(&error), code, "{reason:?}");
            assert_eq!(tonic_code, code, "{reason:?}: tonic agrees");
        }
    }

    /// An error whose source is a status.
    #[derive(Debug)]
    struct Wrapped(tonic::Status);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("wrapped")
        }
    }

    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    /// What tonic's `RecoverError` sends for a service error, as
    /// `Status::try_from_error` decides it (`None`: the stream is reset).
    fn tonic_server_answer(error: Box<dyn Error + Send + Sync>) -> Option<(Code, String)> {
        tonic::Status::try_from_error(error)
            .ok()
            .map(|status| (status.code(), status.message().to_owned()))
    }

    #[test]
    fn server_errors_map_as_tonic_recover_error_does() {
        type Make = fn() -> Box<dyn Error + Send + Sync>;
        let cases: [Make; 6] = [
            || Box::new(tonic::Status::permission_denied("no")),
            || Box::new(tower::load_shed::error::Overloaded::new()),
            || Box::new(tonic::TimeoutExpired(())),
            || Box::new(h2::Error::from(h2::Reason::CANCEL)),
            || Box::new(h2::Error::from(h2::Reason::ENHANCE_YOUR_CALM)),
            || Box::new(Wrapped(tonic::Status::aborted("inside"))),
        ];
        for make in cases {
            let ours = server_error_status(&*make());
            let tonic = tonic_server_answer(make()).expect("tonic answers with a status");
            assert_eq!((ours.0, ours.1.into_owned()), tonic);
        }
        // Not a status for tonic: hyper resets the stream (`Internal`).
        let elapsed = || -> Box<dyn Error + Send + Sync> { "request timed out".into() };
        assert!(tonic_server_answer(elapsed()).is_none());
        assert_eq!(server_error_status(&*elapsed()).0, Code::Internal);
    }

    #[test]
    fn http_statuses_map_as_tonic_infers_them() {
        for (http, code) in [
            (200, Code::Unknown),
            (400, Code::Internal),
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::Unimplemented),
            (429, Code::Unavailable),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::Unavailable),
            (500, Code::Unknown),
            (418, Code::Unknown),
        ] {
            let (ours, message) = missing_status(StatusCode::from_u16(http).unwrap());
            assert_eq!(ours, code, "{http}");
            if http != 200 {
                assert_eq!(
                    message,
                    format!("grpc-status header missing, mapped from HTTP status code {http}")
                );
            }
        }
    }
}
