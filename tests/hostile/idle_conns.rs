//! Scenario 3: 10 000 idle connections through the layer's connection
//! wrappers (`CombinedLayer::incoming`, connection tracking) with channelz
//! on: the memory each costs, and all of it returned when they close.
//!
//! The client ends live in a child process (this test binary again,
//! running only [`idle_client_child`]): 10 000 connections with both ends
//! in one process would need 20 000 descriptors, this machine's hard
//! limit. Each client does the HTTP/2 handshake (an idle gRPC channel,
//! not a bare socket) and holds its connection until the parent closes the
//! child's standard input.
//!
//! Two servers, one after another: tonic with no layer, and the layer with
//! channelz's [`ServerEntry`] on the layer's incoming stream.

use std::io::BufRead;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::task::JoinSet;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_hotpath::channelz::ServerEntry;
use tonic_hotpath::stats::CombinedLayer;
use tower::layer::util::Identity;

use crate::measure::{self, delta, kib, settled};
use support::channelz::server_socket_count;
use support::stacks::{Incoming, ServerLayer, junk::h2_connect, serve};
use support::{EchoServer, EchoService};

/// Idle connections held open at once.
const CONNECTIONS: usize = 10_000;
/// Descriptors the parent needs beside its connections (runtime, listener,
/// pipes, the harness).
const SPARE_FDS: u64 = 256;

/// The bound on what the layer and channelz add per connection (its
/// `StatsIo` and tag, the registry entry, the channelz socket).
const LAYER_PER_CONNECTION: f64 = 2048.0;
/// The bound on what stays live once every connection closed, against
/// the bytes live before they opened: tokio's I/O driver frees a closed
/// socket's registration in batches, and a hash table keeps the capacity
/// it grew to; none of it per connection.
const RETAINED: i64 = 512 * 1024;

/// The child's environment: the server's address, and how many
/// connections to open.
const ADDR_ENV: &str = "HOSTILE_IDLE_ADDR";
const COUNT_ENV: &str = "HOSTILE_IDLE_CONNECTIONS";
/// The line the child prints once every connection is open.
const READY: &str = "hostile-idle-clients-ready";

/// Raises this process's soft limit on open descriptors to `needed` (up
/// to the hard limit); `Err` with the hard limit when that is too low.
fn raise_fd_limit(needed: u64) -> Result<(), u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes into the `rlimit` it is given, which
    // lives on this stack frame.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(0);
    }
    if limit.rlim_cur >= needed {
        return Ok(());
    }
    if limit.rlim_max < needed {
        return Err(limit.rlim_max);
    }
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: `setrlimit` only reads the `rlimit` it is given.
    match unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } {
        0 => Ok(()),
        _ => Err(limit.rlim_max),
    }
}

/// Run as a child by [`idle_connections_cost_little_and_leave_nothing`]:
/// opens the connections its environment asks for, prints [`READY`],
/// and holds them until its standard input closes. Does nothing when run
/// by hand.
#[test]
#[ignore = "the client half of idle_connections_cost_little_and_leave_nothing, run in a child process"]
fn idle_client_child() {
    let (Ok(addr), Ok(count)) = (std::env::var(ADDR_ENV), std::env::var(COUNT_ENV)) else {
        eprintln!("{ADDR_ENV} and {COUNT_ENV} unset: nothing to do");
        return;
    };
    let addr: SocketAddr = addr.parse().expect("an address");
    let count: usize = count.parse().expect("a count");
    raise_fd_limit(count as u64 + SPARE_FDS).expect("enough descriptors");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        // At most 128 handshakes at once: more would overflow the
        // listener's accept backlog and wait out SYN retransmissions.
        let mut clients = Vec::with_capacity(count);
        let mut connecting = JoinSet::new();
        for _ in 0..count {
            if connecting.len() == 128 {
                clients.push(
                    connecting
                        .join_next()
                        .await
                        .expect("a task")
                        .expect("connect"),
                );
            }
            connecting.spawn(h2_connect(addr));
        }
        clients.extend(connecting.join_all().await);
        println!("{READY} {}", clients.len());
        // Holds the connections until the parent closes standard input.
        let mut rest = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut rest).await;
        drop(clients);
    });
}

/// This test binary run as [`idle_client_child`] against `addr`, its
/// standard input and output piped.
fn spawn_child(addr: SocketAddr) -> Child {
    let exe = std::env::current_exe().expect("the test binary");
    Command::new(exe)
        .args([
            "--exact",
            "idle_conns::idle_client_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ADDR_ENV, addr.to_string())
        .env(COUNT_ENV, CONNECTIONS.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the client child")
}

/// Waits for the child's [`READY`] line, and checks the count it reports.
/// A thread reads the child's output to its end (a child writing to a
/// closed pipe would fail).
async fn wait_ready(child: &mut Child) {
    let stdout = child.stdout.take().expect("piped stdout");
    let (ready, report) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut ready = Some(ready);
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            // libtest writes the test's name first, on the same line.
            if let Some((_, count)) = line.split_once(READY)
                && let Some(ready) = ready.take()
            {
                let _ = ready.send(count.trim().to_owned());
            }
        }
    });
    let count = tokio::time::timeout(Duration::from_secs(120), report)
        .await
        .expect("the child connected in time")
        .expect("the child's report");
    assert_eq!(
        count,
        CONNECTIONS.to_string(),
        "the child's report of its connections"
    );
}

