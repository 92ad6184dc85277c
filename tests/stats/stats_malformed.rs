//! Malformed gRPC framing through tonic's real server stack (`Routes` +
//! `CombinedLayer`, the request body a real `tonic::body::Body`) is
//! recorded in `End::error`, never a panic, and `End` still comes once.

use support::stats_harness;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use stats_harness::{call_in_process, unary_body, unary_request};
use support::{EchoServer, EchoService};
use tonic::Code;
use tonic::service::Routes;
use tonic_hotpath::stats::frame::FrameError;
use tonic_hotpath::stats::{
    CombinedLayer, Direction, RpcError, RpcEvent, ServerSide, StatsHandler,
};
use tower::Layer;

/// Records each `End`'s code and error.
#[derive(Debug, Default)]
struct Ends(Mutex<Vec<(Code, Option<RpcError>)>>);

impl StatsHandler for Ends {
    type RpcState = ();
    type ConnState = ();

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::End(end) = event {
            let record = (end.code, end.error.cloned());
            self.0.lock().unwrap().push(record);
        }
    }
}

/// Sends `body` as a unary request through `layer` + the echo routes and
/// returns the one recorded `End`, and the gRPC status in the response.
async fn send(
    layer: CombinedLayer<Arc<Ends>, ServerSide>,
    body: &[u8],
) -> ((Code, Option<RpcError>), Option<i32>) {
    let ends = Arc::clone(layer.handler());
    let service = layer.layer(Routes::new(EchoServer::new(EchoService)));
    let status = call_in_process(&service, unary_request(&Bytes::copy_from_slice(body))).await;
    let recorded = ends.0.lock().unwrap().clone();
    assert_eq!(recorded.len(), 1, "exactly one End: {recorded:?}");
    (recorded[0].clone(), status)
}

fn layer() -> (Arc<Ends>, CombinedLayer<Arc<Ends>, ServerSide>) {
    let ends = Arc::new(Ends::default());
    (Arc::clone(&ends), CombinedLayer::server().with(ends))
}

#[tokio::test]
async fn bad_compressed_flag_is_recorded() {
    let (_, layer) = layer();
    let ((code, error), status) = send(layer, &[2, 0, 0, 0, 0]).await;
    // tonic rejects the flag too; its status is the RPC's.
    assert_eq!(status, Some(Code::Internal as i32));
    assert_eq!(code, Code::Internal);
    assert_eq!(
        error,
        Some(RpcError::Frame {
            direction: Direction::Inbound,
            error: FrameError::BadFlag(2)
        })
    );
}

#[tokio::test]
async fn truncated_request_is_recorded() {
    let (_, layer) = layer();
    let ((code, error), status) = send(layer, &[0, 0, 0, 0, 10, 1, 2, 3]).await;
    assert_ne!(status, Some(0));
    assert_ne!(code, Code::Ok);
    assert_eq!(
        error,
        Some(RpcError::Frame {
            direction: Direction::Inbound,
            error: FrameError::Truncated { missing: 7 }
        })
    );
    let message = error.unwrap().to_string();
    assert_eq!(
        message,
        "inbound body: grpc frame: stream ended inside a message (7 bytes missing)"
    );
}

#[tokio::test]
async fn message_over_the_configured_limit_is_recorded() {
    let (_, layer) = layer();
    let body = unary_body("hello");
    let ((code, error), status) = send(layer.max_message_len(3), &body).await;
    // The layer observes, it does not enforce: the RPC itself succeeds.
    assert_eq!(status, Some(0));
    assert_eq!(code, Code::Ok);
    assert_eq!(
        error,
        Some(RpcError::Frame {
            direction: Direction::Inbound,
            error: FrameError::TooLong {
                length: 7,
                limit: 3
            }
        })
    );
}

#[tokio::test]
async fn well_formed_request_has_no_error() {
    let (_, layer) = layer();
    let ((code, error), status) = send(layer, &unary_body("fine")).await;
    assert_eq!((code, error, status), (Code::Ok, None, Some(0)));
}
