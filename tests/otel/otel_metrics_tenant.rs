//! `OtelMetrics`' opt-in tenant attribute (`grpc.tenant`, from
//! `x-scope-orgid`): an allow-list and the first K tenants seen, on a real
//! tonic server and client over 127.0.0.1 read back from the SDK's
//! in-memory exporter; the values for missing, invalid and federated ids;
//! the method-proof rule with tenants; and 100 000 hostile ids driven
//! through the handler in process.

use std::collections::BTreeMap;

use support::otel::{
    Point, Sdk, drive_rpc_with_headers, drive_unanswered_server_rpc, org_id_headers,
};
use support::{EchoClient, EchoRequest, EchoServer, EchoService, wait_until};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request};
use tonic_hotpath::otel::{OtelMetrics, OtelMetricsBuilder, TenantAttribute};
use tonic_hotpath::stats::{CombinedLayer, CombinedService, Side};

const SERVICE: &str = "hotpath.echo.Echo";
const UNARY: &str = "hotpath.echo.Echo/UnaryEcho";
const UNARY_PATH: &str = "/hotpath.echo.Echo/UnaryEcho";
const TENANT: &str = "grpc.tenant";

/// Every instrument of each side.
const SERVER: [&str; 4] = [
    "grpc.server.call.started",
    "grpc.server.call.duration",
    "grpc.server.call.sent_total_compressed_message_size",
    "grpc.server.call.rcvd_total_compressed_message_size",
];
const CLIENT: [&str; 5] = [
    "grpc.client.attempt.started",
    "grpc.client.attempt.duration",
    "grpc.client.attempt.sent_total_compressed_message_size",
    "grpc.client.attempt.rcvd_total_compressed_message_size",
    "grpc.client.call.duration",
];

type Client = EchoClient<CombinedService<Channel, OtelMetrics, tonic_hotpath::stats::ClientSide>>;

/// The echo service with `server` metrics on 127.0.0.1, and a client with
/// `client` metrics; both learn the echo methods through their service,
/// so the server's method-proof rule runs beside the tenant's.
async fn pair(sdk: &Sdk, server: TenantAttribute, client: TenantAttribute) -> Client {
    let metrics = |tenants| -> OtelMetricsBuilder {
        sdk.metrics()
            .with_service(SERVICE)
            .with_tenant_attribute(tenants)
    };
    let layer = CombinedLayer::server().with(metrics(server).build().expect("server metrics"));
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    let client = metrics(client)
        .with_target("echo")
        .build()
        .expect("client metrics");
    let layered = tower::ServiceBuilder::new()
        .layer(CombinedLayer::client().with(client))
        .service(support::connect(addr).await);
    EchoClient::new(layered)
}

/// One unary call with `x-scope-orgid: org_id` (none for `None`), as the
/// application (or `SetOrgIdLayer`, outside the stats layer) sets it.
async fn call(client: &mut Client, org_id: Option<&str>) {
    let mut request = Request::new(EchoRequest {
        message: "hello".to_owned(),
    });
    if let Some(org_id) = org_id {
        let value = MetadataValue::try_from(org_id).expect("a header value");
        request.metadata_mut().insert("x-scope-orgid", value);
    }
    client.unary_echo(request).await.expect("unary call");
}

/// Waits until both sides recorded `n` call durations.
async fn wait_for_ends(sdk: &Sdk, n: u64) {
    wait_until("every RPC ended on both sides", || {
        let total = |name: &str| sdk.counts(name).iter().map(|(_, n)| n).sum::<u64>();
        total("grpc.server.call.duration") == n && total("grpc.client.call.duration") == n
    })
    .await;
}

/// Counts by tenant value, from `(value, count)` pairs.
fn by_tenant(pairs: &[(&str, u64)]) -> BTreeMap<Option<String>, u64> {
    pairs
        .iter()
        .map(|(value, count)| (Some((*value).to_owned()), *count))
        .collect()
}

