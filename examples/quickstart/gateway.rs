//! The gateway: reads the validated org id, builds an outgoing metadata
//! chain in middleware-like steps, forks it once per shard, fans the calls
//! out to the backend concurrently and merges the answers.

use std::time::Duration;

use tokio::task::JoinSet;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};
use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataExt};
use tonic_hotpath::tenant::{InjectOrgId, OrgId};

use crate::echo::{EchoRequest, EchoResponse};
use crate::{BackendClient, wire};

/// Budget for the backend calls when the client sent no deadline.
const DEFAULT_BUDGET: Duration = Duration::from_secs(1);
/// Time the gateway keeps for itself out of the client's deadline.
const GATEWAY_RESERVE: Duration = Duration::from_millis(50);

/// The gateway service.
#[derive(Debug)]
pub struct Gateway {
    backend: BackendClient,
    fan_out: usize,
}

fn metadata_error(
    step: &'static str,
) -> impl FnOnce(tonic_hotpath::metadata::MetadataError) -> Status {
    move |error| Status::internal(format!("gateway {step}: {error}"))
}

/// Parses a `grpc-timeout` value (`<digits><unit>`, unit one of `HMSmun`).
pub fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// What is left of the caller's deadline for the backend calls.
fn deadline_budget(incoming: &MetadataMap) -> Duration {
    incoming
        .get("grpc-timeout")
        .and_then(|value| value.to_str().ok())
        .and_then(parse_grpc_timeout)
        .map_or(DEFAULT_BUDGET, |timeout| {
            timeout.saturating_sub(GATEWAY_RESERVE)
        })
}

impl Gateway {
    /// A gateway fanning each request out to `fan_out` backend calls.
    pub fn new(backend: BackendClient, fan_out: usize) -> Self {
        Gateway { backend, fan_out }
    }

    /// The outgoing chain for one request, built step by step as a stack
    /// of middleware would: each step appends in O(1), earlier handles stay
    /// valid.
    fn outgoing_chain(
        incoming: &MetadataMap,
        org_id: &OrgId,
        request_id: &str,
        budget: Duration,
    ) -> Result<OutgoingMetadata, Status> {
        // 1. Request id, propagated.
        let mut chain = OutgoingMetadata::new()
            .append("x-request-id", request_id)
            .map_err(metadata_error("request id"))?;
        // 2. Caller trail: the hops so far, then this one (a repeated key,
        //    kept in FIFO order).
        for hop in incoming.get_all("x-hop").iter() {
            let hop = hop
                .to_str()
                .map_err(|_| Status::invalid_argument("x-hop is not text"))?;
            chain = chain
                .append("x-hop", hop)
                .map_err(metadata_error("caller"))?;
        }
        chain = chain
            .append_static("x-hop", "gateway")
            .map_err(metadata_error("caller"))?;
        // 3. Deadline budget for the backend.
        chain = chain
            .append("x-deadline-budget-ms", &budget.as_millis().to_string())
            .map_err(metadata_error("deadline"))?;
        // 4. An auth-ish key, binary, sent base64-encoded.
        let key = format!("gw-key:{org_id}");
        chain = chain
            .append_bin("x-gateway-key-bin", key.as_bytes())
            .map_err(metadata_error("auth key"))?;
        // 5. The tenant, injected with Cortex's rules.
        chain.inject_org_id(org_id)?;
        Ok(chain)
    }

    /// Handles one call for `org_id`.
    pub async fn unary(
        &self,
        org_id: OrgId,
        request: Request<EchoRequest>,
    ) -> Result<Response<EchoResponse>, Status> {
        let incoming = request.metadata();
        let request_id = incoming
            .get("x-request-id")
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| Status::invalid_argument("gateway: missing x-request-id"))?
            .to_owned();
        let budget = deadline_budget(incoming);
        let chain = Self::outgoing_chain(incoming, &org_id, &request_id, budget)?;

        // Fan out: one fork per shard, each with its own x-shard.
        let mut calls = JoinSet::new();
        for shard in 0..self.fan_out {
            let fork = chain
                .append("x-shard", &shard.to_string())
                .map_err(metadata_error("shard"))?;
            let mut call = Request::new(EchoRequest {
                message: format!("{}#{shard}", request.get_ref().message),
            });
            call.set_outgoing_metadata(fork);
            call.set_timeout(budget);
            let mut backend = self.backend.clone();
            calls.spawn(async move { (shard, backend.unary_echo(call).await) });
        }
        let mut answers = vec![String::new(); self.fan_out];
        while let Some(joined) = calls.join_next().await {
            let (shard, answer) = joined
                .map_err(|e| Status::internal(format!("gateway: backend call task failed: {e}")))?;
            let answer = answer.map_err(|status| {
                Status::new(
                    status.code(),
                    format!("backend shard {shard}: {}", status.message()),
                )
            })?;
            answers[shard] = answer.into_inner().message;
        }
        let message = wire::gateway_reply(org_id.as_str(), &request_id, &answers);
        Ok(Response::new(EchoResponse { message }))
    }
}
