//! The demo's invariants, checked on every reply and on the final stats:
//! any failure ends the run with exit code 1 and says what was wrong.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use tonic::{Code, Status};
use tonic_hotpath::tenant::OrgId;

use crate::backend::{ArenaTotals, RECORDS_PER_CALL};
use crate::cli::Options;
use crate::handlers::MethodStats;
use crate::report;
use crate::wire::{ArenaFigures, GatewayReply};

/// A broken invariant.
#[derive(Debug)]
pub struct CheckFailed(String);

impl fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invariant broken: {}", self.0)
    }
}

impl std::error::Error for CheckFailed {}

/// Fails with `message` unless `ok`.
fn ensure(ok: bool, message: impl FnOnce() -> String) -> Result<(), CheckFailed> {
    if ok {
        Ok(())
    } else {
        Err(CheckFailed(message()))
    }
}

/// The keys every backend call must receive, in this order.
pub const EXPECTED_KEYS: [&str; 7] = [
    "x-request-id",
    "x-hop",
    "x-hop",
    "x-deadline-budget-ms",
    "x-gateway-key-bin",
    "x-scope-orgid",
    "x-shard",
];

/// The code the call without an org id must get.
pub const REJECTED_CODE: Code = Code::Unauthenticated;

/// What the checks have seen so far.
#[derive(Debug)]
pub struct Checks {
    org_id: String,
    options: Options,
    first: Option<GatewayReply>,
    gateway_orgs: BTreeSet<String>,
    backend_orgs: BTreeSet<String>,
    largest: ArenaFigures,
}

impl Checks {
    /// Checks for a run of `options` on behalf of `org_id`.
    pub fn new(org_id: &OrgId, options: Options) -> Self {
        Checks {
            org_id: org_id.to_string(),
            options,
            first: None,
            gateway_orgs: BTreeSet::new(),
            backend_orgs: BTreeSet::new(),
            largest: ArenaFigures::default(),
        }
    }

    /// One gateway reply: every shard answered, each fork carried exactly
    /// its own `x-shard`, the chain arrived in FIFO order, and the org id is
    /// the same at every hop.
    pub fn reply(&mut self, request_id: &str, reply: GatewayReply) -> Result<(), CheckFailed> {
        ensure(reply.request_id == request_id, || {
            format!("gateway answered {} for {request_id}", reply.request_id)
        })?;
        ensure(reply.org_id == self.org_id, || {
            format!(
                "gateway saw org id {:?}, client sent {:?}",
                reply.org_id, self.org_id
            )
        })?;
        ensure(reply.shards.len() == self.options.fan_out, || {
            format!(
                "{request_id}: {} shard replies, fan-out {}",
                reply.shards.len(),
                self.options.fan_out
            )
        })?;
        for (index, shard) in reply.shards.iter().enumerate() {
            let own = index.to_string();
            let context = || format!("{request_id} shard {index}");
            let shard_keys: Vec<&str> = shard
                .metadata
                .iter()
                .filter(|(key, _)| key == "x-shard")
                .map(|(_, value)| value.as_str())
                .collect();
            ensure(shard_keys == [own.as_str()], || {
                format!(
                    "{}: fork isolation: x-shard values {shard_keys:?}, expected [{own}]",
                    context()
                )
            })?;
            let keys: Vec<&str> = shard.metadata.iter().map(|(key, _)| key.as_str()).collect();
            ensure(keys == EXPECTED_KEYS, || {
                format!(
                    "{}: FIFO order: keys {keys:?}, expected {EXPECTED_KEYS:?}",
                    context()
                )
            })?;
            let values: Vec<&str> = shard
                .metadata
                .iter()
                .map(|(_, value)| value.as_str())
                .collect();
            ensure(
                values[0] == request_id
                    && values[1..3] == ["client", "gateway"]
                    && values[5] == self.org_id,
                || format!("{}: unexpected values {values:?}", context()),
            )?;
            ensure(shard.org_id == self.org_id, || {
                format!("{}: backend saw org id {:?}", context(), shard.org_id)
            })?;
            ensure(shard.records.len() == RECORDS_PER_CALL, || {
                format!(
                    "{}: {} records, expected {RECORDS_PER_CALL}",
                    context(),
                    shard.records.len()
                )
            })?;
            let a = shard.arena;
            ensure(a.len > 0 && a.len <= a.peak && a.len <= a.cap, || {
                format!("{}: arena figures out of order: {a:?}", context())
            })?;
            self.largest.len = self.largest.len.max(a.len);
            self.largest.cap = self.largest.cap.max(a.cap);
            self.largest.peak = self.largest.peak.max(a.peak);
            self.largest.buffers = self.largest.buffers.max(a.buffers);
            self.backend_orgs.insert(shard.org_id.clone());
        }
        self.gateway_orgs.insert(reply.org_id.clone());
        self.first.get_or_insert(reply);
        Ok(())
    }

    /// The call without an org id was refused as `UNAUTHENTICATED`.
    pub fn rejected(&self, status: &Status) -> Result<(), CheckFailed> {
        ensure(status.code() == REJECTED_CODE, || {
            format!(
                "the call without an org id got {:?} ({}), expected {REJECTED_CODE:?}",
                status.code(),
                status.message()
            )
        })
    }

