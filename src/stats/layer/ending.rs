//! How an RPC ends: the [`Phase`] it is in, the [`Ending`] that closes it,
//! and [`final_status`], the one function that decides the status its
//! `End` reports from what was seen.
//!
//! The rule every handler relies on: exactly one `End`, with the status
//! the caller saw. The phase makes "exactly one" a matter of types (an
//! ended RPC delivers nothing); `final_status` makes "the status the
//! caller saw" one decision, tested here path by path.

use std::borrow::Cow;
use std::time::Instant;

use http::StatusCode;
use tonic::Code;

use super::status::missing_status;
use crate::stats::event::RpcError;

/// Where an RPC stands.
#[derive(Debug)]
pub(crate) enum Phase {
    /// No status yet: every event is delivered.
    Open,
    /// A status is known, `End` is not delivered yet. The first status
    /// wins: a later one (a server's trailers after the client reset the
    /// stream, the peer's trailers after the client's decoder refused a
    /// message) does not replace it. On the server, a status known before
    /// the response's trailers comes from the request body failing (the
    /// client reset the stream or the connection broke): the stream is
    /// closed, and no outbound event is delivered any more (grpc-go
    /// reports none).
    Decided(Status),
    /// `End` was delivered: nothing more is.
    Ended,
}

impl Phase {
    /// Whether `End` was delivered.
    pub(crate) fn is_ended(&self) -> bool {
        matches!(self, Phase::Ended)
    }
}

/// A gRPC status: its code and, unless empty, its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub(crate) code: Code,
    pub(crate) message: Option<Cow<'static, str>>,
}

impl Status {
    /// `code` with `message`, an empty message being none.
    pub(crate) fn new(code: Code, message: Cow<'static, str>) -> Self {
        Self {
            code,
            message: Some(message).filter(|message| !message.is_empty()),
        }
    }
}

/// What closes an RPC.
#[derive(Debug)]
pub(crate) enum Ending {
    /// The response is complete: its trailers, a trailers-only response,
    /// or the end of a response body without trailers. With no status
    /// seen, the status is the one tonic's client infers from the HTTP
    /// status. `truncated`: the body ended inside a message, which the
    /// reader's decoder reports as `Internal` over a missing or OK status.
    Complete { truncated: bool },
    /// The layer saw the RPC fail: a service error, a response body
    /// error, a response the client refuses. `code` and `message` are
    /// the status unless one was seen before; `error` is what happened.
    Failed {
        code: Code,
        message: Cow<'static, str>,
        error: RpcError,
    },
    /// The response future or body was dropped before the response was
    /// complete: `Cancelled`, unless a status was seen before.
    Dropped,
}

/// What was seen of an RPC by the time it ends.
#[derive(Debug)]
pub(crate) struct Seen {
    /// The status known before the ending ([`Phase::Decided`]).
    pub(crate) status: Option<Status>,
    /// The first error recorded.
    pub(crate) error: Option<RpcError>,
    /// The response's HTTP status, if its headers were seen.
    pub(crate) http_status: Option<StatusCode>,
    /// The request's deadline (`grpc-timeout`), if it had one.
    pub(crate) deadline: Option<Instant>,
}

/// What `End` reports.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Final {
    pub(crate) status: Status,
    pub(crate) error: Option<RpcError>,
}

