//! The stats layer (`CombinedLayer`) on a server and on a client, fed what
//! a peer controls: the request's or response's headers (`grpc-timeout`,
//! `grpc-encoding`, `grpc-accept-encoding`, `grpc-status`, `grpc-message`,
//! `content-type`), its body in arbitrary chunks (any framing, compressed
//! or not), and its trailers. A handler asking for everything (sizes,
//! message bytes, half-close) sees one `Begin` first and one `End` last,
//! payloads whose sizes add up, and on the server one `InPayload` per
//! whole uncompressed message the request carries.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, Request, Response};
use http_body_util::BodyExt;
use tonic_hotpath::stats::frame::FrameHeader;
use tonic_hotpath::stats::{CombinedLayer, Payload, RpcEvent, StatsHandler};
use tower::{Layer, Service};

use super::body::{Chunks, now};
use super::input::{Input, headers, split};

const PREFIX_LEN: usize = FrameHeader::PREFIX_LEN;

const NAMES: [&str; 8] = [
    "grpc-timeout",
    "grpc-encoding",
    "grpc-accept-encoding",
    "grpc-status",
    "grpc-message",
    "content-type",
    "x-user-bin",
    "grpc-status-details-bin",
];

/// What the handler saw, in order.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    InHeader,
    Begin,
    InPayload(Sizes),
    OutPayload(Sizes),
    HalfClose,
    Other,
    End,
}

#[derive(Debug, Clone, PartialEq)]
struct Sizes {
    length: Option<u32>,
    compressed_length: u32,
    wire_length: u64,
    compressed: bool,
    data: Option<usize>,
}

impl Sizes {
    fn of(payload: &Payload<'_>) -> Self {
        Self {
            length: payload.length,
            compressed_length: payload.compressed_length,
            wire_length: payload.wire_length,
            compressed: payload.compressed,
            data: payload.data.map(|data| data.len()),
        }
    }
}

/// Records every event; asks for every optional measurement.
#[derive(Debug, Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

impl StatsHandler for Recorder {
    type RpcState = ();
    type ConnState = ();
    const UNCOMPRESSED_SIZES: bool = true;
    const MESSAGE_DATA: bool = true;
    const HALF_CLOSE: bool = true;

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        let seen = match event {
            RpcEvent::Begin { .. } => Seen::Begin,
            RpcEvent::InHeader(_) => Seen::InHeader,
            RpcEvent::InPayload(payload) => Seen::InPayload(Sizes::of(payload)),
            RpcEvent::OutPayload(payload) => Seen::OutPayload(Sizes::of(payload)),
            RpcEvent::HalfClose { .. } => Seen::HalfClose,
            RpcEvent::End(_) => Seen::End,
            _ => Seen::Other,
        };
        self.0.lock().unwrap().push(seen);
    }
}

/// Whole messages at the start of `wire` (up to a bad or cut one) and
/// whether any is compressed.
fn whole_messages(wire: &[u8]) -> (usize, bool) {
    let (mut count, mut compressed, mut at) = (0, false, 0);
    while let Some(prefix) = wire
        .get(at..)
        .and_then(|rest| rest.first_chunk::<PREFIX_LEN>())
    {
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        if prefix[0] > 1 || len > 4 << 20 || wire.len() - at - PREFIX_LEN < len {
            break;
        }
        compressed |= prefix[0] == 1;
        count += 1;
        at += PREFIX_LEN + len;
    }
    (count, compressed)
}

/// A message of the exchange: its headers, chunks and trailers.
struct Message<'a> {
    headers: HeaderMap,
    chunks: Vec<&'a [u8]>,
    wire: &'a [u8],
    trailers: HeaderMap,
}

fn message<'a>(input: &mut Input<'a>) -> Message<'a> {
    let mut header_input = Input::new(input.until(0xfe));
    let first = headers(&mut header_input, &NAMES, 16);
    let mut trailer_input = Input::new(input.until(0xfe));
    let trailers = headers(&mut trailer_input, &NAMES, 8);
    let sizes = input.until(0xff);
    let wire = input.until(0xfd);
    Message {
        headers: first,
        chunks: split(wire, sizes),
        wire,
        trailers,
    }
}

