//! Allocations `OtelMetrics` makes per RPC, from the per-thread counting
//! allocator: the handler's own (with OpenTelemetry's no-op meter
//! provider: zero) beside the SDK's (with a real `SdkMeterProvider`: bound
//! instruments with the feature `otel-bound-instruments`, and attribute
//! sets through a `dyn MeterProvider`), by driving the handler directly
//! and on the server stack in process. Run with `--nocapture` to see the
//! figures.

use support::stats_harness;

use http::HeaderValue;
use opentelemetry::metrics::{MeterProvider, NoopMeterProvider};
use opentelemetry_sdk::metrics::InMemoryMetricExporter;
use stats_harness::{
    Noop, UNARY_PATH, allocations_per_call, allocations_per_in_process_rpc, call_in_process,
    current_thread_runtime, layered_echo_routes, unary_body, unary_request,
};
use std::time::Instant;
use support::otel::{drive_rpc, drive_rpc_with_headers, org_id_headers, sdk_provider};

use tonic::Code;
use tonic_hotpath::otel::{OtelMetrics, TenantAttribute};
use tonic_hotpath::stats::{CombinedLayer, End, RpcEvent, RpcInfo, Side, StatsHandler};

const RPCS: u64 = 200;

/// Allocations per RPC of `method` through `handler`, alternating two
/// status codes, counted after a warm-up (the SDK builds an attribute
/// set's aggregation on its first use).
fn per_rpc(rt: &tokio::runtime::Runtime, handler: &OtelMetrics, side: Side, method: &str) -> f64 {
    let mut i = 0_u64;
    rt.block_on(allocations_per_call(RPCS, || {
        i += 1;
        let code = if i.is_multiple_of(2) {
            Code::Ok
        } else {
            Code::NotFound
        };
        drive_rpc(handler, side, method, code);
        std::future::ready(())
    }))
}

/// A registered method, one learned through its service, one accepted by
/// the filter, and one recorded as `other`.
const METHODS: [&str; 4] = [
    "/pkg.Registered/Method",
    "/pkg.Service/Learned",
    "/filtered.Service/Method",
    "/unknown.Service/Method",
];

fn metrics<P: MeterProvider + ?Sized>(provider: &P) -> OtelMetrics {
    OtelMetrics::builder(provider)
        .with_method(METHODS[0])
        .with_service("pkg.Service")
        .with_method_filter(|path: &str| path.starts_with("/filtered."))
        .with_target("dns:///example.com:443")
        .build()
        .expect("valid names")
}

#[test]
fn otel_handler_allocates_nothing_per_rpc() {
    let rt = current_thread_runtime();
    let noop = metrics(&NoopMeterProvider::new());
    let provider = sdk_provider(InMemoryMetricExporter::default());
    let with_sdk = metrics(&provider);
    let binds = cfg!(feature = "otel-bound-instruments");
    assert!(format!("{with_sdk:?}").contains(&format!("bound_instruments: {binds}")));
    // Not known to bind: attribute sets.
    let fallback = metrics(&provider as &dyn MeterProvider);
    assert!(format!("{fallback:?}").contains("bound_instruments: false"));
    // The counter is live: building a handler (its attribute sets) allocates.
    let build = rt.block_on(allocations_per_call(5, || {
        drop(metrics(&NoopMeterProvider::new()));
        std::future::ready(())
    }));
    assert!(build > 0.0, "building a handler allocates ({build})");
    for side in [Side::Server, Side::Client] {
        for method in METHODS {
            let own = per_rpc(&rt, &noop, side, method);
            let sdk = per_rpc(&rt, &with_sdk, side, method);
            let sdk_fallback = per_rpc(&rt, &fallback, side, method);
            println!(
                "allocations/rpc {side:?} {method:<26} handler (no-op provider) {own:.2}, with the SDK {sdk:.2} (bound instruments: {binds}), through dyn MeterProvider {sdk_fallback:.2}"
            );
            assert_eq!(own, 0.0, "{side:?} {method}: the handler's own allocations");
            assert_eq!(
                sdk, 0.0,
                "{side:?} {method}: the SDK records into existing attribute sets without allocating"
            );
            assert_eq!(sdk_fallback, 0.0, "{side:?} {method}: dyn MeterProvider");
        }
    }
}

#[test]
fn otel_server_stack_adds_no_allocation_per_rpc() {
    let rt = current_thread_runtime();
    let provider = sdk_provider(InMemoryMetricExporter::default());
    let registered = OtelMetrics::builder(&provider)
        .with_method(UNARY_PATH)
        .build()
        .expect("valid name");
    let other = OtelMetrics::builder(&provider).build().expect("no names");
    let noop_handler = rt.block_on(allocations_per_in_process_rpc(
        &layered_echo_routes(CombinedLayer::server().with(Noop)),
        RPCS,
    ));
    let registered = rt.block_on(allocations_per_in_process_rpc(
        &layered_echo_routes(CombinedLayer::server().with(registered)),
        RPCS,
    ));
    let other = rt.block_on(allocations_per_in_process_rpc(
        &layered_echo_routes(CombinedLayer::server().with(other)),
        RPCS,
    ));
    println!(
        "in-process server allocations/rpc: no-op handler {noop_handler}, OtelMetrics + SDK {registered} (registered method), {other} (other)"
    );
    assert_eq!(registered, noop_handler);
    assert_eq!(other, noop_handler);
}

