//! Refusals that outlive a connection: the default user's password
//! rotated (and the clients dropped), an ACL user's keys revoked, the
//! primary turned into a replica (`READONLY`, as after a failover), the
//! password of every node of a Redis Cluster rotated. Each is
//! an outage while it lasts (the backend down, the local fallback
//! answering, no call waiting on Redis), and once the credentials or the
//! permissions are back a later heartbeat marks the backend up again and
//! the shared buckets are used again, without a restart. No password
//! appears in anything logged.
//!
//! (redis-rs's connection manager keeps a reconnect that failed on
//! anything but an I/O error: before the heartbeat rebuilt the
//! connection, the backend stayed down for good after a rotation.)

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tonic::Code;
use tonic_hotpath::limits::{Limits, Rate, RedisBackend, RedisBackendBuilder, TenantLimitLayer};

use crate::fleet::{LOAD, Replica};
use crate::log;
use crate::redis_server::{BACKEND_COMMANDS, RedisCluster, RedisServer};
use support::limits::request;
use support::wait_until;

const OLD_PASSWORD: &str = "rotation-0ld-s3cret";
const NEW_PASSWORD: &str = "rotation-n3w-s3cret";
const ADMIN_PASSWORD: &str = "acl-admin-s3cret";
const USER_PASSWORD: &str = "acl-limiter-s3cret";

/// The backends' heartbeat interval and operation timeout. The timeout is
/// long enough that a busy machine does not stall an answer past it.
const HEARTBEAT: Duration = Duration::from_millis(500);
const TIMEOUT: Duration = Duration::from_secs(1);

/// How soon the backend must be up once the cause is gone: a heartbeat
/// (a quarter interval while down, and the one running may have just
/// failed), then a fresh connection (at most four timeouts) and the
/// heartbeat through it (one timeout). Without the rebuild it never is.
fn recovery_bound() -> Duration {
    2 * HEARTBEAT + 5 * TIMEOUT
}

/// The documented bound on a call's wait for Redis is the lease policy's
/// `answer_wait` (20 ms by default); this one leaves room for a busy
/// machine's scheduling, and is far below what a call waiting on the
/// outage would take (the recovery bound, or for ever).
const CALL_BOUND: Duration = Duration::from_secs(2);

fn limits() -> Limits {
    Limits::unlimited().with_rate(Rate::new(1000.0, 1000).expect("a valid rate"))
}

/// Calls of one tenant, one at a time (about one every 2 ms), until the
/// test drops its handle: how many were answered, and the slowest.
#[derive(Default)]
struct Load {
    answered: AtomicU64,
    slowest_us: AtomicU64,
}

