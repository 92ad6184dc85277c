//! A server and a client, each with a `CombinedLayer` of two handlers (a
//! counter and a logger), printing every RPC and connection event. The
//! service is gRPC's standard health service from `tonic-health`; the
//! server's connections come from `layer.incoming_tcp(..)`, the client's
//! from `layer.connector()`, so both sides see `ConnBegin` / `ConnEnd` and
//! every RPC is linked to its connection.
//!
//! `cargo run --example stats`

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tonic::transport::{Endpoint, Server};
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_hotpath::stats::{
    CombinedLayer, ConnEvent, ConnInfo, RpcEvent, RpcInfo, Side, StatsHandler,
};
use tower::ServiceBuilder;

/// Counts RPCs, messages and bytes.
#[derive(Debug, Default)]
struct Counter {
    rpcs: AtomicU64,
    messages: AtomicU64,
    wire_bytes: AtomicU64,
}

impl StatsHandler for Counter {
    type RpcState = ();
    type ConnState = ();

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        match event {
            RpcEvent::Begin { .. } => {
                self.rpcs.fetch_add(1, Ordering::Relaxed);
            }
            RpcEvent::InPayload(payload) | RpcEvent::OutPayload(payload) => {
                self.messages.fetch_add(1, Ordering::Relaxed);
                self.wire_bytes
                    .fetch_add(payload.wire_length, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

impl Counter {
    fn report(&self, side: &str) {
        println!(
            "{side}: {} rpcs, {} messages, {} bytes on the wire",
            self.rpcs.load(Ordering::Relaxed),
            self.messages.load(Ordering::Relaxed),
            self.wire_bytes.load(Ordering::Relaxed),
        );
    }
}

fn side(side: Side) -> &'static str {
    match side {
        Side::Server => "server",
        Side::Client => "client",
    }
}

fn addr(addr: Option<SocketAddr>) -> String {
    addr.map_or_else(|| "?".to_owned(), |addr| addr.to_string())
}

/// Logs every event. Its connection state is a label with the side, a
/// connection number and the peer; its per-RPC state a label with the
/// method and the RPC's connection.
#[derive(Debug, Default)]
struct Logger {
    next_conn: AtomicU64,
}

impl StatsHandler for Logger {
    type RpcState = String;
    type ConnState = String;

    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&String>) -> String {
        match conn {
            Some(conn) => format!("{} on {conn}", info.method),
            None => format!("{} {} (no connection)", side(info.side), info.method),
        }
    }

    fn handle_rpc(&self, rpc: &mut String, event: &RpcEvent<'_>) {
        match event {
            RpcEvent::InPayload(p) => println!("  [{rpc}] InPayload {} bytes", p.compressed_length),
            RpcEvent::OutPayload(p) => {
                println!("  [{rpc}] OutPayload {} bytes", p.compressed_length)
            }
            RpcEvent::End(end) => println!(
                "  [{rpc}] End {:?} {:?} after {:?}",
                end.code,
                end.message,
                end.end_time - end.begin_time
            ),
            RpcEvent::Begin { .. } => println!("  [{rpc}] Begin"),
            RpcEvent::InHeader(_) => println!("  [{rpc}] InHeader"),
            RpcEvent::OutHeader(_) => println!("  [{rpc}] OutHeader"),
            RpcEvent::InTrailer(_) => println!("  [{rpc}] InTrailer"),
            RpcEvent::OutTrailer(_) => println!("  [{rpc}] OutTrailer"),
            other => println!("  [{rpc}] {other:?}"),
        }
    }

    fn tag_conn(&self, info: &ConnInfo) -> String {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        format!("{} conn {id} to {}", side(info.side), addr(info.peer_addr))
    }

    fn handle_conn(&self, conn: &String, event: &ConnEvent) {
        match event {
            ConnEvent::Begin { .. } => println!("  [{conn}] ConnBegin"),
            ConnEvent::End { .. } => println!("  [{conn}] ConnEnd"),
            other => println!("  [{conn}] {other:?}"),
        }
    }
}

/// Starts the health service on 127.0.0.1 behind a server layer.
async fn serve(counter: &Arc<Counter>) -> std::io::Result<SocketAddr> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("demo.Greeter", ServingStatus::Serving)
        .await;

    let layer = CombinedLayer::server()
        .with(Arc::clone(counter))
        .with(Logger::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    // Connection events from the layer's own handlers, TCP_NODELAY on.
    let incoming = layer.incoming_tcp(listener);
    tokio::spawn(async move {
        let _reporter = reporter; // keeps the statuses alive
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(incoming)
            .await
    });
    Ok(addr)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server_counter = Arc::new(Counter::default());
    let client_counter = Arc::new(Counter::default());
    let addr = serve(&server_counter).await?;

    // Client: the layer's connector makes the channel's connections (so
    // RPCs are linked to them), the layer wraps the channel.
    let layer = CombinedLayer::client()
        .with(Arc::clone(&client_counter))
        .with(Logger::default());
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .connect_with_connector(layer.connector())
        .await?;
    let mut client = HealthClient::new(ServiceBuilder::new().layer(layer).service(channel));

    println!("unary, serving:");
    let reply = client
        .check(HealthCheckRequest {
            service: "demo.Greeter".into(),
        })
        .await?;
    println!("  -> {:?}", reply.into_inner().status());

    println!("unary, unknown service (NotFound):");
    let status = client
        .check(HealthCheckRequest {
            service: "demo.Unknown".into(),
        })
        .await
        .expect_err("unknown service");
    println!("  -> {:?}", status.code());

    println!("server streaming, first update then cancelled:");
    let mut updates = client
        .watch(HealthCheckRequest {
            service: "demo.Greeter".into(),
        })
        .await?
        .into_inner();
    if let Some(update) = updates.message().await? {
        println!("  -> {:?}", update.status());
    }
    drop(updates);

    drop(client);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    server_counter.report("server");
    client_counter.report("client");
    Ok(())
}
