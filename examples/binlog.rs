//! Binary logging (gRFC A16): a server and a client, both logging to one
//! file in grpc-go's format, make three calls (a unary call, a failing
//! one, a stream read once then cancelled); then the log is read back and
//! printed, one entry per line. The filter comes from
//! `GRPC_BINARY_LOG_FILTER` when it is set (try `'*{h:64;m:4}'` or
//! `'-grpc.health.v1.Health/Watch,*'`), else every call is logged.
//!
//! `cargo run --example binlog --features binlog`

use std::net::SocketAddr;

use tonic::transport::{Endpoint, Server};
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_hotpath::binlog::proto::GrpcLogEntry;
use tonic_hotpath::binlog::proto::grpc_log_entry::{EventType, Logger, Payload};
use tonic_hotpath::binlog::{BinaryLog, FileSink, Filter, Framing, read_log};
use tonic_hotpath::stats::CombinedLayer;
use tower::ServiceBuilder;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let filter = Filter::from_env()?.unwrap_or_else(Filter::all);
    let path = std::env::temp_dir().join(format!("binlog-example-{}.bin", std::process::id()));
    let log = BinaryLog::builder(filter, FileSink::create(&path, Framing::Grpc)?).build()?;

    // The server: the health service behind a layer with the log.
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("demo.Greeter", ServingStatus::Serving)
        .await;
    let layer = CombinedLayer::server().with(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr: SocketAddr = listener.local_addr()?;
    let incoming = layer.incoming_tcp(listener);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming_shutdown(incoming, async {
                stopped.await.ok();
            }),
    );

    // The client: the same log (entries say which side wrote them); the
    // layer's connector tells it the server's address and authority.
    let layer = CombinedLayer::client().with(log.clone());
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .connect_with_connector(layer.connector())
        .await?;
    let mut client = HealthClient::new(ServiceBuilder::new().layer(layer).service(channel));
    let greeter = || HealthCheckRequest {
        service: "demo.Greeter".into(),
    };
    client.check(greeter()).await?;
    let unknown = HealthCheckRequest {
        service: "demo.Unknown".into(),
    };
    client.check(unknown).await.expect_err("not found");
    let mut updates = client.watch(greeter()).await?.into_inner();
    updates.message().await?;
    drop(updates);
    drop(client);

    // A clean stop: the server ends its calls, the log writes them all.
    stop.send(()).ok();
    server.await??;
    log.shutdown()?;
    println!("{:?}, in {}:", log.counts(), path.display());
    for entry in read_log(&path, Framing::Grpc)? {
        println!("{}", describe(&entry));
    }
    std::fs::remove_file(&path)?;
    Ok(())
}

/// One entry on one line.
fn describe(entry: &GrpcLogEntry) -> String {
    let side = match entry.logger() {
        Logger::Client => "client",
        Logger::Server => "server",
        Logger::Unknown => "?",
    };
    let kind = entry
        .r#type()
        .as_str_name()
        .trim_start_matches("EVENT_TYPE_");
    let mut line = format!(
        "call {:>2} {side} #{} {kind}",
        entry.call_id, entry.sequence_id_within_call
    );
    let metadata = |metadata: &Option<tonic_hotpath::binlog::proto::Metadata>| {
        let entries = metadata.iter().flat_map(|m| &m.entry);
        let entries: Vec<String> = entries
            .map(|e| format!("{}={}", e.key, String::from_utf8_lossy(&e.value)))
            .collect();
        format!("[{}]", entries.join(", "))
    };
    match &entry.payload {
        Some(Payload::ClientHeader(header)) => {
            line += &format!(
                " {} authority={} metadata={}",
                header.method_name,
                header.authority,
                metadata(&header.metadata)
            );
        }
        Some(Payload::ServerHeader(header)) => {
            line += &format!(" metadata={}", metadata(&header.metadata));
        }
        Some(Payload::Message(message)) => {
            line += &format!(" {} bytes: {:?}", message.length, message.data);
        }
        Some(Payload::Trailer(trailer)) => {
            let code = tonic::Code::from(trailer.status_code as i32);
            line += &format!(" {code:?} {:?}", trailer.status_message);
        }
        None => {}
    }
    if let Some(peer) = &entry.peer {
        line += &format!(" peer={}:{}", peer.address, peer.ip_port);
    }
    if entry.payload_truncated {
        line += " (truncated)";
    }
    if entry.r#type() == EventType::Cancel {
        line += " (the client cancelled)";
    }
    line
}
