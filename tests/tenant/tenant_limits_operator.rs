//! The operator's stack (`CombinedLayer::server()` with `OtelMetrics`,
//! channelz's `ServerEntry` and a `BinaryLog`, then `RequireOrgIdLayer`
//! and `TenantLimitLayer` at 10⁹ calls/s and 10⁶ in flight, limits no run
//! here can reach) refuses no call, from 1 to 16 client threads, for one
//! tenant and for many.
//!
//! The scale bench saw this stack answer a health check
//! `RESOURCE_EXHAUSTED` at 2 threads: a call's clock reading went stale
//! while its thread was preempted before the rate bucket's
//! compare-and-swap, and the bucket judged it against the TAT the other
//! threads had moved on meanwhile (more than the 1 ms tolerance). More
//! threads than cores preempt threads at any instruction, that one among
//! them: before the fix, the in-process run here failed so.
use std::collections::BTreeMap;
use std::sync::Barrier;

use http::HeaderValue;
use tonic::Code;
use tonic_hotpath::otel::OtelMetrics;
use tonic_hotpath::tenant::OrgId;

use support::limits::operator::{OperatorStack, generous_limits, log_leaving_out, operator_stack};
use support::limits::{call, client, serve};
use support::otel::Sdk;
use support::stats_harness::{
    UNARY_PATH, call_in_process, current_thread_runtime, layered_echo_routes, unary_body,
    unary_request,
};

/// Client threads (or tasks), in the order run: at 4 and more, more
/// threads than a CI machine's 2 cores, each preempted wherever it is.
const THREADS: [usize; 5] = [1, 2, 4, 8, 16];

/// In-process calls, all runs together (each thread count, one tenant and
/// many, gets a tenth), unless [`CALLS_ENV`] says otherwise: the issue's
/// 10⁶. A debug build makes about 13 000 calls a second through this
/// stack on one core: about 100 s of CPU, 80 s on a 2-core machine. (With
/// 10⁵ the test failed every time before the fix, 5 runs of 5, 20 to 50
/// calls refused.)
const CALLS: u64 = 1_000_000;

/// Sets the in-process calls (a multiple of 160, for whole shares), e.g.
/// `OPERATOR_CALLS=100000` for a quicker run.
const CALLS_ENV: &str = "OPERATOR_CALLS";

/// Calls over TCP, all runs together.
const TCP_CALLS: u64 = 10_000;

/// The tenants of the many-tenant runs; thread `t` starts at tenant
/// `97 t` and goes round them.
const TENANTS: usize = 1_024;

/// The stack's `OtelMetrics`, recording the echo method by name.
fn metrics(sdk: &Sdk) -> OtelMetrics {
    sdk.metrics()
        .with_method(UNARY_PATH)
        .build()
        .expect("valid method path")
}

/// The operator's stack, its log leaving the echo method out (as an
/// operator logs other services), its limits [`generous_limits`].
fn stack(sdk: &Sdk) -> OperatorStack {
    operator_stack(metrics(sdk), log_leaving_out(UNARY_PATH), generous_limits())
}

/// The org ids: `team-a` alone, or the [`TENANTS`].
fn org_ids(many: bool) -> Vec<HeaderValue> {
    if many {
        (0..TENANTS)
            .map(|i| HeaderValue::from_str(&format!("tenant-{i:04}")).expect("valid value"))
            .collect()
    } else {
        vec![HeaderValue::from_static("team-a")]
    }
}

/// What one run's calls were answered: calls by gRPC status code.
type Answers = BTreeMap<i32, u64>;