/// What one server showed.
#[derive(Debug)]
struct Idle {
    baseline: usize,
    open: usize,
    after: usize,
}

impl Idle {
    fn per_connection(&self) -> f64 {
        delta(self.open, self.baseline) as f64 / CONNECTIONS as f64
    }

    fn retained(&self) -> i64 {
        delta(self.after, self.baseline)
    }
}

/// Serves the echo service behind `layer` on `incoming` at `addr`, has a
/// child open [`CONNECTIONS`] idle connections to it, then close them;
/// `open_count` reads how many connections the server tracks, if it
/// tracks them (it must reach [`CONNECTIONS`] while they are open, and 0
/// after).
async fn run<L, I, F>(layer: L, addr: SocketAddr, incoming: I, open_count: impl Fn() -> F) -> Idle
where
    L: ServerLayer<Routes>,
    I: Incoming,
    F: Future<Output = Option<usize>>,
{
    let routes = Routes::new(EchoServer::new(EchoService));
    let server = serve(Server::builder(), layer, routes, incoming);
    let baseline = settled().await;
    let mut child = spawn_child(addr);
    wait_ready(&mut child).await;
    // The child's connects complete in the kernel's accept queue; the
    // server accepts (and tracks) them a little later, later still on a
    // loaded machine.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while let Some(open) = open_count().await {
        if open == CONNECTIONS || std::time::Instant::now() > deadline {
            assert_eq!(open, CONNECTIONS, "tracked while open");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let open = settled().await;
    drop(child.stdin.take());
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("waiter thread")
        .expect("the child's status");
    assert!(status.success(), "the client child failed: {status}");
    for _ in 0..600 {
        if open_count().await.is_none_or(|open| open == 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Some(open) = open_count().await {
        assert_eq!(open, 0, "tracked after closing");
    }
    let after = settled().await;
    server.abort();
    Idle {
        baseline,
        open,
        after,
    }
}

fn print(name: &str, idle: &Idle) {
    eprintln!(
        "idle_conns: {name:<24} baseline {:>8.0} KiB, {CONNECTIONS} open +{:>8.0} KiB \
         ({:>6.0} B a connection), after closing {:>+6.0} KiB",
        kib(idle.baseline),
        kib(delta(idle.open, idle.baseline)),
        idle.per_connection(),
        kib(idle.retained()),
    );
}

#[test]
fn idle_connections_cost_little_and_leave_nothing() {
    let needed = CONNECTIONS as u64 + SPARE_FDS;
    if let Err(hard) = raise_fd_limit(needed) {
        eprintln!(
            "idle_conns: SKIPPED: the hard limit on open files is {hard}, \
             {needed} are needed (raise `ulimit -Hn`)"
        );
        return;
    }
    let _serial = measure::serial();
    measure::runtime().block_on(async {
        // Without the layer, the server counts nothing: the child's
        // connections are known open once it reports them (each
        // handshake needed the server's SETTINGS), and closed once the
        // bytes live settle.
        let (addr, incoming) = support::bind().await;
        let tonic = run(Identity::new(), addr, incoming, || async { None }).await;

        // With it, channelz lists each connection as a socket.
        let handler = ServerEntry::new();
        let id = handler.id();
        let layer = CombinedLayer::server().with(handler);
        let (addr, incoming) = support::bind().await;
        let incoming = layer.incoming(incoming);
        let channelz = run(layer, addr, incoming, || async move {
            Some(server_socket_count(id).await)
        })
        .await;

        print("no layer", &tonic);
        print("layer + channelz", &channelz);
        let extra = channelz.per_connection() - tonic.per_connection();
        eprintln!(
            "idle_conns: the layer and channelz add {extra:.0} B a connection \
             (bound {LAYER_PER_CONNECTION:.0} B); retained after closing: bound {:.0} KiB",
            kib(RETAINED)
        );
        assert!(
            extra < LAYER_PER_CONNECTION,
            "{extra:.0} bytes a connection for the layer and channelz"
        );
        for (name, idle) in [("no layer", &tonic), ("layer + channelz", &channelz)] {
            assert!(
                idle.retained() <= RETAINED,
                "{name}: {} bytes still live after every connection closed",
                idle.retained()
            );
        }
    });
}
