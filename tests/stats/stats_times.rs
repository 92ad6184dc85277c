//! Payload times over a real tonic server and client on 127.0.0.1: present
//! when any handler of the layer wants them, absent (no clock read) when
//! every handler opts out with `PAYLOAD_TIMES = false`.

use std::sync::{Arc, Mutex};

use support::{EchoClient, EchoRequest, EchoServer, EchoService};
use tonic::transport::Server;
use tonic_hotpath::stats::{CombinedLayer, RpcEvent, ServerSide, StatsHandler};
use tower::ServiceBuilder;

/// Records, per payload event, whether it carried a time; `TIMES` is its
/// `PAYLOAD_TIMES`.
#[derive(Debug, Default)]
struct PayloadTimes<const TIMES: bool> {
    seen: Mutex<Vec<bool>>,
}

impl<const TIMES: bool> StatsHandler for PayloadTimes<TIMES> {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = TIMES;

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::InPayload(payload) | RpcEvent::OutPayload(payload) = event {
            self.seen.lock().unwrap().push(payload.time.is_some());
        }
    }
}

/// One unary RPC with `server` on the server side and a client layer of
/// `client_handler`; returns once both sides have seen their payloads.
async fn one_rpc<H: StatsHandler, C: StatsHandler>(
    server: CombinedLayer<H, ServerSide>,
    client_handler: Arc<C>,
) {
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        Server::builder()
            .layer(server)
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    let channel = support::connect(addr).await;
    let layered = ServiceBuilder::new()
        .layer(CombinedLayer::client().with(client_handler))
        .service(channel);
    EchoClient::new(layered)
        .unary_echo(EchoRequest {
            message: "hello".to_owned(),
        })
        .await
        .expect("rpc");
}

#[tokio::test]
async fn payload_times_follow_the_handlers_choice() {
    let timed = Arc::new(PayloadTimes::<true>::default());
    let untimed = Arc::new(PayloadTimes::<false>::default());
    let client_timed = Arc::new(PayloadTimes::<true>::default());
    let client_untimed = Arc::new(PayloadTimes::<false>::default());

    // Server: one handler wants times, so both see them. Client: no
    // handler wants them.
    let server = CombinedLayer::server()
        .with(Arc::clone(&untimed))
        .with(Arc::clone(&timed));
    one_rpc(server, Arc::clone(&client_untimed)).await;
    assert_eq!(*timed.seen.lock().unwrap(), [true, true]);
    assert_eq!(*untimed.seen.lock().unwrap(), [true, true]);
    assert_eq!(*client_untimed.seen.lock().unwrap(), [false, false]);

    // The default (a handler that says nothing) gets times.
    let server_untimed = Arc::new(PayloadTimes::<false>::default());
    one_rpc(
        CombinedLayer::server().with(Arc::clone(&server_untimed)),
        Arc::clone(&client_timed),
    )
    .await;
    assert_eq!(*server_untimed.seen.lock().unwrap(), [false, false]);
    assert_eq!(*client_timed.seen.lock().unwrap(), [true, true]);
}
