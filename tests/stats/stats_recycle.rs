//! Over a real tonic server and client on 127.0.0.1: per-RPC records are
//! recycled without carrying any handler state from one RPC into the next,
//! and a service behind `StatsIncoming` still sees its peer's address.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use support::{EchoClient, EchoRequest, EchoServer, EchoService};
use tonic::transport::Server;
use tonic::{Code, Request};
use tonic_hotpath::stats::{CombinedLayer, RpcEvent, RpcInfo, StatsHandler};
use tower::ServiceBuilder;

/// Per-RPC state that counts the events it saw and remembers which RPC
/// it was created for.
#[derive(Debug, Default)]
struct Tally {
    rpc: Option<u64>,
    events: u64,
    bytes: Vec<u32>,
}

/// Records, at each `End`, what the RPC's own state had accumulated.
#[derive(Debug, Default)]
struct Tallies {
    tagged: AtomicU64,
    ends: Mutex<Vec<Tally>>,
}

impl StatsHandler for Tallies {
    type RpcState = Tally;
    type ConnState = ();

    fn tag_rpc(&self, _info: &RpcInfo<'_>, _conn: Option<&()>) -> Tally {
        Tally {
            rpc: Some(self.tagged.fetch_add(1, Ordering::Relaxed)),
            ..Tally::default()
        }
    }

    fn handle_rpc(&self, tally: &mut Tally, event: &RpcEvent<'_>) {
        tally.events += 1;
        if let RpcEvent::InPayload(payload) | RpcEvent::OutPayload(payload) = event {
            tally.bytes.push(payload.length.expect("sent uncompressed"));
        }
        if let RpcEvent::End(end) = event {
            assert_eq!(end.code, Code::Ok);
            self.ends.lock().unwrap().push(std::mem::take(tally));
        }
    }
}

const RPCS: u64 = 300;

#[tokio::test]
async fn recycled_records_start_every_rpc_with_fresh_handler_state() {
    let server_tallies = Arc::new(Tallies::default());
    let client_tallies = Arc::new(Tallies::default());
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        Server::builder()
            // Two handlers: each one's state must be fresh.
            .layer(
                CombinedLayer::server()
                    .with(Arc::clone(&server_tallies))
                    .with(Arc::clone(&server_tallies)),
            )
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    let channel = support::connect(addr).await;
    let layered = ServiceBuilder::new()
        .layer(CombinedLayer::client().with(Arc::clone(&client_tallies)))
        .service(channel);
    let client = EchoClient::new(layered);
    for i in 0..RPCS {
        // Messages of varying length: a leftover state would show.
        let message = "x".repeat((i % 7) as usize);
        let reply = client
            .clone()
            .unary_echo(EchoRequest { message })
            .await
            .expect("rpc");
        assert_eq!(reply.into_inner().message.len() as u64, i % 7);
    }
    // The server's `End` follows its trailers, which the client may see
    // first: wait until all are in.
    support::wait_until("the server's ends", || {
        server_tallies.ends.lock().unwrap().len() as u64 == 2 * RPCS
    })
    .await;
    for (tallies, handlers) in [(&server_tallies, 2), (&client_tallies, 1)] {
        let ends = tallies.ends.lock().unwrap();
        assert_eq!(ends.len() as u64, handlers * RPCS);
        assert_eq!(tallies.tagged.load(Ordering::Relaxed), handlers * RPCS);
        let mut rpcs: Vec<u64> = ends
            .iter()
            .map(|tally| tally.rpc.expect("tagged"))
            .collect();
        rpcs.sort_unstable();
        rpcs.dedup();
        assert_eq!(rpcs.len() as u64, handlers * RPCS, "one state per tag");
        for (i, Tally { events, bytes, .. }) in ends.iter().enumerate() {
            // Begin, request headers, 1 request payload, response headers,
            // 1 response payload, trailers, End: 7, on each side.
            assert_eq!(*events, 7, "end #{i} saw {events} events");
            let rpc = i as u64 / handlers;
            let length = u32::from(!rpc.is_multiple_of(7)) * (2 + (rpc % 7) as u32);
            assert_eq!(bytes, &[length, length], "end #{i}");
        }
    }
}

#[tokio::test]
async fn remote_addr_works_behind_stats_incoming() {
    let layer = CombinedLayer::server().with(Tallies::default());
    let (addr, incoming) = support::bind().await;
    let incoming = layer.incoming(incoming);
    // What a service behind the stats layer sees as `tonic::Request`.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_by_service = Arc::clone(&seen);
    let look = move |request: Request<()>| {
        let addrs = (request.remote_addr(), request.local_addr());
        seen_by_service.lock().unwrap().push(addrs);
        Ok(request)
    };
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .layer(tonic::service::InterceptorLayer::new(look))
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    // A client whose local address is known, to compare with what the
    // server reports as its peer.
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let client_addr = stream.local_addr().expect("client address");
    let stream = Mutex::new(Some(stream));
    let connector = tower::service_fn(move |_: http::Uri| {
        let stream = stream.lock().unwrap().take();
        async move {
            let stream = stream.ok_or_else(|| std::io::Error::other("one connection only"))?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    let channel = support::endpoint(addr)
        .connect_with_connector(connector)
        .await
        .expect("channel");
    EchoClient::new(channel)
        .unary_echo(EchoRequest::default())
        .await
        .expect("rpc");
    assert_eq!(*seen.lock().unwrap(), [(Some(client_addr), Some(addr))]);
}
