//! A real `redis-server` for the tests: on a free port of 127.0.0.1, in a
//! temporary directory of its own, stopped (and the directory removed) on
//! drop; killed with SIGKILL, paused with SIGSTOP, restarted on the same
//! port. A local 3-primary Redis Cluster of three of them. Either over
//! TLS too (`--port 0 --tls-port P`, certificates of a test PKI written
//! into the server's directory).
//!
//! Where `redis-server` is missing, [`RedisServer::start`] skips the test
//! with a notice (`support::skip`) and returns `None`; with `CI` set it
//! panics instead (a check that cannot run in CI must not pass there).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::stacks::tls::TestCerts;

/// The commands the backend sends (its scripts and what they call, the
/// `PING` that checks a connection): an ACL user for it needs these, and
/// its key prefix.
pub const BACKEND_COMMANDS: &[&str] = &[
    "+@scripting",
    "+ping",
    "+time",
    "+zadd",
    "+zrem",
    "+zremrangebyscore",
    "+pexpire",
    "+zcard",
    "+get",
    "+set",
];

/// A `redis-server` process.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
    /// Serving TLS only, with the PEM files in `dir`.
    tls: bool,
}

/// A port free on 127.0.0.1 whose cluster bus port (+10 000) is free too,
/// both below the kernel's ephemeral range (32 768 and up on Linux): a
/// port taken from that range could be the local port of some other
/// test's client connection, and a cluster node listening on it breaks
/// that connection.
fn free_port() -> u16 {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new();
    for attempt in 0u64.. {
        let port = 12_000 + (random.hash_one(attempt) % 10_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()
        {
            return port;
        }
    }
    unreachable!("some port between 12 000 and 22 000 is free")
}

impl RedisServer {
    /// Starts a `redis-server` with `args` (e.g. `["--requirepass", "pw"]`)
    /// and waits until it answers; `None` (after a notice) where
    /// `redis-server` is missing.
    pub async fn start(args: &[&str]) -> Option<Self> {
        Self::start_with(None, args).await
    }

    /// [`start`](Self::start) serving TLS only, with `certs`' server
    /// certificate and CA (`args` may add `--tls-auth-clients no`, say).
    #[cfg(feature = "limits-redis-tls")]
    pub async fn start_tls(certs: &TestCerts, args: &[&str]) -> Option<Self> {
        Self::start_with(Some(certs), args).await
    }

    async fn start_with(certs: Option<&TestCerts>, args: &[&str]) -> Option<Self> {
        if !support::skip::require(
            "redis-server",
            &["--version"],
            "apt-get install redis-server",
        ) {
            return None;
        }
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("tonic-hotpath-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the server's directory");
        if let Some(certs) = certs {
            for (name, pem) in [
                ("ca.pem", &certs.ca),
                ("server.pem", &certs.server.cert),
                ("server.key", &certs.server.key),
                ("client.pem", &certs.client.cert),
                ("client.key", &certs.client.key),
            ] {
                std::fs::write(dir.join(name), pem).expect("write a PEM file");
            }
        }
        let mut server = Self {
            child: None,
            port,
            dir,
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            tls: certs.is_some(),
        };
        server.spawn().await;
        Some(server)
    }

    /// `--port P`, or over TLS `--port 0 --tls-port P` and the PEM files.
    fn port_args(&self) -> Vec<String> {
        let port = self.port.to_string();
        if !self.tls {
            return vec!["--port".to_owned(), port];
        }
        let file = |name: &str| self.dir.join(name).display().to_string();
        vec![
            "--port".to_owned(),
            "0".to_owned(),
            "--tls-port".to_owned(),
            port,
            "--tls-cert-file".to_owned(),
            file("server.pem"),
            "--tls-key-file".to_owned(),
            file("server.key"),
            "--tls-ca-cert-file".to_owned(),
            file("ca.pem"),
            // What it presents when it connects out (the cluster bus,
            // which always checks it): the client certificate, whose
            // EKU is clientAuth (the server's is serverAuth only).
            "--tls-client-cert-file".to_owned(),
            file("client.pem"),
            "--tls-client-key-file".to_owned(),
            file("client.key"),
        ]
    }

    async fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(self.port_args())
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let addr = self.addr();
        let deadline = support::deadline();
        loop {
            // Over TLS, listening is enough: nothing is loaded (no
            // persistence), so it answers as soon as it accepts.
            if self.tls && TcpStream::connect(addr).is_ok() {
                return;
            }
            if let Ok(mut stream) = TcpStream::connect(addr) {
                use std::io::{Read, Write};
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut reply = [0u8; 16];
                if stream.write_all(b"PING\r\n").is_ok()
                    && stream.read(&mut reply).is_ok_and(|n| n > 0)
                    && !reply.starts_with(b"-LOADING")
                {
                    return;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server on {addr} did not answer within {:?}",
                support::PATIENCE
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/` (`rediss://` over TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// redis-cli's TLS options (the CA, the client certificate), if any.
    fn cli_tls_args(&self) -> Vec<String> {
        if !self.tls {
            return Vec::new();
        }
        let file = |name: &str| self.dir.join(name).display().to_string();
        vec![
            "--tls".to_owned(),
            "--cacert".to_owned(),
            file("ca.pem"),
            "--cert".to_owned(),
            file("client.pem"),
            "--key".to_owned(),
            file("client.key"),
        ]
    }

    /// Kills it with SIGKILL (no shutdown, connections cut) and waits for
    /// it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL redis-server");
            child.wait().expect("reap redis-server");
        }
    }

    /// Starts it again on the same port, with the same arguments (an empty
    /// database: nothing is saved).
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    /// Sends `signal` to the process.
    fn signal(&self, signal: i32) {
        let pid = self.child.as_ref().expect("running").id();
        // SAFETY: kill(2) on our own child's pid, with a valid signal
        // number; it touches no memory of this process.
        let result = unsafe { libc::kill(pid as libc::pid_t, signal) };
        assert_eq!(result, 0, "kill({pid}, {signal})");
    }

    /// Pauses it (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Resumes it (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Runs `redis-cli -p <port> <args>` and returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(self.cli_tls_args())
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // Resume it first, in case a test paused it and then failed.
            // SAFETY: as in `signal`.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) };
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A local Redis Cluster of three primaries (no replicas).
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, joins them with
    /// `redis-cli --cluster create`, and waits until every node says the
    /// cluster is ok; `None` where `redis-server` is missing.
    pub async fn start() -> Option<Self> {
        Self::start_with(None).await
    }

    /// [`start`](Self::start) over TLS (`--tls-cluster yes`: the cluster
    /// bus too; clients are not asked for certificates, nodes are).
    #[cfg(feature = "limits-redis-tls")]
    pub async fn start_tls(certs: &TestCerts) -> Option<Self> {
        Self::start_with(Some(certs)).await
    }

    async fn start_with(certs: Option<&TestCerts>) -> Option<Self> {
        let mut nodes = Vec::new();
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "5000",
        ];
        if certs.is_some() {
            args.extend(["--tls-cluster", "yes", "--tls-auth-clients", "no"]);
        }
        for _ in 0..3 {
            nodes.push(RedisServer::start_with(certs, &args).await?);
        }
        let addresses: Vec<String> = nodes.iter().map(|node| node.addr().to_string()).collect();
        let output = Command::new("redis-cli")
            .args(nodes[0].cli_tls_args())
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            output.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        let cluster = Self { nodes };
        let deadline = support::deadline();
        while !cluster
            .nodes
            .iter()
            .all(|node| node.cli(&["cluster", "info"]).contains("cluster_state:ok"))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the cluster was not ok within {:?}",
                support::PATIENCE
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(cluster)
    }

    /// The nodes' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}
