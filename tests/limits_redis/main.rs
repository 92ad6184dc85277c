//! The fleet-wide tenant limits (feature `limits-redis`) against a real
//! `redis-server` (and a local Redis Cluster) on 127.0.0.1, with real
//! tonic replicas and clients: accuracy across replicas under uneven load,
//! Redis killed, restarted and paused, credentials, refusals that outlive
//! a connection (a rotated password, revoked ACL keys, a demoted primary),
//! the cluster, work units, and TLS (feature `limits-redis-tls`). Where
//! `redis-server` is not installed each test says it is skipped; with
//! `CI` set it fails instead.

mod accuracy;
mod auth;
mod cluster;
mod federated;
mod fleet;
mod log;
#[cfg(feature = "otel")]
mod metrics;
mod outage;
mod pushback_go;
mod quiet;
mod redis_server;
mod rotation;
mod slow;
#[cfg(feature = "limits-redis-tls")]
mod tls;
mod work;
