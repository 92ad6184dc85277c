//! The overload harness of issue #46 (`support::overload`) tested itself:
//! a short open-loop run accounts for every call, a cancelled call frees
//! its slot, each contender's refusal is timed at the server and seen by
//! the client as the status the harness documents, slots resize while
//! held, and the report's arithmetic. Bounds hold on a busy 2-core
//! machine: nothing here asserts a latency or a goodput.

use std::time::Duration;

use support::limits::request;
use support::overload::{
    Capacity, Contender, LoadPlan, OverloadServer, ServiceTime, jain, percentiles, run,
};
use support::{EchoClient, wait_until};
use tonic::Code;

const SEED: u64 = 46;

fn long() -> ServiceTime {
    ServiceTime::fixed(Duration::from_secs(60))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_run_gives_every_call_exactly_one_outcome() {
    let capacity = Capacity::new(8);
    let server = OverloadServer::start(
        Contender::None,
        capacity.clone(),
        ServiceTime::ISSUE_46,
        SEED,
    )
    .await;
    let rate = 0.5 * ServiceTime::ISSUE_46.nominal_capacity(8);
    let plan = LoadPlan::new(rate, Duration::from_secs(1))
        .with_tenants([("tenant-a", 1.0), ("tenant-b", 1.0)]);
    let load = run(&server, &plan).await;

    assert!(load.issued > 0, "calls were issued");
    assert_eq!(load.records.len(), load.issued, "one record per call");
    let report = load.report();
    assert_eq!(report.overall.calls, load.issued);
    assert!(report.overall.adds_up(), "{:?}", report.overall);
    let per_tenant: usize = report.tenants.iter().map(|(_, s)| s.calls).sum();
    assert_eq!(per_tenant, load.issued, "each call is one tenant's");
    assert!(report.tenants.iter().all(|(_, s)| s.adds_up()));
    assert!(report.overall.ok > 0, "some calls completed: {report:?}");
    assert!(report.other_errors.is_empty(), "{:?}", report.other_errors);
    assert_eq!(
        report.overall.refused, 0,
        "nothing refuses without protection"
    );
    assert!(
        load.records
            .iter()
            .all(|r| r.start < plan.duration + plan.deadline)
    );
    wait_until("every slot free after the run", || capacity.busy() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_releases_its_slot() {
    let capacity = Capacity::new(1);
    let server = OverloadServer::start(Contender::None, capacity.clone(), long(), SEED).await;
    let mut client = EchoClient::new(support::connect(server.addr).await);
    let mut call = request(Some("tenant-a"), "held");
    call.set_timeout(Duration::from_millis(100));
    let status = client
        .unary_echo(call)
        .await
        .expect_err("past its deadline");
    // tonic's channel times the call by its `grpc-timeout` too, and says
    // CANCELLED "Timeout expired" when its timer wins the race.
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );

    assert_slot_freed_by_the_cancel(&capacity).await;
}

/// Without `grpc-timeout`, only the client's reset ends the call on the
/// server: hyper drops the handler future, and the slot with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_client_drops_releases_its_slot() {
    let capacity = Capacity::new(1);
    let server = OverloadServer::start(Contender::None, capacity.clone(), long(), SEED).await;
    let mut client = EchoClient::new(support::connect(server.addr).await);
    let held = tokio::spawn(async move {
        drop(client.unary_echo(request(Some("tenant-a"), "held")).await);
    });
    wait_until("the call holding the slot", || capacity.busy() == 1).await;
    held.abort();
    assert_slot_freed_by_the_cancel(&capacity).await;
}

/// The one slot's call was dropped on the server: the slot is free, its
/// time counted as cancelled.
async fn assert_slot_freed_by_the_cancel(capacity: &Capacity) {
    wait_until("the slot freed", || capacity.busy() == 0).await;
    let time = capacity.slot_time();
    assert!(time.cancelled > Duration::ZERO, "{time:?}");
    assert_eq!(time.served, Duration::ZERO);
    assert!(capacity.try_acquire().is_some(), "the one slot is free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_static_contender_refuses_with_resource_exhausted_timed_at_the_server() {
    for contender in [
        Contender::ConcurrencyLimitLoadShed { limit: 1 },
        Contender::TenantInFlight { per_tenant: 1 },
    ] {
        let capacity = Capacity::new(1);
        let server = OverloadServer::start(contender, capacity.clone(), long(), SEED).await;
        let client = EchoClient::new(support::connect(server.addr).await);
        let mut holder = client.clone();
        let held =
            tokio::spawn(async move { holder.unary_echo(request(Some("tenant-a"), "held")).await });
        wait_until("the first call holding the slot", || capacity.busy() == 1).await;

        let status = client
            .clone()
            .unary_echo(request(Some("tenant-a"), "refused"))
            .await
            .expect_err("refused");
        assert_eq!(
            status.code(),
            Code::ResourceExhausted,
            "{contender}: {status:?}"
        );
        assert!(
            !status.metadata().is_empty(),
            "{contender}: the server's answer, not the client's own error"
        );
        assert_eq!(
            server.refusals.take().len(),
            1,
            "{contender}: one refusal timed"
        );
        held.abort();
    }
}

#[test]
fn slots_resize_while_held() {
    let capacity = Capacity::new(8);
    let mut held: Vec<_> = (0..8)
        .map(|_| capacity.try_acquire().expect("a slot"))
        .collect();
    capacity.set_slots(2);
    assert_eq!(capacity.slots(), 2);
    held.truncate(1);
    assert_eq!(capacity.busy(), 1);
    held.push(capacity.try_acquire().expect("the second slot"));
    assert!(capacity.try_acquire().is_none(), "only 2 slots");

    capacity.set_slots(8);
    let more: Vec<_> = (0..6)
        .map(|_| capacity.try_acquire().expect("a slot"))
        .collect();
    assert!(capacity.try_acquire().is_none(), "8 slots, all held");
    assert_eq!(capacity.busy(), 8);
    drop((held, more));
    assert_eq!(capacity.busy(), 0);
}

#[test]
fn fairness_and_percentiles() {
    assert!((jain(&[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-9);
    assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-9);
    assert!((jain(&[]) - 1.0).abs() < 1e-9);
    let mut values: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
    let [p50, p99, max] = percentiles(&mut values, [0.5, 0.99, 1.0]);
    assert_eq!(p50, Some(Duration::from_millis(50)));
    assert_eq!(p99, Some(Duration::from_millis(99)));
    assert_eq!(max, Some(Duration::from_millis(100)));
    assert_eq!(percentiles(&mut [], [0.5]), [None]);
}
