//! channelz on a real server and client: the standard health service
//! behind a stats layer with channelz's `ServerEntry`, a client channel
//! with a `ChannelEntry` making calls (some failing), and the admin
//! services (channelz, reflection, health) on a port of their own. Then it
//! asks channelz what it saw, as any gRPC tool would, and prints it.
//! Exits non-zero if channelz's counts differ from the calls made.
//!
//! Run: `cargo run --example channelz`. With `CHANNELZ_SERVE_SECS=60` it
//! keeps serving afterwards, for grpcurl or grpc-go's channelz client:
//! `grpcurl -plaintext ADMIN_ADDR list`.

use std::time::Duration;

use tokio::net::TcpListener;
use tonic::transport::{Channel, Endpoint, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_hotpath::channelz::proto::channelz_client::ChannelzClient;
use tonic_hotpath::channelz::{Admin, ChannelEntry, HealthReporter, ServerEntry, proto};
use tonic_hotpath::stats::CombinedLayer;

const OK_CALLS: i64 = 20;
const FAILED_CALLS: i64 = 5;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The application's server: health, behind the stats layer.
    let server_channelz = ServerEntry::named("health-server");
    let server_id = server_channelz.id();
    let layer = CombinedLayer::server().with(server_channelz);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (_health, health_service) = tonic_health::server::health_reporter();
    tokio::spawn(
        Server::builder()
            .layer(layer.clone())
            .add_service(health_service)
            .serve_with_incoming(layer.incoming_tcp(listener)),
    );

    // The admin services, on their own port (their calls are not the
    // application's).
    let admin_listener = TcpListener::bind("127.0.0.1:0").await?;
    let admin_addr = admin_listener.local_addr()?;
    let admin = Admin::new()
        .with_health(HealthReporter::new())
        .into_routes()?;
    tokio::spawn(
        Server::builder()
            .add_routes(admin)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(admin_listener)),
    );

    // A client channel, registered under its target.
    let target = format!("http://{addr}");
    let client_layer = CombinedLayer::client().with(ChannelEntry::new(&target));
    let channel = Endpoint::from_shared(target)?
        .connect_with_connector(client_layer.connector())
        .await?;
    let channel = tower::ServiceBuilder::new()
        .layer(client_layer)
        .service(channel);
    let mut health = HealthClient::new(channel);
    for _ in 0..OK_CALLS {
        health.check(HealthCheckRequest::default()).await?;
    }
    for _ in 0..FAILED_CALLS {
        let unknown = HealthCheckRequest {
            service: "no.such.Service".to_owned(),
        };
        let status = health.check(unknown).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound);
    }

    // What channelz saw, asked over gRPC.
    let admin_channel = Endpoint::from_shared(format!("http://{admin_addr}"))?
        .connect()
        .await?;
    let mut channelz = ChannelzClient::new(admin_channel);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let ok = report(&mut channelz, server_id).await?;

    println!("\nadmin services on {admin_addr}: try `grpcurl -plaintext {admin_addr} list`");
    if let Some(secs) = std::env::var("CHANNELZ_SERVE_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
    {
        println!("serving for {secs} s");
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
    drop(health);
    if ok {
        Ok(())
    } else {
        Err("channelz's counts differ from the calls made".into())
    }
}

/// Prints the servers, top channels and their sockets; returns whether the
/// counts are the calls made.
async fn report(
    channelz: &mut ChannelzClient<Channel>,
    server_id: i64,
) -> Result<bool, tonic::Status> {
    let want = (OK_CALLS + FAILED_CALLS, OK_CALLS, FAILED_CALLS);
    let mut ok = true;
    println!(
        "{:<36} {:>8} {:>10} {:>7}",
        "entity", "started", "succeeded", "failed"
    );
    let servers = channelz
        .get_servers(proto::GetServersRequest::default())
        .await?
        .into_inner();
    for server in servers.server {
        let (id, data) = (server.r#ref.unwrap().server_id, server.data.unwrap());
        let calls = (data.calls_started, data.calls_succeeded, data.calls_failed);
        println!(
            "{:<36} {:>8} {:>10} {:>7}",
            format!("server {id}"),
            calls.0,
            calls.1,
            calls.2
        );
        ok &= id != server_id || calls == want;
        let sockets = channelz
            .get_server_sockets(proto::GetServerSocketsRequest {
                server_id: id,
                ..Default::default()
            })
            .await?
            .into_inner();
        for socket in sockets.socket_ref {
            print_socket(channelz, socket.socket_id).await?;
        }
    }
    let channels = channelz
        .get_top_channels(proto::GetTopChannelsRequest::default())
        .await?
        .into_inner();
    for channel in channels.channel {
        let data = channel.data.unwrap();
        let calls = (data.calls_started, data.calls_succeeded, data.calls_failed);
        let id = channel.r#ref.unwrap().channel_id;
        let name = format!("channel {id} {}", data.target);
        println!("{name:<36} {:>8} {:>10} {:>7}", calls.0, calls.1, calls.2);
        ok &= calls == want;
        for sub in channel.subchannel_ref {
            let subchannel = channelz
                .get_subchannel(proto::GetSubchannelRequest {
                    subchannel_id: sub.subchannel_id,
                })
                .await?
                .into_inner()
                .subchannel
                .unwrap();
            for socket in subchannel.socket_ref {
                print_socket(channelz, socket.socket_id).await?;
            }
        }
    }
    Ok(ok)
}

async fn print_socket(
    channelz: &mut ChannelzClient<Channel>,
    socket_id: i64,
) -> Result<(), tonic::Status> {
    let socket = channelz
        .get_socket(proto::GetSocketRequest {
            socket_id,
            summary: false,
        })
        .await?
        .into_inner()
        .socket
        .unwrap();
    let data = socket.data.unwrap();
    println!(
        "  socket {socket_id:<5} streams {}/{}/{} (started/ok/failed), messages {} sent, {} received",
        data.streams_started,
        data.streams_succeeded,
        data.streams_failed,
        data.messages_sent,
        data.messages_received
    );
    Ok(())
}