/// The events are one `Begin` (after the request headers on a server,
/// as grpc-go's), then one `End` last; every payload's sizes add up.
fn check_events(seen: &[Seen], client: bool) {
    let begin = match client {
        true => seen.first(),
        false => {
            assert_eq!(seen.first(), Some(&Seen::InHeader), "{seen:?}");
            seen.get(1)
        }
    };
    assert_eq!(begin, Some(&Seen::Begin), "{seen:?}");
    assert!(
        seen.iter().filter(|s| **s == Seen::InHeader).count() <= 1,
        "{seen:?}"
    );
    assert_eq!(seen.last(), Some(&Seen::End), "{seen:?}");
    assert_eq!(
        seen.iter().filter(|s| **s == Seen::Begin).count(),
        1,
        "{seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|s| **s == Seen::End).count(),
        1,
        "{seen:?}"
    );
    assert!(
        seen.iter().filter(|s| **s == Seen::HalfClose).count() <= 1,
        "{seen:?}"
    );
    for sizes in seen.iter().filter_map(|s| match s {
        Seen::InPayload(sizes) | Seen::OutPayload(sizes) => Some(sizes),
        _ => None,
    }) {
        assert_eq!(
            sizes.wire_length,
            u64::from(sizes.compressed_length) + PREFIX_LEN as u64
        );
        if !sizes.compressed {
            assert_eq!(sizes.length, Some(sizes.compressed_length), "{sizes:?}");
        }
        if let (Some(data), Some(length)) = (sizes.data, sizes.length) {
            assert_eq!(data, length as usize, "message bytes: {sizes:?}");
        }
    }
}

fn response(answer: Message<'_>) -> Response<Chunks> {
    let mut response =
        Response::new(Chunks::new(answer.chunks.iter().copied()).with_trailers(answer.trailers));
    *response.headers_mut() = answer.headers;
    response
}

/// Calls `service` and reads the response body to its end (what fails is
/// the layer's to record, not this check's).
fn drive<S, B>(mut service: S, request: Request<Chunks>)
where
    S: Service<Request<Chunks>, Response = Response<B>>,
    B: http_body::Body,
{
    if let Ok(response) = now(service.call(request)) {
        let _ = now(response.into_body().collect());
    }
}

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let client = input.byte() & 1 == 1;
    let request = message(&mut input);
    let answer = message(&mut input);
    let recorder = Recorder::default();
    let (in_count, in_compressed) = whole_messages(request.wire);
    let mut http_request = Request::post("http://fuzz/hotpath.echo.Echo/Echo")
        .body(Chunks::new(request.chunks.iter().copied()))
        .unwrap();
    *http_request.headers_mut() = request.headers;
    http_request.headers_mut().insert(
        "content-type",
        http::HeaderValue::from_static("application/grpc"),
    );
    let answer = Mutex::new(Some(answer));
    let answer = &answer;

    if client {
        drive(
            CombinedLayer::client()
                .with(recorder.clone())
                .layer(tower::service_fn(
                    move |request: Request<tonic::body::Body>| async move {
                        let _ = request.into_body().collect().await;
                        Ok::<_, tower::BoxError>(response(answer.lock().unwrap().take().unwrap()))
                    },
                )),
            http_request,
        );
    } else {
        drive(
            CombinedLayer::server()
                .with(recorder.clone())
                .layer(tower::service_fn(move |request: Request<_>| async move {
                    let _ = BodyExt::collect(request.into_body()).await;
                    Ok::<_, Infallible>(response(answer.lock().unwrap().take().unwrap()))
                })),
            http_request,
        );
    }
    let seen = recorder.0.lock().unwrap().clone();
    check_events(&seen, client);
    if !client && !in_compressed {
        let received = seen
            .iter()
            .filter(|s| matches!(s, Seen::InPayload(_)))
            .count();
        assert_eq!(received, in_count, "{seen:?}");
    }
}
