//! TLS (`rediss://`, feature `limits-redis-tls`): a `redis-server`
//! serving TLS only, with certificates made by the test (a CA, a server
//! certificate for 127.0.0.1 / localhost, a client certificate). Server
//! TLS and mutual TLS admit calls through a shared layer; a CA that did
//! not sign the server's certificate and a missing client certificate are
//! clear start-up errors naming the problem; a 3-primary cluster over TLS
//! keeps each tenant's burst; a rotated password over mutual TLS is
//! recovered from through a fresh connection with the same certificates.

use std::time::{Duration, Instant};

use tonic::Code;
use tonic_hotpath::limits::{
    Limits, Rate, RedisBackend, RedisBackendBuilder, RedisBackendErrorKind, TenantLimitLayer,
};

use crate::fleet::Replica;
use crate::redis_server::{RedisCluster, RedisServer};
use support::limits::{pushback, request};
use support::stacks::tls::TestCerts;
use support::wait_until;

const PASSWORD: &str = "tls-s3cret";
const NEW_PASSWORD: &str = "tls-n3w-s3cret";

/// A slow rate: each tenant has its burst of 5, then nothing for 100 s.
fn limits() -> Limits {
    Limits::unlimited().with_rate(Rate::new(0.01, 5).expect("a valid rate"))
}

/// `builder` trusting the test CA and, for mutual TLS, presenting the
/// client certificate.
fn trusting(builder: RedisBackendBuilder, certs: &TestCerts, client: bool) -> RedisBackendBuilder {
    let builder = builder
        .tls_ca_certificate(certs.ca.clone())
        .heartbeat_interval(Duration::from_millis(200))
        .timeout(Duration::from_secs(1));
    if client {
        builder.tls_client_certificate(certs.client.cert.clone(), certs.client.key.clone())
    } else {
        builder
    }
}

/// Calls of `tenant` through `replicas` in turn until each refuses for
/// the fleet's bucket (a pushback over 50 s): the calls admitted.
async fn burst(replicas: &[Replica], tenant: &str) -> u32 {
    let mut admitted = 0;
    let mut dry = vec![false; replicas.len()];
    for i in 0..400 {
        let replica = i % replicas.len();
        let response = replicas[replica].clients[0]
            .clone()
            .unary_echo(request(Some(tenant), "x"))
            .await;
        match response {
            Ok(_) => admitted += 1,
            Err(status) if status.code() == Code::ResourceExhausted => {
                dry[replica] |= pushback(&status).unwrap_or(0) > 50_000;
            }
            Err(status) => panic!("{tenant}: {status:?}"),
        }
        if dry.iter().all(|dry| *dry) {
            return admitted;
        }
    }
    panic!("{tenant}: the bucket never ran dry ({admitted} admitted)");
}