#[tokio::test]
async fn otel_tenant_allow_list_names_listed_tenants_and_documents_the_rest() {
    let sdk = Sdk::new();
    let allowed = || TenantAttribute::allow_list(["team-a", "team-b"]);
    let mut client = pair(&sdk, allowed(), allowed()).await;
    for org_id in [
        Some("team-a"),
        Some("team-a"),
        Some("team-b"),
        Some("team-c"),        // valid, not listed
        Some("team-a|team-b"), // federated
        None,                  // missing
        Some("team a"),        // invalid: a space
        Some(".."),            // invalid: a dot segment
    ] {
        call(&mut client, org_id).await;
    }
    wait_for_ends(&sdk, 8).await;
    let expected = by_tenant(&[("team-a", 2), ("team-b", 1), ("other", 2), ("", 3)]);
    for name in SERVER.iter().chain(&CLIENT) {
        assert_eq!(sdk.counts_by(name, TENANT), expected, "{name}");
    }
    // The tenant sits beside A66's attributes, on each side.
    assert_eq!(
        sdk.point(
            "grpc.server.call.started",
            &[("grpc.method", UNARY), (TENANT, "team-a")]
        ),
        Some(Point::Counter(2))
    );
    assert_eq!(
        sdk.point(
            "grpc.client.attempt.started",
            &[
                ("grpc.method", UNARY),
                (TENANT, "team-a"),
                ("grpc.target", "echo")
            ]
        ),
        Some(Point::Counter(2))
    );
    let (count, _, _) = support::otel::histogram(sdk.point(
        "grpc.server.call.duration",
        &[
            ("grpc.method", UNARY),
            ("grpc.status", "OK"),
            (TENANT, "other"),
        ],
    ));
    assert_eq!(count, 2);
    let (count, _, _) = support::otel::histogram(sdk.point(
        "grpc.client.call.duration",
        &[
            ("grpc.method", UNARY),
            ("grpc.status", "OK"),
            (TENANT, ""),
            ("grpc.target", "echo"),
        ],
    ));
    assert_eq!(count, 3);
}

#[tokio::test]
async fn otel_tenant_first_seen_names_the_first_k_and_counts_exactly() {
    let sdk = Sdk::new();
    let mut client = pair(
        &sdk,
        TenantAttribute::first_seen(2),
        TenantAttribute::first_seen(2),
    )
    .await;
    let order = ["t1", "t2", "t3", "t1", "t3", "t2", "t4", "t1"];
    for org_id in order {
        call(&mut client, Some(org_id)).await;
    }
    wait_for_ends(&sdk, 8).await;
    let expected = by_tenant(&[("t1", 3), ("t2", 2), ("other", 3)]);
    for name in SERVER.iter().chain(&CLIENT) {
        assert_eq!(sdk.counts_by(name, TENANT), expected, "{name}");
    }
}

#[tokio::test]
async fn otel_tenant_key_can_be_renamed() {
    let sdk = Sdk::new();
    let user = || TenantAttribute::allow_list(["team-a"]).with_key("user");
    let mut client = pair(&sdk, user(), user()).await;
    call(&mut client, Some("team-a")).await;
    wait_for_ends(&sdk, 1).await;
    for name in SERVER.iter().chain(&CLIENT) {
        assert_eq!(
            sdk.counts_by(name, "user"),
            by_tenant(&[("team-a", 1)]),
            "{name}"
        );
        assert_eq!(sdk.counts_by(name, TENANT).keys().next(), Some(&None));
    }
}

#[tokio::test]
async fn otel_tenant_attribute_off_records_no_tenant() {
    let sdk = Sdk::new();
    let layer = CombinedLayer::server().with(sdk.metrics().with_service(SERVICE).build().unwrap());
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    let metrics = sdk.metrics().with_service(SERVICE).build().unwrap();
    let layered = tower::ServiceBuilder::new()
        .layer(CombinedLayer::client().with(metrics))
        .service(support::connect(addr).await);
    let mut client = EchoClient::new(layered);
    call(&mut client, Some("team-a")).await;
    call(&mut client, None).await;
    wait_for_ends(&sdk, 2).await;
    let export = sdk.export();
    assert_eq!(export.len(), SERVER.len() + CLIENT.len());
    for (name, exported) in &export {
        for attrs in exported.points.keys() {
            assert!(
                attrs
                    .keys()
                    .all(|key| key.starts_with("grpc.") && key != TENANT),
                "{name}: {attrs:?}"
            );
        }
    }
    assert_eq!(
        sdk.point("grpc.server.call.started", &[("grpc.method", UNARY)]),
        Some(Point::Counter(2))
    );
}

// ---- in process: the handler driven with the layer's events ----

fn handler(sdk: &Sdk, tenants: TenantAttribute) -> OtelMetrics {
    sdk.metrics()
        .with_method(UNARY_PATH)
        .with_service("pkg.Learned")
        .with_tenant_attribute(tenants)
        .build()
        .expect("valid names")
}

/// How many tenants `handler` records by name, from its `Debug`.
fn named_tenants(handler: &OtelMetrics) -> usize {
    let debug = format!("{handler:?}");
    let (_, rest) = debug
        .split_once("named_tenants: ")
        .unwrap_or_else(|| panic!("{debug}"));
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{debug}"))
}

