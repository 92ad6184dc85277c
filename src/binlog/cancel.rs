//! A call's last entry: `CANCEL` or the trailer of its final status, by
//! grpc-go's rule (`stream.go`, `clientStream.finish`) from what a tower
//! layer sees of the call.
//!
//! grpc-go logs `CANCEL` when the client's stream finishes with its
//! context's error (cancelled, or its deadline passed) or a closing
//! `ClientConn`, and a `SERVER_TRAILER` with the status otherwise. Which
//! of the two a passed deadline gives depends on the method's kind: a
//! stream (`NewStream`) has a goroutine that finishes it with the
//! context's error as soon as the deadline passes (`CANCEL`, unless the
//! transport's own `DEADLINE_EXCEEDED` wins the race, a few runs in
//! forty); a unary call (`Invoke`) has none, its deadline comes back as
//! the transport's status (`SERVER_TRAILER`, code 4). A tower layer does
//! not know the method's kind; [`streams`] says how it is taken.

use tonic::Code;

use crate::stats::{RpcError, Side};

/// A method's kinds as the application declared them
/// ([`BinaryLogBuilder::client_streaming`](super::BinaryLogBuilder::client_streaming),
/// [`BinaryLogBuilder::server_streaming`](super::BinaryLogBuilder::server_streaming)):
/// `None` where it declared no method of that kind, so the call's own
/// traffic is the evidence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Declared {
    /// Whether the method streams requests.
    pub(crate) client_streaming: Option<bool>,
    /// Whether the method streams responses.
    pub(crate) server_streaming: Option<bool>,
}

/// What a logged call had seen when it ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallEnd<'a> {
    /// Which side logs.
    pub(crate) side: Side,
    /// The `End`'s code (`DeadlineExceeded` for a `Cancelled` at or after
    /// the deadline: the stats layer's `final_status`).
    pub(crate) code: Code,
    /// The `End`'s error ([`RpcError::Cancelled`]: dropped before any
    /// status was known).
    pub(crate) error: Option<&'a RpcError>,
    /// Whether the peer's trailers (or trailers-only answer) were seen.
    pub(crate) trailers: bool,
    /// Request messages seen.
    pub(crate) requests: u32,
    /// Response messages seen.
    pub(crate) responses: u32,
    /// The method's declared kinds.
    pub(crate) declared: Declared,
}

/// Whether the call's last entry is `CANCEL` rather than a trailer:
///
/// - Only on the client (a server logs its status, as grpc-go's logs its
///   handler's return).
/// - A call dropped before any status and before its deadline (`End`:
///   `Cancelled` with [`RpcError::Cancelled`]), whatever its kind.
/// - A call its deadline ended (`DeadlineExceeded`: dropped at or after
///   the deadline, or reset by the peer past it) with no status from the
///   peer, when it [`streams`]. A unary call keeps the trailer with code
///   4, as grpc-go's `Invoke`; so does any call whose peer's trailers
///   arrived (their status is known: grpc-go logs it whenever it arrives
///   before the deadline's cancel).
pub(crate) fn logs_cancel(end: &CallEnd<'_>) -> bool {
    if end.side != Side::Client {
        return false;
    }
    match end.code {
        Code::Cancelled => matches!(end.error, Some(RpcError::Cancelled)),
        Code::DeadlineExceeded => !end.trailers && streams(end),
        _ => false,
    }
}

