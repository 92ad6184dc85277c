//! Every path into `End`, driven through a record as the layer's future
//! and bodies drive it: the events delivered, exactly one `End`, and its
//! status.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, StatusCode};
use tonic::Code;

use super::RpcRecorder;
use crate::stats::StatsHandler;
use crate::stats::event::{Direction, Payload, RpcError, RpcEvent, RpcInfo, Side};
use crate::stats::frame::FrameError;
use crate::stats::layer::ending::Ending;
use crate::stats::layer::service_core::ServiceCore;

/// Logs every event's name; `End` with its code, message and error.
#[derive(Debug, Default)]
struct Log(Mutex<Vec<String>>);

impl StatsHandler for Log {
    type RpcState = ();
    type ConnState = ();

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        let line = match event {
            RpcEvent::Begin { .. } => "Begin".to_owned(),
            RpcEvent::InHeader(_) => "InHeader".to_owned(),
            RpcEvent::OutHeader(_) => "OutHeader".to_owned(),
            RpcEvent::InPayload(_) => "InPayload".to_owned(),
            RpcEvent::OutPayload(_) => "OutPayload".to_owned(),
            RpcEvent::HalfClose { .. } => "HalfClose".to_owned(),
            RpcEvent::InTrailer(_) => "InTrailer".to_owned(),
            RpcEvent::OutTrailer(_) => "OutTrailer".to_owned(),
            RpcEvent::End(end) => format!("End {:?} {:?} {:?}", end.code, end.message, end.error),
        };
        self.0.lock().unwrap().push(line);
    }
}

/// One RPC on `side`, begun with `request_headers`.
struct Rpc {
    log: Arc<Log>,
    record: Arc<RpcRecorder<Log>>,
    /// The number of events delivered as the RPC began.
    begun: usize,
}

impl Rpc {
    fn begin(side: Side, mut request_headers: HeaderMap) -> Self {
        let log = Arc::new(Log::default());
        let core = Arc::new(ServiceCore::new(Arc::clone(&log), u32::MAX, None));
        let info = RpcInfo::new(side, "/pkg.Service/Method");
        let (record, _) = RpcRecorder::begin(&core, &info, None, &mut request_headers);
        let begun = log.0.lock().unwrap().len();
        Self { log, record, begun }
    }

    fn server() -> Self {
        Self::begin(Side::Server, HeaderMap::new())
    }

    fn client() -> Self {
        Self::begin(Side::Client, HeaderMap::new())
    }

    /// The events after `Begin` and the request headers.
    fn events(&self) -> Vec<String> {
        self.log.0.lock().unwrap()[self.begun..].to_vec()
    }

    /// The `End` lines delivered.
    fn ends(&self) -> Vec<String> {
        let log = self.log.0.lock().unwrap();
        log.iter()
            .filter(|line| line.starts_with("End"))
            .cloned()
            .collect()
    }

    fn with(&self, f: impl FnOnce(&mut super::RpcEvents<'_, Log>)) {
        self.record.locked(f);
    }
}

fn grpc_status(code: Code, message: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("grpc-status", HeaderValue::from(code as i32));
    if !message.is_empty() {
        headers.insert("grpc-message", HeaderValue::from_str(message).unwrap());
    }
    headers
}

fn end(code: Code, message: &str, error: Option<RpcError>) -> String {
    format!("End {code:?} {message:?} {error:?}")
}

fn message() -> Payload<'static> {
    Payload::uncompressed(3)
}

fn reset() -> RpcError {
    RpcError::Body {
        direction: Direction::Inbound,
        message: "stream no longer needed".to_owned(),
    }
}

#[test]
fn trailers_end_the_rpc_with_their_status() {
    let rpc = Rpc::server();
    rpc.with(|rpc| {
        rpc.response_headers(StatusCode::OK, &HeaderMap::new(), false);
        rpc.payload(Direction::Outbound, message());
        rpc.response_trailers(&grpc_status(Code::NotFound, "no such thing"), None);
    });
    assert_eq!(
        rpc.events(),
        [
            "OutHeader",
            "OutPayload",
            "OutTrailer",
            &end(Code::NotFound, "no such thing", None)
        ]
    );
}

