//! `LimitMetrics` (feature `otel`): `TenantLimitLayer`'s refusals on a
//! real tonic server on 127.0.0.1, counted by tenant and reason in the
//! OpenTelemetry SDK, the tenant attribute under its cardinality guard.

use support::limits::{call, client, serve};
use support::otel::Sdk;
use tonic::Code;
use tonic_hotpath::limits::{LimitMetrics, Limits, Rate, TenantLabels, TenantLimitLayer};
use tonic_hotpath::tenant::OrgId;

#[tokio::test]
async fn refusals_are_counted_by_tenant_and_reason_with_the_first_tenants_named() {
    let sdk = Sdk::new();
    let layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(0))
        .with_override(
            OrgId::new("paced").expect("id"),
            Limits::unlimited().with_rate(Rate::new(0.001, 1).expect("rate")),
        )
        .observer(LimitMetrics::new(
            sdk.provider(),
            TenantLabels::first_seen(2),
        ));
    let (addr, _gate) = serve(layer).await;
    let client = client(addr).await;

    let calls = [("a", 3), ("paced", 4), ("b", 1), ("c", 2), ("d", 5)];
    for (tenant, n) in calls {
        for _ in 0..n {
            let _ = call(&client, Some(tenant), "hi").await;
        }
    }
    assert_eq!(call(&client, None, "hi").await.0, Code::Ok);

    let counts = sdk.counts(LimitMetrics::REJECTIONS);
    let expected = [
        (("a", "in_flight_limited"), 3),
        (("other", "in_flight_limited"), 1 + 2 + 5),
        (("paced", "rate_limited"), 3),
    ];
    let got: Vec<((String, String), u64)> = counts
        .into_iter()
        .map(|(attrs, n)| {
            (
                (
                    attrs[LimitMetrics::TENANT_KEY].clone(),
                    attrs["reason"].clone(),
                ),
                n,
            )
        })
        .collect();
    let expected: Vec<((String, String), u64)> = expected
        .into_iter()
        .map(|((tenant, reason), n)| ((tenant.into(), reason.into()), n))
        .collect();
    assert_eq!(got, expected);
    let exported = sdk.export();
    let counter = &exported[LimitMetrics::REJECTIONS];
    assert_eq!(counter.unit, "{call}");
    assert_eq!(counter.scope.0, "tonic-hotpath");
}

#[tokio::test]
async fn an_allow_list_names_only_its_tenants() {
    let sdk = Sdk::new();
    let allowed = [OrgId::new("vip").expect("id")];
    let layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(0)).observer(
        LimitMetrics::new(sdk.provider(), TenantLabels::allow_list(allowed)),
    );
    let (addr, _gate) = serve(layer).await;
    let client = client(addr).await;
    for tenant in ["first", "vip", "second"] {
        assert_eq!(
            call(&client, Some(tenant), "hi").await.0,
            Code::ResourceExhausted
        );
    }
    let tenants: Vec<(String, u64)> = sdk
        .counts(LimitMetrics::REJECTIONS)
        .into_iter()
        .map(|(attrs, n)| (attrs[LimitMetrics::TENANT_KEY].clone(), n))
        .collect();
    assert_eq!(tenants, [("other".to_owned(), 2), ("vip".to_owned(), 1)]);
}