/// The status and error an RPC's `End` reports, from what was `seen` and
/// how it `ending`s, at `end_time`:
///
/// 1. A response body cut inside a message is `Internal` over a missing
///    or OK status (tonic's decoder: "Unexpected EOF").
/// 2. Otherwise a status seen before the ending is kept (the first status
///    wins).
/// 3. Otherwise the ending gives it: the HTTP status's mapping for a
///    response complete without `grpc-status` (tonic's
///    `infer_grpc_status`; recorded as [`RpcError::MissingStatus`]), the
///    failure's own status, or `Cancelled` for a drop.
/// 4. `Cancelled` at or after the request's deadline is
///    `DeadlineExceeded` (grpc-go: the deadline cancelled the call).
///
/// The error is the first one recorded, else the ending's own (the
/// failure, the missing status, or [`RpcError::Cancelled`] for a drop
/// that no status explains).
pub(crate) fn final_status(seen: Seen, ending: Ending, end_time: Instant) -> Final {
    let Seen {
        status,
        error,
        http_status,
        deadline,
    } = seen;
    let (mut status, error) = match (status, ending) {
        (status, Ending::Complete { truncated: true })
            if status.as_ref().is_none_or(|status| status.code == Code::Ok) =>
        {
            let internal = Status {
                code: Code::Internal,
                message: None,
            };
            (internal, error)
        }
        (Some(status), Ending::Failed { error: failure, .. }) => (status, error.or(Some(failure))),
        (Some(status), Ending::Complete { .. } | Ending::Dropped) => (status, error),
        (
            None,
            Ending::Failed {
                code,
                message,
                error: failure,
            },
        ) => (Status::new(code, message), error.or(Some(failure))),
        (None, Ending::Complete { .. }) => {
            let http = http_status.unwrap_or(StatusCode::OK);
            let (code, message) = missing_status(http);
            let missing = RpcError::MissingStatus {
                http_status: http.as_u16(),
            };
            (Status::new(code, message), error.or(Some(missing)))
        }
        (None, Ending::Dropped) => (
            Status {
                code: Code::Cancelled,
                message: None,
            },
            error.or(Some(RpcError::Cancelled)),
        ),
    };
    if status.code == Code::Cancelled && deadline.is_some_and(|deadline| end_time >= deadline) {
        status.code = Code::DeadlineExceeded;
    }
    Final { status, error }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn seen(status: Option<Status>, error: Option<RpcError>) -> Seen {
        Seen {
            status,
            error,
            http_status: Some(StatusCode::OK),
            deadline: None,
        }
    }

    fn status(code: Code, message: &'static str) -> Status {
        Status::new(code, Cow::Borrowed(message))
    }

    fn failed(code: Code, message: &'static str) -> Ending {
        Ending::Failed {
            code,
            message: Cow::Borrowed(message),
            error: RpcError::Service {
                message: message.to_owned(),
            },
        }
    }

    #[test]
    fn a_seen_status_wins_over_every_ending() {
        let now = Instant::now();
        let reset = RpcError::Body {
            direction: crate::stats::Direction::Inbound,
            message: "stream reset".to_owned(),
        };
        for ending in [
            Ending::Complete { truncated: false },
            Ending::Complete { truncated: true },
            failed(Code::Internal, "later"),
            Ending::Dropped,
        ] {
            let end = final_status(
                seen(Some(status(Code::Cancelled, "")), Some(reset.clone())),
                ending,
                now,
            );
            assert_eq!(end.status, status(Code::Cancelled, ""));
            assert_eq!(end.error, Some(reset.clone()), "the first error is kept");
        }
    }

    #[test]
    fn a_failure_after_a_status_still_reports_its_error() {
        let end = final_status(
            seen(Some(status(Code::NotFound, "gone")), None),
            failed(Code::Internal, "service failed"),
            Instant::now(),
        );
        assert_eq!(end.status, status(Code::NotFound, "gone"));
        assert!(matches!(end.error, Some(RpcError::Service { .. })));
    }

    #[test]
    fn a_complete_response_without_status_maps_its_http_status() {
        for (http, code) in [
            (StatusCode::OK, Code::Unknown),
            (StatusCode::SERVICE_UNAVAILABLE, Code::Unavailable),
            (StatusCode::NOT_FOUND, Code::Unimplemented),
            (StatusCode::UNAUTHORIZED, Code::Unauthenticated),
            (StatusCode::IM_A_TEAPOT, Code::Unknown),
        ] {
            let mut seen = seen(None, None);
            seen.http_status = Some(http);
            let end = final_status(seen, Ending::Complete { truncated: false }, Instant::now());
            assert_eq!(end.status.code, code, "{http}");
            assert!(end.status.message.is_some());
            assert_eq!(
                end.error,
                Some(RpcError::MissingStatus {
                    http_status: http.as_u16()
                })
            );
        }
    }

    #[test]
    fn a_complete_response_with_no_headers_seen_is_read_as_http_ok() {
        let mut seen = seen(None, None);
        seen.http_status = None;
        let end = final_status(seen, Ending::Complete { truncated: false }, Instant::now());
        assert_eq!(end.status.code, Code::Unknown);
    }

    #[test]
    fn a_truncated_body_without_status_is_internal_and_keeps_its_error() {
        let cut = RpcError::Frame {
            direction: crate::stats::Direction::Inbound,
            error: crate::stats::frame::FrameError::Truncated { missing: 3 },
        };
        let end = final_status(
            seen(None, Some(cut.clone())),
            Ending::Complete { truncated: true },
            Instant::now(),
        );
        assert_eq!(end.status, status(Code::Internal, ""));
        assert_eq!(end.error, Some(cut));
    }

    #[test]
    fn the_truncated_rule_replaces_a_missing_or_ok_status_only() {
        let truncated = || Ending::Complete { truncated: true };
        let now = Instant::now();
        let ok = final_status(seen(Some(status(Code::Ok, "")), None), truncated(), now);
        assert_eq!(ok.status, status(Code::Internal, ""));
        let not_found = final_status(
            seen(Some(status(Code::NotFound, "x")), None),
            truncated(),
            now,
        );
        assert_eq!(not_found.status, status(Code::NotFound, "x"));
    }

    #[test]
    fn a_failure_gives_its_status_and_error() {
        let end = final_status(
            seen(None, None),
            failed(Code::Unavailable, "overloaded"),
            Instant::now(),
        );
        assert_eq!(end.status, status(Code::Unavailable, "overloaded"));
        assert!(matches!(end.error, Some(RpcError::Service { .. })));
        let end = final_status(seen(None, None), failed(Code::Internal, ""), Instant::now());
        assert_eq!(end.status.message, None, "an empty message is none");
    }

    #[test]
    fn a_drop_without_status_is_cancelled() {
        let end = final_status(seen(None, None), Ending::Dropped, Instant::now());
        assert_eq!(end.status, status(Code::Cancelled, ""));
        assert_eq!(end.error, Some(RpcError::Cancelled));
    }

    #[test]
    fn cancelled_at_or_after_the_deadline_is_deadline_exceeded() {
        let begin = Instant::now();
        let deadline = begin + Duration::from_millis(100);
        let with_deadline = |status| Seen {
            deadline: Some(deadline),
            ..seen(status, None)
        };
        let before = final_status(with_deadline(None), Ending::Dropped, begin);
        assert_eq!(before.status.code, Code::Cancelled);
        let at = final_status(with_deadline(None), Ending::Dropped, deadline);
        assert_eq!(at.status.code, Code::DeadlineExceeded);
        let reset = final_status(
            with_deadline(Some(status(Code::Cancelled, ""))),
            Ending::Complete { truncated: false },
            deadline + Duration::from_millis(1),
        );
        assert_eq!(reset.status.code, Code::DeadlineExceeded);
        let other = final_status(
            with_deadline(Some(status(Code::NotFound, ""))),
            Ending::Dropped,
            deadline,
        );
        assert_eq!(
            other.status.code,
            Code::NotFound,
            "only Cancelled becomes it"
        );
    }
}