#[test]
fn a_trailers_only_response_is_its_trailers_and_end() {
    for (rpc, trailer) in [(Rpc::server(), "OutTrailer"), (Rpc::client(), "InTrailer")] {
        rpc.with(|rpc| {
            rpc.response_headers(
                StatusCode::OK,
                &grpc_status(Code::Unauthenticated, "who"),
                true,
            );
        });
        assert_eq!(
            rpc.events(),
            [trailer, &end(Code::Unauthenticated, "who", None)]
        );
    }
}

#[test]
fn a_reset_on_the_server_ends_cancelled_and_silences_what_follows() {
    let rpc = Rpc::server();
    rpc.with(|rpc| {
        rpc.response_headers(StatusCode::OK, &HeaderMap::new(), false);
        // The request body fails: the client reset the stream.
        rpc.record_error(reset(), Some(Code::Cancelled));
        rpc.payload(Direction::Outbound, message());
        rpc.payload(Direction::Inbound, message());
        rpc.response_trailers(&grpc_status(Code::Ok, ""), None);
    });
    assert_eq!(
        rpc.events(),
        [
            "OutHeader",
            "InPayload",
            &end(Code::Cancelled, "", Some(reset()))
        ],
        "no outbound event after the reset; its status is kept"
    );
}

#[test]
fn a_drop_before_any_status_is_cancelled() {
    let rpc = Rpc::client();
    rpc.with(|rpc| rpc.end(Ending::Dropped));
    assert_eq!(
        rpc.events(),
        [end(Code::Cancelled, "", Some(RpcError::Cancelled))]
    );
}

#[test]
fn a_drop_after_a_status_keeps_it() {
    // The client's decoder refused a message: its status is what the
    // caller saw, whatever the rest of the response.
    let rpc = Rpc::client();
    let too_long = RpcError::Frame {
        direction: Direction::Inbound,
        error: FrameError::TooLong {
            length: 10,
            limit: 5,
        },
    };
    rpc.with(|rpc| {
        rpc.response_headers(StatusCode::OK, &HeaderMap::new(), false);
        rpc.record_body_error(Direction::Inbound, too_long.clone());
        rpc.end(Ending::Dropped);
    });
    let code = too_long.receiver_code().unwrap();
    assert_eq!(rpc.events(), ["InHeader", &end(code, "", Some(too_long))]);
}

#[test]
fn a_body_error_ends_with_its_code() {
    let rpc = Rpc::client();
    let broken = RpcError::Body {
        direction: Direction::Inbound,
        message: "connection reset".to_owned(),
    };
    rpc.with(|rpc| {
        rpc.response_headers(StatusCode::OK, &HeaderMap::new(), false);
        rpc.end(Ending::Failed {
            code: Code::Unavailable,
            message: "".into(),
            error: broken.clone(),
        });
    });
    assert_eq!(
        rpc.events(),
        ["InHeader", &end(Code::Unavailable, "", Some(broken))]
    );
}

#[test]
fn a_body_cut_inside_a_message_is_internal_over_an_ok_status() {
    let rpc = Rpc::client();
    let cut = RpcError::Frame {
        direction: Direction::Inbound,
        error: FrameError::Truncated { missing: 4 },
    };
    rpc.with(|rpc| {
        rpc.response_headers(StatusCode::OK, &HeaderMap::new(), false);
        rpc.response_trailers(&grpc_status(Code::Ok, ""), Some(cut.clone()));
    });
    assert_eq!(
        rpc.events(),
        ["InHeader", "InTrailer", &end(Code::Internal, "", Some(cut))]
    );
}

#[test]
fn a_bare_http_status_maps_to_the_code_tonic_hands_the_caller() {
    let rpc = Rpc::client();
    rpc.with(|rpc| rpc.response_headers(StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new(), true));
    let ends = rpc.ends();
    assert_eq!(ends.len(), 1);
    assert!(
        ends[0].starts_with(
            "End Unavailable \"grpc-status header missing, mapped from HTTP status code 503\""
        ),
        "{ends:?}"
    );
    assert!(
        ends[0].ends_with("Some(MissingStatus { http_status: 503 })"),
        "{ends:?}"
    );
}