#[test]
fn otel_tenant_first_seen_server_learns_tenants_only_from_served_rpcs() {
    let sdk = Sdk::new();
    let metrics = handler(&sdk, TenantAttribute::first_seen(3));
    let served = |org_id: &str| {
        let headers = org_id_headers(Some(org_id));
        drive_rpc_with_headers(&metrics, Side::Server, UNARY_PATH, &headers, Code::Ok);
    };
    served("a");
    served("b");
    // 100 000 hostile ids, each in a call the server does not serve (a
    // made-up method answered trailers-only): nothing learned, nothing kept.
    for i in 0..100_000 {
        let headers = org_id_headers(Some(&format!("hostile-{i}")));
        drive_unanswered_server_rpc(&metrics, "/pkg.Learned/MadeUp", &headers);
    }
    assert_eq!(named_tenants(&metrics), 2);
    served("c");
    // 100 000 hostile ids in served calls: the table is full.
    for i in 0..100_000 {
        served(&format!("flood-{i}"));
    }
    served("a");
    assert_eq!(named_tenants(&metrics), 3, "bounded at K");
    assert_eq!(
        sdk.counts_by("grpc.server.call.started", TENANT),
        by_tenant(&[("a", 2), ("b", 1), ("c", 1), ("other", 200_000)])
    );
    // The unanswered calls: started at `End`, their method and tenant
    // both `other`.
    assert_eq!(
        sdk.point(
            "grpc.server.call.started",
            &[("grpc.method", "other"), (TENANT, "other")]
        ),
        Some(Point::Counter(100_000))
    );
    assert_eq!(
        sdk.counts_by("grpc.server.call.duration", TENANT),
        sdk.counts_by("grpc.server.call.started", TENANT)
    );
}

#[test]
fn otel_tenant_hostile_ids_leave_allow_lists_and_clients_bounded() {
    let sdk = Sdk::new();
    let listed = handler(&sdk, TenantAttribute::allow_list(["a", "b"]));
    let first = handler(&sdk, TenantAttribute::first_seen(2));
    for (metrics, side) in [(&listed, Side::Server), (&first, Side::Client)] {
        for org_id in ["a", "b"] {
            let headers = org_id_headers(Some(org_id));
            drive_rpc_with_headers(metrics, side, UNARY_PATH, &headers, Code::Ok);
        }
        for i in 0..100_000 {
            let headers = org_id_headers(Some(&format!("hostile-{i}")));
            drive_rpc_with_headers(metrics, side, UNARY_PATH, &headers, Code::Ok);
        }
        let headers = org_id_headers(Some("a"));
        drive_rpc_with_headers(metrics, side, UNARY_PATH, &headers, Code::Ok);
        assert_eq!(named_tenants(metrics), 2, "{side:?}");
    }
    let expected = by_tenant(&[("a", 2), ("b", 1), ("other", 100_000)]);
    assert_eq!(sdk.counts_by("grpc.server.call.started", TENANT), expected);
    assert_eq!(
        sdk.counts_by("grpc.client.attempt.started", TENANT),
        expected
    );
}

#[test]
fn otel_tenant_waits_for_the_method_proof_and_carries_the_tenant() {
    let sdk = Sdk::new();
    let metrics = handler(&sdk, TenantAttribute::allow_list(["a"]));
    let headers = org_id_headers(Some("a"));
    // Unproven method, known tenant: counted at `End` as `other`.
    drive_unanswered_server_rpc(&metrics, "/pkg.Learned/Method", &headers);
    // Proven by a served RPC: learned, counted under its name.
    drive_rpc_with_headers(
        &metrics,
        Side::Server,
        "/pkg.Learned/Method",
        &headers,
        Code::Ok,
    );
    let started = |method: &str| {
        sdk.point(
            "grpc.server.call.started",
            &[("grpc.method", method), (TENANT, "a")],
        )
    };
    assert_eq!(started("other"), Some(Point::Counter(1)));
    assert_eq!(started("pkg.Learned/Method"), Some(Point::Counter(1)));
    let (count, _, _) = support::otel::histogram(sdk.point(
        "grpc.server.call.duration",
        &[
            ("grpc.method", "other"),
            ("grpc.status", "UNIMPLEMENTED"),
            (TENANT, "a"),
        ],
    ));
    assert_eq!(count, 1);
}

#[test]
fn otel_tenant_first_seen_server_tenant_proven_by_another_rpc() {
    let sdk = Sdk::new();
    let metrics = handler(&sdk, TenantAttribute::first_seen(5));
    let headers = org_id_headers(Some("late"));
    // Not served: `other`; then served: learned; then not served again:
    // by name (proven meanwhile).
    drive_unanswered_server_rpc(&metrics, UNARY_PATH, &headers);
    drive_rpc_with_headers(&metrics, Side::Server, UNARY_PATH, &headers, Code::Ok);
    drive_unanswered_server_rpc(&metrics, UNARY_PATH, &headers);
    assert_eq!(
        sdk.counts_by("grpc.server.call.started", TENANT),
        by_tenant(&[("late", 2), ("other", 1)])
    );
    assert_eq!(
        sdk.point(
            "grpc.server.call.started",
            &[("grpc.method", UNARY), (TENANT, "late")]
        ),
        Some(Point::Counter(2))
    );
}