/// A server RPC to `method` that neither reads a message nor sends
/// response headers (as tonic answers a made-up method: trailers-only
/// `UNIMPLEMENTED`).
fn unanswered_server_rpc(handler: &OtelMetrics, method: &str) {
    let info = RpcInfo::new(Side::Server, method);
    let mut state = handler.tag_rpc(&info, None);
    let begin = Instant::now();
    handler.handle_rpc(&mut state, &RpcEvent::Begin { time: begin });
    let end = End::new(Code::Unimplemented, begin, Instant::now());
    handler.handle_rpc(&mut state, &RpcEvent::End(end));
}

#[test]
fn otel_unproven_server_rpcs_allocate_nothing_and_leave_nothing() {
    let rt = current_thread_runtime();
    let provider = sdk_provider(InMemoryMetricExporter::default());
    let long = format!("/pkg.Service/{}", "x".repeat(100));
    for handler in [metrics(&NoopMeterProvider::new()), metrics(&provider)] {
        let mut i = 0_u64;
        let per_rpc = |method: &str| {
            rt.block_on(allocations_per_call(RPCS, || {
                unanswered_server_rpc(&handler, method);
                std::future::ready(())
            }))
        };
        // A made-up method under the registered service: its path is kept
        // in the RPC's state, inline.
        assert_eq!(per_rpc("/pkg.Service/MadeUp"), 0.0);
        // Paths over 94 bytes are copied to the heap.
        assert_eq!(per_rpc(&long), 1.0);
        // Different names every time: still nothing kept.
        let fresh = rt.block_on(allocations_per_call(RPCS, || {
            i += 1;
            let method = format!("/pkg.Service/MadeUp{i}");
            unanswered_server_rpc(&handler, &method);
            std::future::ready(())
        }));
        assert_eq!(fresh, 1.0, "the test's own format! only");
        assert!(
            format!("{handler:?}").contains("learned_methods: 0,"),
            "{handler:?}"
        );
    }
}

/// [`metrics`] with the tenant attribute: `team-a` named (allow-listed,
/// or learned as the first seen).
fn tenant_metrics<P: MeterProvider + ?Sized>(
    provider: &P,
    tenants: TenantAttribute,
) -> OtelMetrics {
    OtelMetrics::builder(provider)
        .with_method(METHODS[0])
        .with_service("pkg.Service")
        .with_method_filter(|path: &str| path.starts_with("/filtered."))
        .with_target("dns:///example.com:443")
        .with_tenant_attribute(tenants)
        .build()
        .expect("valid names")
}

#[test]
fn otel_tenant_attribute_allocates_nothing_per_rpc() {
    let rt = current_thread_runtime();
    let provider = sdk_provider(InMemoryMetricExporter::default());
    let noop = NoopMeterProvider::new();
    let guards = || {
        [
            ("allow-list", TenantAttribute::allow_list(["team-a"])),
            ("first seen", TenantAttribute::first_seen(1)),
        ]
    };
    // A named tenant, one recorded as `other`, a federated id, none.
    let tenants = [Some("team-a"), Some("team-z"), Some("team-a|team-b"), None];
    for ((guard, with_sdk), fallback) in guards().into_iter().zip(guards()).zip(guards()) {
        let handlers = [
            tenant_metrics(&noop, guard.1),
            tenant_metrics(&provider, with_sdk.1),
            tenant_metrics(&provider as &dyn MeterProvider, fallback.1),
        ];
        for side in [Side::Server, Side::Client] {
            for method in METHODS {
                for tenant in tenants {
                    let headers = org_id_headers(tenant);
                    let which = ["handler", "with the SDK", "through dyn MeterProvider"];
                    for (handler, which) in handlers.iter().zip(which) {
                        let mut i = 0_u64;
                        let per_rpc = rt.block_on(allocations_per_call(RPCS, || {
                            i += 1;
                            let code = if i.is_multiple_of(2) {
                                Code::Ok
                            } else {
                                Code::NotFound
                            };
                            drive_rpc_with_headers(handler, side, method, &headers, code);
                            std::future::ready(())
                        }));
                        println!(
                            "allocations/rpc {} {side:?} {method:<26} {tenant:<15?} {which}: {per_rpc:.2}",
                            guard.0
                        );
                        assert_eq!(
                            per_rpc, 0.0,
                            "{} {side:?} {method} {tenant:?} {which}",
                            guard.0
                        );
                    }
                }
            }
        }
    }
}

/// Allocations per in-process unary echo RPC through `routes`, each
/// request carrying `x-scope-orgid: team-a`.
fn per_rpc_with_org_id<S, B>(rt: &tokio::runtime::Runtime, routes: &S) -> f64
where
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let body = unary_body("hello");
    rt.block_on(allocations_per_call(RPCS, || {
        let mut request = unary_request(&body);
        request
            .headers_mut()
            .insert("x-scope-orgid", HeaderValue::from_static("team-a"));
        async move { assert_eq!(call_in_process(routes, request).await, Some(0)) }
    }))
}

#[test]
fn otel_tenant_server_stack_adds_no_allocation_per_rpc() {
    let rt = current_thread_runtime();
    let provider = sdk_provider(InMemoryMetricExporter::default());
    let noop_handler = per_rpc_with_org_id(
        &rt,
        &layered_echo_routes(CombinedLayer::server().with(Noop)),
    );
    for tenants in [
        TenantAttribute::allow_list(["team-a"]),
        TenantAttribute::first_seen(10),
    ] {
        let handler = OtelMetrics::builder(&provider)
            .with_method(UNARY_PATH)
            .with_tenant_attribute(tenants)
            .build()
            .expect("valid name");
        let with_tenant = per_rpc_with_org_id(
            &rt,
            &layered_echo_routes(CombinedLayer::server().with(handler)),
        );
        println!(
            "in-process server allocations/rpc: no-op handler {noop_handler}, OtelMetrics + tenant + SDK {with_tenant}"
        );
        assert_eq!(with_tenant, noop_handler);
    }
}