#[test]
fn a_response_without_trailers_has_a_missing_status() {
    let rpc = Rpc::client();
    rpc.with(|rpc| {
        rpc.response_headers(StatusCode::OK, &HeaderMap::new(), false);
        rpc.end(Ending::Complete { truncated: false });
    });
    let ends = rpc.ends();
    assert!(ends[0].starts_with("End Unknown"), "{ends:?}");
    assert!(
        ends[0].ends_with("Some(MissingStatus { http_status: 200 })"),
        "{ends:?}"
    );
}

#[test]
fn a_service_error_ends_with_the_status_the_server_sends() {
    let rpc = Rpc::server();
    let error = RpcError::Service {
        message: "overloaded".to_owned(),
    };
    rpc.with(|rpc| {
        rpc.end(Ending::Failed {
            code: Code::ResourceExhausted,
            message: "Too many active requests for the connection".into(),
            error: error.clone(),
        });
    });
    assert_eq!(
        rpc.events(),
        [end(
            Code::ResourceExhausted,
            "Too many active requests for the connection",
            Some(error)
        )]
    );
}

#[test]
fn a_refused_encoding_is_unimplemented() {
    let rpc = Rpc::client();
    rpc.with(|rpc| rpc.refuse_encoding(b"br"));
    let ends = rpc.ends();
    assert_eq!(ends.len(), 1);
    assert!(
        ends[0].starts_with("End Unimplemented \"Content is compressed with `br`"),
        "{ends:?}"
    );
}

#[test]
fn a_cancel_past_the_deadline_is_deadline_exceeded() {
    let mut headers = HeaderMap::new();
    headers.insert("grpc-timeout", HeaderValue::from_static("1n"));
    let rpc = Rpc::begin(Side::Client, headers);
    // The deadline is at most 1 ns after now: wait until it has passed.
    let passed = Instant::now() + Duration::from_nanos(1);
    while Instant::now() <= passed {
        std::hint::spin_loop();
    }
    rpc.with(|rpc| rpc.end(Ending::Dropped));
    assert_eq!(
        rpc.events(),
        [end(Code::DeadlineExceeded, "", Some(RpcError::Cancelled))]
    );
}

#[test]
fn a_cancel_before_the_deadline_stays_cancelled() {
    let mut headers = HeaderMap::new();
    headers.insert("grpc-timeout", HeaderValue::from_static("1H"));
    let rpc = Rpc::begin(Side::Client, headers);
    rpc.with(|rpc| rpc.end(Ending::Dropped));
    assert_eq!(
        rpc.events(),
        [end(Code::Cancelled, "", Some(RpcError::Cancelled))]
    );
}

#[test]
fn nothing_is_delivered_after_end() {
    let rpc = Rpc::server();
    rpc.with(|rpc| {
        rpc.response_trailers(&grpc_status(Code::Ok, ""), None);
        rpc.payload(Direction::Inbound, message());
        rpc.half_close();
        rpc.record_error(reset(), Some(Code::Cancelled));
        rpc.response_trailers(&grpc_status(Code::Internal, "late"), None);
        rpc.end(Ending::Dropped);
        rpc.end(Ending::Complete { truncated: false });
    });
    assert_eq!(rpc.events(), ["OutTrailer", &end(Code::Ok, "", None)]);
}

#[test]
fn an_idle_record_starts_its_next_rpc_open() {
    let rpc = Rpc::server();
    rpc.with(|rpc| rpc.record_error(reset(), Some(Code::Cancelled)));
    let mut record = Arc::clone(&rpc.record);
    drop(rpc.record);
    Arc::get_mut(&mut record).unwrap().reset();
    record.locked(|rpc| rpc.response_trailers(&grpc_status(Code::Ok, ""), None));
    let log = rpc.log.0.lock().unwrap();
    assert_eq!(
        log.last().unwrap(),
        &end(Code::Ok, "", None),
        "no status or error left from the last RPC"
    );
}