    /// Prints the rejected call, the org id at each hop and the metadata
    /// as the backend received it for the first request.
    pub fn report(&self, rejected: &Status) {
        report::section("rejected call (no x-scope-orgid)");
        println!(
            "  client got {:?}: {:?}",
            rejected.code(),
            rejected.message()
        );

        report::section("org id at each hop");
        let seen = |orgs: &BTreeSet<String>| orgs.iter().cloned().collect::<Vec<_>>().join(", ");
        let calls = self.options.requests * self.options.fan_out;
        report::table(
            &["hop", "org id", "how"],
            &[
                vec![
                    "client".into(),
                    self.org_id.clone(),
                    "SetOrgIdLayer stamps x-scope-orgid".into(),
                ],
                vec![
                    "gateway".into(),
                    seen(&self.gateway_orgs),
                    format!(
                        "RequireOrgIdLayer + request.org_id(), {} requests",
                        self.options.requests
                    ),
                ],
                vec![
                    "backend".into(),
                    seen(&self.backend_orgs),
                    format!("InjectOrgId into the chain, RequireOrgIdLayer, {calls} calls"),
                ],
            ],
        );

        let Some(first) = &self.first else { return };
        report::section(&format!(
            "metadata as the backend received it ({}; FIFO order, one x-shard per fork)",
            first.request_id
        ));
        const SHOWN: usize = 4;
        let mut rows = Vec::new();
        for (index, shard) in first.shards.iter().take(SHOWN).enumerate() {
            for (n, (key, value)) in shard.metadata.iter().enumerate() {
                let fork = if n == 0 {
                    format!("fork {index}")
                } else {
                    String::new()
                };
                rows.push(vec![fork, (n + 1).to_string(), key.clone(), value.clone()]);
            }
        }
        report::table(&["fork", "#", "key", "value"], &rows);
        if first.shards.len() > SHOWN {
            println!("  ({} more forks, all checked)", first.shards.len() - SHOWN);
        }
    }

    /// Prints the arena figures and checks the resets.
    pub fn arena(&self, totals: ArenaTotals) -> Result<(), CheckFailed> {
        report::section("backend arena (MonotonicArena, reset after every reply)");
        let a = self.largest;
        report::table(
            &["figure", "value"],
            &[
                vec![
                    "replies assembled / resets".into(),
                    totals.resets.to_string(),
                ],
                vec![
                    "largest reply text (bytes)".into(),
                    totals.max_reply_bytes.to_string(),
                ],
                vec![
                    "arena len, first reply (grown by doubling)".into(),
                    totals.first_len.to_string(),
                ],
                vec![
                    "arena len, last reply (reserved up front)".into(),
                    totals.last_len.to_string(),
                ],
                vec![
                    "cap (bytes, buffers kept)".into(),
                    totals.last.cap.to_string(),
                ],
                vec!["buffers".into(), totals.last.buffers.to_string()],
                vec!["peak (bytes)".into(), totals.last.peak.to_string()],
                vec!["len after last reset".into(), totals.last.len.to_string()],
            ],
        );
        let expected = (self.options.requests * self.options.fan_out) as u64;
        ensure(totals.resets == expected, || {
            format!(
                "backend reset its arena {} times, expected {expected}",
                totals.resets
            )
        })?;
        ensure(totals.max_len_after_reset == 0, || {
            format!("arena len {} after a reset", totals.max_len_after_reset)
        })?;
        ensure(
            totals.last.peak >= a.len && totals.last.cap >= a.cap,
            || {
                format!(
                    "final arena figures {:?} below those seen in replies {a:?}",
                    totals.last
                )
            },
        )
    }

    /// Every side counted what happened: N ok calls to the gateway plus
    /// the rejected one, N × K ok calls to the backend.
    pub fn stats(
        &self,
        client: &BTreeMap<String, MethodStats>,
        gateway_server: &BTreeMap<String, MethodStats>,
        gateway_client: &BTreeMap<String, MethodStats>,
    ) -> Result<(), CheckFailed> {
        let n = self.options.requests as u64;
        let k = self.options.fan_out as u64;
        for (side, methods, ok, rejected) in [
            ("client", client, n, 1),
            ("gateway server", gateway_server, n, 1),
            ("gateway->backend", gateway_client, n * k, 0),
        ] {
            let unary = methods.get("UnaryEcho").cloned().unwrap_or_default();
            let got = (
                unary.calls,
                unary.code_count(Code::Ok),
                unary.code_count(REJECTED_CODE),
            );
            ensure(got == (ok + rejected, ok, rejected), || {
                format!(
                    "{side} stats: (calls, ok, unauthenticated) = {got:?}, expected {:?}",
                    (ok + rejected, ok, rejected)
                )
            })?;
            ensure(unary.bytes_in > 0 && unary.bytes_out > 0, || {
                format!("{side} stats: no payload bytes counted")
            })?;
        }
        Ok(())
    }
}