impl Load {
    fn start(replica: &Replica) -> Arc<Self> {
        let load = Arc::new(Self::default());
        let client = replica.clients[0].clone();
        let running = Arc::clone(&load);
        tokio::spawn(async move {
            // The test's handle and this one: once the test's is gone,
            // nobody reads the figures.
            while Arc::strong_count(&running) > 1 {
                let start = Instant::now();
                let response = client.clone().unary_echo(request(Some("t"), "x")).await;
                let took = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
                running.slowest_us.fetch_max(took, Ordering::Relaxed);
                match response {
                    Ok(_) => {}
                    Err(status) if status.code() == Code::ResourceExhausted => {}
                    Err(status) => panic!("a call failed: {status:?}"),
                }
                running.answered.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        load
    }

    fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    fn slowest(&self) -> Duration {
        Duration::from_micros(self.slowest_us.load(Ordering::Relaxed))
    }
}

/// Runs `redis-cli` with `password` and checks it answered `OK`.
fn admin(redis: &RedisServer, password: &str, args: &[&str]) {
    let mut all = vec!["--no-auth-warning", "-a", password];
    all.extend_from_slice(args);
    let output = redis.cli(&all);
    assert!(
        output.contains("OK") || output.trim().parse::<u64>().is_ok(),
        "redis-cli {args:?}: {output}"
    );
}

/// Waits for the backend to go down while calls are answered, then checks
/// that calls went on being answered, promptly, while it was down.
async fn outage(replica: &Replica, load: &Load, what: &str) {
    let status = || replica.handle.shared_status().expect("shared");
    wait_until(&format!("the backend down after {what}"), || !status().up).await;
    let answered = load.answered();
    wait_until("calls answered while the backend is down", || {
        load.answered() >= answered + 50
    })
    .await;
    assert!(!status().up, "up again while {what} lasts: {:?}", status());
    assert!(
        load.slowest() < CALL_BOUND,
        "a call waited {:?} during {what}",
        load.slowest()
    );
}

/// Waits for the backend to be up again, within [`recovery_bound`] of
/// `since`, and for lease requests to be answered again.
async fn recovery(replica: &Replica, since: Instant, what: &str) {
    let status = || replica.handle.shared_status().expect("shared");
    let leases = status().leases;
    wait_until(&format!("the backend up after {what}"), || status().up).await;
    let took = since.elapsed();
    eprintln!("{what}: up again after {took:?}");
    assert!(
        took <= recovery_bound(),
        "up again only after {took:?} (bound {:?})",
        recovery_bound()
    );
    wait_until("a lease answered after the recovery", || {
        status().leases > leases
    })
    .await;
    let status = status();
    assert!(status.time_down > Duration::ZERO, "{status:?}");
}

/// A replica sharing the buckets of `backend` (connected with the
/// heartbeat and timeout above; `what` says what it connects with), and
/// calls of one tenant running against it, once a lease was answered.
async fn serving(backend: RedisBackendBuilder, what: &str) -> (Replica, Arc<Load>) {
    let backend = backend
        .heartbeat_interval(HEARTBEAT)
        .timeout(TIMEOUT)
        .connect()
        .await
        .expect(what);
    let replica = Replica::start(TenantLimitLayer::new(limits()).shared(backend)).await;
    let load = Load::start(&replica);
    wait_until("a lease answered", || {
        replica.handle.shared_status().expect("shared").leases > 0
    })
    .await;
    (replica, load)
}

/// After a recovery: no call waited on Redis, and the log (see
/// [`check_log`]) of the Redis at `address`.
fn answered_promptly_and_logged(load: &Load, address: SocketAddr, secrets: &[&str]) {
    eprintln!("slowest call: {:?}", load.slowest());
    assert!(
        load.slowest() < CALL_BOUND,
        "a call waited {:?}",
        load.slowest()
    );
    check_log(&address.to_string(), secrets);
}

/// The breaker's two log lines for the Redis at `address`, once each, and
/// no `secrets` in anything logged.
fn check_log(address: &str, secrets: &[&str]) {
    let (down, up, lines) = transitions(address);
    assert_eq!((down, up), (1, 1), "one line per transition: {lines:#?}");
    check_secrets(secrets);
}

/// The breaker's log lines for the Redis at `address`: how many said it
/// went down, how many that it came back, and the lines.
fn transitions(address: &str) -> (usize, usize, Vec<String>) {
    let lines = log::lines_with(&format!("redis={address}"));
    let down = lines
        .iter()
        .filter(|line| line.contains("unavailable"))
        .count();
    let up = lines
        .iter()
        .filter(|line| line.contains("answers again"))
        .count();
    (down, up, lines)
}

/// No `secrets` in anything logged.
fn check_secrets(secrets: &[&str]) {
    for line in log::all() {
        for secret in secrets {
            assert!(!line.contains(secret), "a password logged: {line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_password_is_an_outage_until_it_is_back() {
    log::record();
    let Some(redis) = RedisServer::start(&["--requirepass", OLD_PASSWORD]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let (replica, load) = serving(
        RedisBackend::builder(format!(
            "redis://:{OLD_PASSWORD}@127.0.0.1:{}/",
            redis.port()
        ))
        .key_prefix("rotation"),
        "the password in the URL",
    )
    .await;

    // The password rotated, the clients dropped: each reconnect refused.
    admin(
        &redis,
        OLD_PASSWORD,
        &["CONFIG", "SET", "requirepass", NEW_PASSWORD],
    );
    admin(&redis, NEW_PASSWORD, &["CLIENT", "KILL", "TYPE", "normal"]);
    outage(&replica, &load, "the password's rotation").await;

    // The old password back: a fresh connection is accepted.
    admin(
        &redis,
        NEW_PASSWORD,
        &["CONFIG", "SET", "requirepass", OLD_PASSWORD],
    );
    recovery(&replica, Instant::now(), "the old password back").await;
    answered_promptly_and_logged(&load, redis.addr(), &[OLD_PASSWORD, NEW_PASSWORD]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_whose_keys_are_revoked_is_an_outage_until_they_are_back() {
    log::record();
    let Some(redis) = RedisServer::start(&["--requirepass", ADMIN_PASSWORD]).await else {
        return;
    };
    admin(
        &redis,
        ADMIN_PASSWORD,
        &[
            "ACL",
            "SETUSER",
            "limiter",
            "on",
            &format!(">{USER_PASSWORD}"),
            "~acl:*",
        ]
        .into_iter()
        .chain(BACKEND_COMMANDS.iter().copied())
        .collect::<Vec<_>>(),
    );
    let _turn = LOAD.lock().await;
    let (replica, load) = serving(
        RedisBackend::builder(format!("redis://127.0.0.1:{}/", redis.port()))
            .credentials(Some("limiter"), USER_PASSWORD)
            .key_prefix("acl:r"),
        "the ACL user",
    )
    .await;

    // No key allowed any more: every script is refused (NOPERM).
    admin(
        &redis,
        ADMIN_PASSWORD,
        &["ACL", "SETUSER", "limiter", "resetkeys"],
    );
    outage(&replica, &load, "the keys' revocation").await;

    admin(
        &redis,
        ADMIN_PASSWORD,
        &["ACL", "SETUSER", "limiter", "~acl:*"],
    );
    recovery(&replica, Instant::now(), "the keys back").await;
    answered_promptly_and_logged(&load, redis.addr(), &[ADMIN_PASSWORD, USER_PASSWORD]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_turned_replica_is_an_outage_until_it_is_primary_again() {
    log::record();
    let Some(redis) = RedisServer::start(&[]).await else {
        return;
    };
    let Some(primary) = RedisServer::start(&[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let (replica, load) = serving(
        RedisBackend::builder(redis.url()).key_prefix("failover"),
        "connect",
    )
    .await;

    // A replica now: every script's write is refused (READONLY).
    let port = primary.port().to_string();
    let answer = redis.cli(&["REPLICAOF", "127.0.0.1", &port]);
    assert!(answer.contains("OK"), "REPLICAOF: {answer}");
    outage(&replica, &load, "the demotion").await;

    let answer = redis.cli(&["REPLICAOF", "NO", "ONE"]);
    assert!(answer.contains("OK"), "REPLICAOF NO ONE: {answer}");
    recovery(&replica, Instant::now(), "the promotion").await;
    answered_promptly_and_logged(&load, redis.addr(), &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_password_on_a_cluster_is_an_outage_until_it_is_back() {
    log::record();
    let Some(cluster) = RedisCluster::start().await else {
        return;
    };
    let _turn = LOAD.lock().await;
    for node in &cluster.nodes {
        let set = node.cli(&["CONFIG", "SET", "requirepass", OLD_PASSWORD]);
        assert!(set.contains("OK"), "CONFIG SET requirepass: {set}");
    }
    let (replica, load) = serving(
        RedisBackend::builder("unused")
            .cluster(cluster.urls())
            .credentials(None, OLD_PASSWORD)
            .key_prefix("rotation-cluster"),
        "the cluster with the password from code",
    )
    .await;

    // Every node's password rotated, then every node's clients dropped.
    // In that order: rotated and dropped node by node, a connection rebuilt
    // after the first node's drop reached the nodes still on the old
    // password, and the backend was up again between two nodes (a second
    // outage: the rotation, done that way, is two; seen once in 10 runs
    // of the suite beside a CPU hog). Connections already authenticated
    // keep working until they are dropped.
    for node in &cluster.nodes {
        admin(
            node,
            OLD_PASSWORD,
            &["CONFIG", "SET", "requirepass", NEW_PASSWORD],
        );
    }
    for node in &cluster.nodes {
        admin(node, NEW_PASSWORD, &["CLIENT", "KILL", "TYPE", "normal"]);
    }
    outage(&replica, &load, "the cluster's password rotation").await;

    for node in &cluster.nodes {
        admin(
            node,
            NEW_PASSWORD,
            &["CONFIG", "SET", "requirepass", OLD_PASSWORD],
        );
    }
    recovery(&replica, Instant::now(), "the cluster's old password back").await;
    // `CLIENT KILL` is one node at a time: until the last node's clients
    // are dropped, a connection to it (authenticated before the rotation)
    // still answers, and the backend may be up for a moment between two
    // kills (a real recovery, logged as such: seen once in 10 suite runs
    // beside a CPU hog). What holds: every transition logged once, down
    // and up in turn, and up at the end.
    eprintln!("slowest call: {:?}", load.slowest());
    assert!(
        load.slowest() < CALL_BOUND,
        "a call waited {:?}",
        load.slowest()
    );
    let (down, up, lines) = transitions(&cluster.nodes[0].addr().to_string());
    assert!(
        down >= 1 && down == up,
        "one line per transition: {lines:#?}"
    );
    for (index, line) in lines.iter().enumerate() {
        let word = if index % 2 == 0 {
            "unavailable"
        } else {
            "answers again"
        };
        assert!(line.contains(word), "down and up in turn: {lines:#?}");
    }
    check_secrets(&[OLD_PASSWORD, NEW_PASSWORD]);
}
