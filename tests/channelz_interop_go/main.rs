//! channelz against grpc-go's and grpcurl's clients (issue #20): the Go
//! program in `interop/channelz-go` (grpc-go v1.85's channelz client and
//! service) walks a tonic process's `grpc.channelz.v1.Channelz` and reads
//! the counts of a known workload, compares the fields tonic fills with
//! the ones grpc-go fills for the same kinds of entities, and grpcurl
//! (`interop/grpcurl`, v1.9.4) lists, describes and calls the service
//! through reflection.
//!
//! Needs `go` on PATH (and the Go module proxy, or a warm module cache, for
//! the first build); without `go` each test is skipped with a notice
//! (`support::skip`), or fails when `CI` is set. Each Go program is built once per run of this
//! test binary.
//!
//! The tests share the process's channelz registry and walk all of it, so
//! they take turns ([`SERIAL`]) and each one waits, before it lets the next
//! one in, until its servers and channels have left channelz: a walk that
//! lists an entity which is gone when it asks for it fails.
//!
//! Each test runs on a current-thread runtime, one at a time; teardown
//! waits for the stopped server and dropped channel to leave (they close
//! when their layered services are dropped, whatever the runtime:
//! `tests/channelz/channelz.rs` checks it on a multi-threaded one).

mod interop;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use serde_json::Value;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_hotpath::channelz::ServerEntry;

use interop::*;
use support::channelz::*;