/// Whether the call is taken for a stream (anything but unary) when its
/// deadline ends it: each kind as declared, and where the application
/// declared none of that kind, what the call carried. More than one
/// request is a request stream (none or one says nothing: a unary call
/// still waiting to send counts none). A response message without
/// trailers is a response stream: a unary answer is its message and its
/// trailers back to back, so a unary call ends between the two only if
/// its deadline falls in that gap. A response stream that sent nothing
/// before its deadline (a watch with no news) looks unary unless declared.
fn streams(end: &CallEnd<'_>) -> bool {
    let requests = end.declared.client_streaming.unwrap_or(end.requests > 1);
    let responses = end
        .declared
        .server_streaming
        .unwrap_or(end.responses > 0 && !end.trailers);
    requests || responses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(code: Code, error: Option<&RpcError>) -> CallEnd<'_> {
        CallEnd {
            side: Side::Client,
            code,
            error,
            trailers: false,
            requests: 1,
            responses: 0,
            declared: Declared::default(),
        }
    }

    /// The calls ended by their deadline of each kind's traffic,
    /// undeclared: (requests, responses, taken for a stream).
    const TRAFFIC: [(u32, u32, bool); 7] = [
        (1, 0, false),
        (0, 0, false),
        (1, 1, true),
        (1, 5, true),
        (2, 0, true),
        (0, 3, true),
        (7, 7, true),
    ];

    #[test]
    fn a_drop_before_the_deadline_is_a_cancel_of_any_call() {
        for (requests, responses, _) in TRAFFIC {
            let end = CallEnd {
                requests,
                responses,
                ..end(Code::Cancelled, Some(&RpcError::Cancelled))
            };
            assert!(logs_cancel(&end), "{end:?}");
        }
    }

    #[test]
    fn a_deadline_is_a_cancel_of_a_stream_and_a_trailer_of_a_unary_call() {
        for error in [
            Some(RpcError::Cancelled),
            Some(RpcError::Body {
                direction: crate::stats::Direction::Inbound,
                message: "stream reset".to_owned(),
            }),
            None,
        ] {
            for (requests, responses, stream) in TRAFFIC {
                let end = CallEnd {
                    requests,
                    responses,
                    ..end(Code::DeadlineExceeded, error.as_ref())
                };
                assert_eq!(logs_cancel(&end), stream, "{end:?}");
            }
        }
    }

    #[test]
    fn declared_kinds_decide_over_the_traffic() {
        let deadline = end(Code::DeadlineExceeded, Some(&RpcError::Cancelled));
        let declared = |client_streaming, server_streaming| CallEnd {
            declared: Declared {
                client_streaming,
                server_streaming,
            },
            ..deadline
        };
        // A watch that had no news: one request, no response.
        assert!(!logs_cancel(&deadline), "undeclared, it looks unary");
        assert!(logs_cancel(&declared(None, Some(true))));
        assert!(logs_cancel(&declared(Some(true), None)));
        assert!(logs_cancel(&declared(Some(false), Some(true))));
        assert!(!logs_cancel(&declared(Some(false), Some(false))));
        // Declared unary, whatever it carried.
        let busy = CallEnd {
            requests: 3,
            responses: 3,
            ..declared(Some(false), Some(false))
        };
        assert!(!logs_cancel(&busy));
        // One kind declared, the other read off the traffic.
        let answered = CallEnd {
            responses: 1,
            ..declared(Some(false), None)
        };
        assert!(logs_cancel(&answered));
        let sent = CallEnd {
            requests: 2,
            ..declared(None, Some(false))
        };
        assert!(logs_cancel(&sent));
    }

    #[test]
    fn trailers_from_the_peer_are_logged_as_they_came() {
        for declared in [
            Declared::default(),
            Declared {
                client_streaming: Some(true),
                server_streaming: Some(true),
            },
        ] {
            let end = CallEnd {
                trailers: true,
                responses: 4,
                declared,
                ..end(Code::DeadlineExceeded, None)
            };
            assert!(!logs_cancel(&end), "{end:?}");
        }
    }

    #[test]
    fn other_codes_and_the_server_log_a_trailer() {
        let stream = Declared {
            client_streaming: Some(true),
            server_streaming: Some(true),
        };
        for code in [Code::Ok, Code::Unavailable, Code::Internal, Code::Unknown] {
            let end = CallEnd {
                declared: stream,
                ..end(code, Some(&RpcError::Cancelled))
            };
            assert!(!logs_cancel(&end), "{code:?}");
        }
        let reset = RpcError::Body {
            direction: crate::stats::Direction::Inbound,
            message: "stream reset".to_owned(),
        };
        assert!(
            !logs_cancel(&end(Code::Cancelled, Some(&reset))),
            "the peer's reset before the deadline is its status"
        );
        for code in [Code::Cancelled, Code::DeadlineExceeded] {
            let end = CallEnd {
                side: Side::Server,
                declared: stream,
                ..end(code, Some(&RpcError::Cancelled))
            };
            assert!(!logs_cancel(&end), "server, {code:?}");
        }
    }
}