/// Fails naming every run with a call not answered OK.
fn assert_all_ok(runs: &[(String, u64, Answers)]) {
    let failed: Vec<String> = runs
        .iter()
        .filter(|(_, _, answers)| answers.keys().any(|&code| code != Code::Ok as i32))
        .map(|(run, calls, answers)| {
            let codes: Vec<String> = answers
                .iter()
                .map(|(&code, n)| format!("{n} × {:?}", Code::from_i32(code)))
                .collect();
            format!("{run}: {calls} calls answered {}", codes.join(", "))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "calls refused under limits they cannot reach:\n{}",
        failed.join("\n")
    );
}

/// [`CALLS`] in process through the real stack (tonic's `Routes`, the
/// echo service, each response body driven to its trailers), `THREADS`
/// OS threads each on its own current-thread runtime (as the scale bench
/// drives it), one tenant, then many: every call answered OK, and every
/// in-flight place given back.
#[test]
fn the_operator_stack_refuses_no_call_under_limits_it_cannot_reach() {
    let sdk = Sdk::exporting_on_demand();
    let limits = generous_limits();
    let handle = limits.handle();
    let service = layered_echo_routes(operator_stack(
        metrics(&sdk),
        log_leaving_out(UNARY_PATH),
        limits,
    ));
    let calls = std::env::var(CALLS_ENV).map_or(CALLS, |calls| {
        calls
            .parse()
            .unwrap_or_else(|_| panic!("{CALLS_ENV}={calls}: not a count"))
    });
    assert_eq!(calls % 160, 0, "{CALLS_ENV}={calls}: not a multiple of 160");
    let per_run = calls / (THREADS.len() as u64 * 2);
    let body = unary_body("hi");
    let mut runs = Vec::new();
    for threads in THREADS {
        for many in [false, true] {
            let org_ids = org_ids(many);
            let per_thread = per_run / threads as u64;
            let start = Barrier::new(threads);
            let answers = std::thread::scope(|scope| {
                let callers: Vec<_> = (0..threads)
                    .map(|t| {
                        let (service, body, org_ids, start) = (&service, &body, &org_ids, &start);
                        scope.spawn(move || {
                            let runtime = current_thread_runtime();
                            start.wait();
                            runtime.block_on(async {
                                let mut answers = Answers::new();
                                for i in 0..per_thread as usize {
                                    let mut request = unary_request(body);
                                    let org_id = &org_ids[(97 * t + i) % org_ids.len()];
                                    request.headers_mut().insert(OrgId::HEADER, org_id.clone());
                                    let status = call_in_process(service, request).await;
                                    *answers.entry(status.unwrap_or(-1)).or_default() += 1;
                                }
                                answers
                            })
                        })
                    })
                    .collect();
                let mut answers = Answers::new();
                for caller in callers {
                    for (code, n) in caller.join().expect("calling thread") {
                        *answers.entry(code).or_default() += n;
                    }
                }
                answers
            });
            let tenants = if many { "many tenants" } else { "one tenant" };
            runs.push((
                format!("{threads} thread(s), {tenants}"),
                per_thread * threads as u64,
                answers,
            ));
        }
    }
    assert_eq!(runs.iter().map(|(_, made, _)| made).sum::<u64>(), calls);
    assert_all_ok(&runs);
    assert_eq!(
        handle.in_flight("team-a"),
        Some(0),
        "every place given back"
    );
}

/// The same over real tonic on 127.0.0.1 (HTTP/2, a connection per
/// caller), fewer calls: `THREADS` tasks on a 4-worker runtime, one
/// tenant, then many: every call answered OK.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_tcp_the_operator_stack_refuses_no_call_under_limits_it_cannot_reach() {
    let sdk = Sdk::exporting_on_demand();
    let (addr, _gate) = serve(stack(&sdk)).await;
    let per_run = TCP_CALLS / (THREADS.len() as u64 * 2);
    let mut runs = Vec::new();
    for threads in THREADS {
        for many in [false, true] {
            let org_ids: Vec<String> = org_ids(many)
                .iter()
                .map(|id| id.to_str().expect("ascii").to_owned())
                .collect();
            let per_task = per_run / threads as u64;
            let mut tasks = Vec::new();
            for t in 0..threads {
                let client = client(addr).await;
                let org_ids = org_ids.clone();
                tasks.push(tokio::spawn(async move {
                    let mut answers = Answers::new();
                    for i in 0..per_task as usize {
                        let org_id = &org_ids[(97 * t + i) % org_ids.len()];
                        let (code, _) = call(&client, Some(org_id), "hi").await;
                        *answers.entry(code as i32).or_default() += 1;
                    }
                    answers
                }));
            }
            let mut answers = Answers::new();
            for task in tasks {
                for (code, n) in task.await.expect("calling task") {
                    *answers.entry(code).or_default() += n;
                }
            }
            let tenants = if many { "many tenants" } else { "one tenant" };
            runs.push((
                format!("{threads} task(s) over TCP, {tenants}"),
                per_task * threads as u64,
                answers,
            ));
        }
    }
    assert_all_ok(&runs);
}