#[tokio::test]
async fn grpc_go_channelz_client_reads_a_rust_servers_and_channels_counts() {
    let Some(channelz_go) = channelz_go() else {
        return;
    };
    let _turn = SERIAL.lock().await;
    let started = Instant::now();
    let admin = spawn_admin().await;
    let mut channelz = channelz_client(admin).await;

    // The server and channel under test, and a busy pair beside them.
    let server = rust_server(true).await;
    let channel = RustChannel::connect(server.addr).await;
    let busy_server = rust_server(false).await;
    let busy_channel = RustChannel::connect(busy_server.addr).await;
    let stop = Arc::new(AtomicBool::new(false));
    let busy_calls = Arc::new(AtomicU64::new(0));
    let busy = background_load(busy_channel, Arc::clone(&stop), Arc::clone(&busy_calls));

    // 7 OK, 2 failed unary calls and 1 server stream of 3 messages from
    // Rust; 4 health checks from grpc-go.
    workload(&channel, 7, 2, 1).await;
    let load = channelz_go_ok(
        channelz_go,
        &["load", "-addr", &server.addr.to_string(), "-calls", "4"],
    )
    .await;
    assert_eq!(load, "ok 4\nfailed 0\n", "grpc-go's health checks");

    // Settled: all 14 calls ended and counted, and the Go client's
    // connection gone (a walk fails on a socket that leaves under it).
    let server_id = server.id;
    let want = (14, 12, 2, 1);
    let got = eventually(&want, || {
        let mut channelz = channelz.clone();
        async move {
            let (started, succeeded, failed) =
                server_calls(&fetch_server(&mut channelz, server_id).await);
            let sockets = server_sockets(&mut channelz, server_id, 0).await.len();
            (started, succeeded, failed, sockets)
        }
    })
    .await;
    assert_eq!(
        got, want,
        "server calls (started, succeeded, failed), sockets"
    );

    let busy_before = busy_calls.load(Ordering::Relaxed);
    let query_started = Instant::now();
    let stdout = channelz_go_ok(
        channelz_go,
        &["query", "-addr", &admin.to_string(), "-page", "1"],
    )
    .await;
    let busy_during = busy_calls.load(Ordering::Relaxed) - busy_before;
    assert!(busy_during > 0, "calls on the busy channel during the walk");
    println!(
        "channelz-go query took {:?}, {busy_during} calls on the busy channel meanwhile",
        query_started.elapsed()
    );
    let lines = json_lines(&stdout);

    // The server: 10 Rust calls (8 OK) and 4 grpc-go ones (all OK).
    let described = line_of(&lines, "server", "server.ref.server_id", server.id);
    assert_eq!(
        json_calls(&described["server"]["data"]),
        (14, 12, 2),
        "server calls: {described}"
    );
    // Its one connection left is the Rust client's, counted as grpc-go's
    // transport counts streams: 10 streams, all with their status sent;
    // 10 requests received, 7 + 3 responses sent.
    let client_local = channel.local_addr();
    let server_sockets = lines_of(&lines, "server_socket", "server_id", server.id);
    assert_eq!(server_sockets.len(), 1, "{server_sockets:?}");
    let server_socket = &server_sockets[0]["socket"];
    assert_eq!(
        json_addr(&server_socket["remote"]).port(),
        client_local.port()
    );
    assert_eq!(json_addr(&server_socket["remote"]), client_local);
    assert_eq!(json_addr(&server_socket["local"]), server.addr);
    assert_eq!(json_socket_counts(server_socket), [10, 10, 0, 10, 10]);
    // Its listening socket.
    let listen = lines_of(&lines, "listen_socket", "server_id", server.id);
    assert_eq!(listen.len(), 1, "{listen:?}");
    assert_eq!(json_addr(&listen[0]["socket"]["local"]), server.addr);

    // The channel and its subchannel: the 10 Rust calls.
    let described = line_of(&lines, "channel", "channel.ref.channel_id", channel.id);
    let data = &described["channel"]["data"];
    assert_eq!(json_calls(data), (10, 8, 2), "channel calls: {described}");
    assert_eq!(data["target"], format!("http://{}/", server.addr));
    let subchannel = line_of(
        &lines,
        "subchannel",
        "subchannel.ref.subchannel_id",
        channel.subchannel_id,
    );
    assert_eq!(int(subchannel, "channel_id"), channel.id);
    assert_eq!(
        json_calls(&subchannel["subchannel"]["data"]),
        (10, 8, 2),
        "subchannel calls: {subchannel}"
    );
    // Its socket: 10 streams, all with the server's end of stream; 10
    // requests sent, 10 responses received.
    let socket = line_of(
        &lines,
        "channel_socket",
        "subchannel_id",
        channel.subchannel_id,
    );
    let socket = &socket["socket"];
    assert_eq!(json_socket_counts(socket), [10, 10, 0, 10, 10]);
    assert_eq!(json_addr(&socket["local"]), client_local);
    assert_eq!(json_addr(&socket["remote"]), server.addr);

    // With 2 or more servers, pages of 1 take 2 or more GetServers calls.
    let servers = lines.iter().filter(|line| line["kind"] == "server").count();
    assert!(servers >= 2, "{servers} servers");
    let pages: Vec<i64> = lines
        .iter()
        .filter(|line| line["kind"] == "pages" && line["method"] == "GetServers")
        .map(|line| int(line, "pages"))
        .collect();
    assert!(
        matches!(pages.as_slice(), [pages] if *pages >= 2),
        "GetServers pages: {pages:?}"
    );
    // grpc-go's answers for an unknown id (the program checks them too).
    let not_found: Vec<(&str, &str)> = lines
        .iter()
        .filter(|line| line["kind"] == "not_found")
        .map(|line| {
            (
                line["method"].as_str().unwrap(),
                line["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        not_found,
        [
            ("GetServer", "NotFound"),
            ("GetChannel", "NotFound"),
            ("GetSubchannel", "NotFound"),
            ("GetSocket", "NotFound"),
            ("GetServerSockets", "OK"),
        ]
    );

    stop.store(true, Ordering::Relaxed);
    let busy_channel = busy.await.expect("background load");
    teardown(
        &mut channelz,
        vec![server, busy_server],
        vec![channel, busy_channel],
    )
    .await;
    println!("test took {:?}", started.elapsed());
}

/// The paths of `channelz-go shape` lines of `side` (`go` or `remote`):
/// `<kind> <path>`, without Linux TCP_INFO's (zero fields are left out,
/// so they vary from run to run).
fn shape(stdout: &str, side: &str) -> BTreeSet<String> {
    let prefix = format!("shape {side} ");
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter(|path| !path.contains(".additional.tcpi_"))
        .map(str::to_owned)
        .collect()
}

/// What grpc-go v1.85 fills (for the entities of `channelz-go shape`) and
/// the Rust side leaves out, and why. Paths under TCP_INFO
/// (`.additional.tcpi_*`) are left out of both shapes.
const MISSING_ON_THE_RUST_SIDE: &[&str] = &[
    // Connectivity (IDLE, CONNECTING, READY, ...): tonic's `Channel` does
    // not expose its connectivity state or its transitions.
    "channel data.state",
    "channel data.state.state",
    // Subchannels: the same connectivity state. (Traces: both sides log
    // the creation events, "Channel created for target ...",
    // "Subchannel(id:N) created" with its ref, "Subchannel created";
    // grpc-go's later events, resolver, LB policy and connectivity changes,
    // are tonic's internals; the paths are the same either way.)
    "subchannel data.state",
    "subchannel data.state.state",
    // HTTP/2 flow-control windows: h2's, not exposed by hyper or tonic.
    "channel_socket data.local_flow_control_window",
    "channel_socket data.remote_flow_control_window",
    "server_socket data.local_flow_control_window",
    "server_socket data.remote_flow_control_window",
    // Socket options (grpc-go on Linux: SO_LINGER, SO_RCVTIMEO,
    // SO_SNDTIMEO, TCP_INFO, read with getsockopt at each GetSocket): the
    // handlers see a connection's addresses only (`ConnInfo`), not its
    // file descriptor, so nothing reads them.
    "channel_socket data.option[]",
    "channel_socket data.option[].additional",
    "channel_socket data.option[].additional.@type",
    "channel_socket data.option[].additional.duration",
    "channel_socket data.option[].name",
    "listen_socket data.option[]",
    "listen_socket data.option[].additional",
    "listen_socket data.option[].additional.@type",
    "listen_socket data.option[].additional.duration",
    "listen_socket data.option[].name",
    "server_socket data.option[]",
    "server_socket data.option[].additional",
    "server_socket data.option[].additional.@type",
    "server_socket data.option[].additional.duration",
    "server_socket data.option[].name",
];

#[tokio::test]
async fn rust_and_grpc_go_channelz_have_the_same_shape_where_tonic_can_tell() {
    let Some(channelz_go) = channelz_go() else {
        return;
    };
    let _turn = SERIAL.lock().await;
    let started = Instant::now();
    let admin = spawn_admin().await;
    let mut channelz = channelz_client(admin).await;

    // As `channelz-go shape` does on its side: a server with a listening
    // socket and a connection; a channel that made 3 OK calls, one failed
    // and one to an unimplemented method.
    let server = rust_server(false).await;
    let channel = RustChannel::connect(server.addr).await;
    workload(&channel, 3, 1, 0).await;
    let status = HealthClient::new(channel.service.clone())
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    let server_id = server.id;
    let want = (5, 3, 2);
    let got = eventually(&want, || {
        let mut channelz = channelz.clone();
        async move { server_calls(&fetch_server(&mut channelz, server_id).await) }
    })
    .await;
    assert_eq!(got, want, "server calls settled");

    let stdout = channelz_go_ok(channelz_go, &["shape", "-addr", &admin.to_string()]).await;
    let go = shape(&stdout, "go");
    let rust = shape(&stdout, "remote");
    // The walk saw every kind on the Rust side.
    for kind in [
        "server",
        "server_socket",
        "listen_socket",
        "channel",
        "subchannel",
        "channel_socket",
    ] {
        let prefix = format!("{kind} ");
        assert!(
            rust.iter().any(|path| path.starts_with(&prefix)),
            "no {kind} on the Rust side:\n{stdout}"
        );
    }
    let rust_only: Vec<&str> = rust.difference(&go).map(String::as_str).collect();
    let go_only: Vec<&str> = go.difference(&rust).map(String::as_str).collect();
    let unexpected: Vec<&str> = go_only
        .iter()
        .copied()
        .filter(|path| !MISSING_ON_THE_RUST_SIDE.contains(path))
        .collect();
    let filled: Vec<&str> = MISSING_ON_THE_RUST_SIDE
        .iter()
        .copied()
        .filter(|path| !go_only.contains(path))
        .collect();
    let report = format!(
        "grpc-go only, not expected: {unexpected:#?}\n\
         expected grpc-go only, but not (now filled by Rust, or not by grpc-go): {filled:#?}\n\
         Rust only: {rust_only:#?}\n\
         every grpc-go only path: {go_only:#?}"
    );
    assert!(
        rust_only.is_empty(),
        "the Rust side fills fields grpc-go does not:\n{report}"
    );
    assert!(
        unexpected.is_empty() && filled.is_empty(),
        "what grpc-go fills and the Rust side does not:\n{report}"
    );

    teardown(&mut channelz, vec![server], vec![channel]).await;
    println!("test took {:?}", started.elapsed());
}

#[tokio::test]
async fn grpcurl_lists_describes_and_calls_channelz_through_reflection() {
    let Some(grpcurl) = grpcurl() else {
        return;
    };
    let _turn = SERIAL.lock().await;
    let started = Instant::now();
    let admin = spawn_admin().await;
    let addr = admin.to_string();
    // A server to find (not served: it has no connections to come and go).
    let server = ServerEntry::named("grpcurl");

    let grpcurl_ok = |args: Vec<&str>| {
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (status, stdout, stderr) = run(grpcurl, &args).await;
            assert!(
                status.success(),
                "grpcurl {args:?}: {status}\nstderr:\n{stderr}\nstdout:\n{stdout}"
            );
            stdout
        }
    };

    // `list`: the services reflection advertises.
    let listed = grpcurl_ok(vec!["-plaintext", &addr, "list"]).await;
    let services: Vec<&str> = listed.lines().collect();
    // What grpc-go's admin server lists, but `v1alpha` reflection: it is
    // served (for older tools) but tonic-reflection lists only `v1`.
    assert_eq!(
        services,
        [
            "grpc.channelz.v1.Channelz",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
        ],
        "grpcurl list"
    );
    let health = grpcurl_ok(vec![
        "-plaintext",
        &addr,
        "describe",
        "grpc.health.v1.Health",
    ])
    .await;
    assert!(health.contains("rpc Check"), "{health}");

    // `describe`: the service's 7 methods, from the descriptors.
    let described = grpcurl_ok(vec![
        "-plaintext",
        &addr,
        "describe",
        "grpc.channelz.v1.Channelz",
    ])
    .await;
    let mut methods: Vec<&str> = described
        .lines()
        .filter_map(|line| line.trim().strip_prefix("rpc "))
        .filter_map(|rpc| rpc.split_whitespace().next())
        .collect();
    methods.sort_unstable();
    assert_eq!(
        methods,
        [
            "GetChannel",
            "GetServer",
            "GetServerSockets",
            "GetServers",
            "GetSocket",
            "GetSubchannel",
            "GetTopChannels",
        ],
        "grpcurl describe:\n{described}"
    );

    // A call with JSON built from the descriptors; the answer rendered by
    // grpcurl as protojson (camelCase names, int64s as strings).
    let reply = grpcurl_ok(vec![
        "-plaintext",
        "-d",
        r#"{"max_results": 1}"#,
        &addr,
        "grpc.channelz.v1.Channelz/GetServers",
    ])
    .await;
    let reply: Value = serde_json::from_str(&reply).expect("GetServers JSON");
    let servers = reply["server"].as_array().expect("a server list");
    assert_eq!(servers.len(), 1, "max_results 1: {reply}");
    assert!(int(&servers[0], "ref.serverId") > 0, "a server id: {reply}");
    // Ours, from its id on.
    let request = format!(
        r#"{{"start_server_id": {}, "max_results": 1}}"#,
        server.id()
    );
    let reply = grpcurl_ok(vec![
        "-plaintext",
        "-d",
        &request,
        &addr,
        "grpc.channelz.v1.Channelz/GetServers",
    ])
    .await;
    let reply: Value = serde_json::from_str(&reply).expect("GetServers JSON");
    let ours = &reply["server"][0]["ref"];
    assert_eq!(int(ours, "serverId"), server.id(), "{reply}");
    assert_eq!(ours["name"], "grpcurl", "{reply}");

    // An unknown id: NOT_FOUND with grpc-go's message; grpcurl exits with
    // 64 + the code.
    let (status, stdout, stderr) = run(
        grpcurl,
        &[
            "-plaintext",
            "-d",
            r#"{"server_id": 9223372036854775000}"#,
            &addr,
            "grpc.channelz.v1.Channelz/GetServer",
        ],
    )
    .await;
    assert_eq!(status.code(), Some(64 + 5), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Code: NotFound")
            && stderr.contains("Message: requested server 9223372036854775000 not found"),
        "grpcurl GetServer of an unknown id:\n{stderr}"
    );

    drop(server);
    println!("test took {:?}", started.elapsed());
}