/// One replica behind a shared layer on `backend` keeps a tenant's burst
/// of 5 (plus at most one call admitted on credit before its first lease)
/// and counts its leases.
async fn admits_the_burst(backend: RedisBackend) {
    assert!(backend.status().up);
    let replica = Replica::start(TenantLimitLayer::new(limits()).shared(backend)).await;
    let admitted = burst(std::slice::from_ref(&replica), "t").await;
    assert!((5..=6).contains(&admitted), "{admitted} admitted, not 5");
    let status = replica.handle.shared_status().expect("shared");
    assert!(status.up && status.leases > 0, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_tls_admits_calls_through_a_shared_layer() {
    let certs = TestCerts::generate();
    let Some(redis) = RedisServer::start_tls(&certs, &["--tls-auth-clients", "no"]).await else {
        return;
    };
    assert!(redis.url().starts_with("rediss://"));
    let backend = trusting(RedisBackend::builder(redis.url()), &certs, false)
        .key_prefix("tls")
        .connect()
        .await
        .expect("TLS with the test CA");
    admits_the_burst(backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_admits_calls_through_a_shared_layer() {
    let certs = TestCerts::generate();
    let Some(redis) = RedisServer::start_tls(&certs, &[]).await else {
        return;
    };
    let backend = trusting(RedisBackend::builder(redis.url()), &certs, true)
        .key_prefix("mtls")
        .connect()
        .await
        .expect("mutual TLS");
    admits_the_burst(backend).await;
}

#[tokio::test]
async fn a_server_certificate_not_signed_by_the_ca_is_a_clear_start_up_error() {
    let certs = TestCerts::generate();
    let Some(redis) = RedisServer::start_tls(
        &certs,
        &["--tls-auth-clients", "no", "--requirepass", PASSWORD],
    )
    .await
    else {
        return;
    };
    let url = format!("rediss://:{PASSWORD}@127.0.0.1:{}/", redis.port());
    let other = TestCerts::generate();
    let error = RedisBackend::builder(&url)
        .tls_ca_certificate(other.ca)
        .connect()
        .await
        .expect_err("a CA that did not sign the server's certificate");
    eprintln!("{error}");
    assert_eq!(error.kind(), RedisBackendErrorKind::Tls, "{error}");
    let text = error.to_string();
    assert!(text.contains("certificate is not trusted"), "{text}");
    // By default the system's roots are trusted, which hold no test CA.
    let error = RedisBackend::connect(&url)
        .await
        .expect_err("the system's roots");
    assert_eq!(error.kind(), RedisBackendErrorKind::Tls, "{error}");
    assert!(error.to_string().contains("not trusted"), "{error}");
    assert!(!error.to_string().contains(PASSWORD), "{error}");
    assert!(text.contains(&redis.addr().to_string()), "{text}");
    assert!(!text.contains(PASSWORD) && !format!("{error:?}").contains(PASSWORD));
    // A CA that is no PEM certificate at all: named before connecting.
    let error = RedisBackend::builder(&url)
        .tls_ca_certificate("-----BEGIN PRIVATE KEY-----\nMII=\n-----END PRIVATE KEY-----\n")
        .connect()
        .await
        .expect_err("no certificate in the CA PEM");
    assert_eq!(error.kind(), RedisBackendErrorKind::Tls, "{error}");
    assert!(error.to_string().contains("the CA certificate"), "{error}");
}

#[tokio::test]
async fn mutual_tls_without_a_client_certificate_is_a_clear_start_up_error() {
    let certs = TestCerts::generate();
    let Some(redis) = RedisServer::start_tls(&certs, &[]).await else {
        return;
    };
    let url = format!("rediss://:{PASSWORD}@127.0.0.1:{}/", redis.port());
    let start = Instant::now();
    let error = trusting(RedisBackend::builder(&url), &certs, false)
        .connect()
        .await
        .expect_err("the server demands a client certificate");
    eprintln!("after {:?}: {error}", start.elapsed());
    assert_eq!(error.kind(), RedisBackendErrorKind::Tls, "{error}");
    assert!(error.to_string().contains("client certificate"), "{error}");
    assert!(!error.to_string().contains(PASSWORD), "{error}");
    // A client key that is no PEM key: named before connecting.
    let error = RedisBackend::builder(&url)
        .tls_ca_certificate(certs.ca.clone())
        .tls_client_certificate(certs.client.cert.clone(), "not a key")
        .connect()
        .await
        .expect_err("no key in the key PEM");
    assert_eq!(error.kind(), RedisBackendErrorKind::Tls, "{error}");
    assert!(error.to_string().contains("the client key"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_password_over_mutual_tls_is_recovered_with_the_same_certificates() {
    let certs = TestCerts::generate();
    let Some(redis) = RedisServer::start_tls(&certs, &["--requirepass", PASSWORD]).await else {
        return;
    };
    let url = format!("rediss://:{PASSWORD}@127.0.0.1:{}/", redis.port());
    let backend = trusting(RedisBackend::builder(&url), &certs, true)
        .key_prefix("tls-rotation")
        .connect()
        .await
        .expect("mutual TLS with a password");
    let cli = |password: &str, args: &[&str]| {
        let mut all = vec!["--no-auth-warning", "-a", password];
        all.extend_from_slice(args);
        let output = redis.cli(&all);
        assert!(
            output.contains("OK") || output.trim().parse::<u64>().is_ok(),
            "{output}"
        );
    };
    cli(PASSWORD, &["CONFIG", "SET", "requirepass", NEW_PASSWORD]);
    cli(NEW_PASSWORD, &["CLIENT", "KILL", "TYPE", "normal"]);
    wait_until("the backend down", || !backend.status().up).await;
    cli(NEW_PASSWORD, &["CONFIG", "SET", "requirepass", PASSWORD]);
    // Only a fresh connection (TLS, the client certificate, the password)
    // gets past the refused reconnect.
    let heartbeats = backend.status().heartbeats;
    wait_until("the backend up again", || backend.status().up).await;
    assert!(backend.status().heartbeats > heartbeats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_keeps_each_tenants_burst() {
    let certs = TestCerts::generate();
    let Some(cluster) = RedisCluster::start_tls(&certs).await else {
        return;
    };
    // Taking turns with the load tests, as the plain cluster test does.
    let _turn = crate::fleet::LOAD.lock().await;
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let backend = trusting(RedisBackend::builder("unused"), &certs, false)
            .cluster(cluster.urls())
            .key_prefix("cluster-tls")
            .connect()
            .await
            .expect("connect to the cluster over TLS");
        replicas.push(Replica::start(TenantLimitLayer::new(limits()).shared(backend)).await);
    }
    // 40 tenants: every primary gets some (odds against: 3 in 10 million).
    for i in 0..40 {
        let tenant = format!("tenant-{i}");
        let admitted = burst(&replicas, &tenant).await;
        // The burst, plus at most one call per replica admitted on credit
        // before its first lease.
        assert!(
            (5..=7).contains(&admitted),
            "{tenant}: {admitted} admitted, not the burst of 5"
        );
    }
    for node in &cluster.nodes {
        let keys = node.cli(&["--scan", "--pattern", "cluster-tls:*:calls"]);
        assert!(
            !keys.trim().is_empty(),
            "node {} holds no bucket",
            node.port()
        );
    }
}
