//! `SetOrgIdLayer` with `OutgoingMetadataLayer` in either order, over a real
//! tonic client and server on 127.0.0.1: whatever the order, and whether the
//! chain rides the request or the task-local scope, the same org id reaches
//! the server once, and a different one is refused on the client and never
//! sent (issue #12, item 1). Without `OutgoingMetadataLayer` the chain is
//! never sent, so it neither counts nor travels: the stamped id is sent
//! (issue #18, item 8).
#![cfg(feature = "grpc")]

use std::sync::{Arc, Mutex};

use support::{EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer};
use tonic::body::Body;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataExt, OutgoingMetadataLayer};
use tonic_hotpath::tenant::{InjectError, InjectOrgId, OrgId, RequireOrgIdLayer, SetOrgIdLayer};
use tower::util::BoxCloneService;
use tower::{BoxError, Layer, ServiceBuilder};

/// The id the client layer stamps.
const STAMPED: &str = "stamped";

/// The `x-scope-orgid` values of every request that reached the server, in
/// arrival order (recorded before `RequireOrgIdLayer` looks at them).
type Seen = Arc<Mutex<Vec<Vec<String>>>>;

/// Answers with the org id `RequireOrgIdLayer` validated.
struct OrgIdEcho;

#[tonic::async_trait]
impl EchoOverride for OrgIdEcho {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        let org_id = tonic_hotpath::tenant::org_id(&request)
            .ok_or_else(|| Status::internal("no validated org id"))?;
        Ok(Response::new(EchoResponse {
            message: org_id.to_string(),
        }))
    }
}

/// A server that records each request's org ids, then requires exactly one
/// valid org id; returns its channel and the record.
async fn server() -> (Channel, Seen) {
    let seen = Seen::default();
    let record = seen.clone();
    let recorder = tower::util::MapRequestLayer::new(move |request: http::Request<Body>| {
        let ids = request
            .headers()
            .get_all("x-scope-orgid")
            .iter()
            .map(|value| value.to_str().unwrap_or("<not text>").to_owned())
            .collect();
        record.lock().unwrap().push(ids);
        request
    });
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        Server::builder()
            .layer(recorder)
            .layer(RequireOrgIdLayer::new())
            .add_service(EchoServer::new(OrgIdEcho))
            .serve_with_incoming(incoming),
    );
    (support::connect(addr).await, seen)
}

type Client = EchoClient<BoxCloneService<http::Request<Body>, http::Response<Body>, BoxError>>;

/// The two client layer orders, and `SetOrgIdLayer` without the metadata
/// layer.
#[derive(Debug, Clone, Copy)]
enum Order {
    /// `SetOrgIdLayer` outside `OutgoingMetadataLayer` (the README's order).
    SetOrgIdOutside,
    /// `SetOrgIdLayer` inside (below) `OutgoingMetadataLayer`.
    SetOrgIdInside,
    /// `SetOrgIdLayer` alone: no `OutgoingMetadataLayer`, so no chain is
    /// sent.
    NoMetadataLayer,
}

fn client(channel: Channel, order: Order) -> Client {
    let set = SetOrgIdLayer::new(OrgId::new(STAMPED).unwrap());
    let service = match order {
        Order::SetOrgIdOutside => BoxCloneService::new(
            ServiceBuilder::new()
                .layer(set)
                .layer(OutgoingMetadataLayer::new())
                .service(channel),
        ),
        Order::SetOrgIdInside => BoxCloneService::new(
            ServiceBuilder::new()
                .layer(OutgoingMetadataLayer::new())
                .layer(set)
                .service(channel),
        ),
        Order::NoMetadataLayer => BoxCloneService::new(set.layer(channel)),
    };
    EchoClient::new(service)
}

/// Where the chain rides.
#[derive(Debug, Clone, Copy)]
enum Carrier {
    /// Attached with `set_outgoing_metadata`.
    Request,
    /// In `OutgoingMetadata::scope`.
    Scope,
}

fn request() -> Request<EchoRequest> {
    Request::new(EchoRequest {
        message: String::new(),
    })
}

async fn call(
    client: &mut Client,
    chain: OutgoingMetadata,
    carrier: Carrier,
) -> Result<String, Status> {
    let response = match carrier {
        Carrier::Request => {
            let mut request = request();
            request.set_outgoing_metadata(chain);
            client.unary_echo(request).await
        }
        Carrier::Scope => chain.scope(client.unary_echo(request())).await,
    };
    Ok(response?.into_inner().message)
}

/// A chain of one pair, plus `org_ids` as `x-scope-orgid` pairs.
fn chain(org_ids: &[&'static str]) -> OutgoingMetadata {
    let mut chain = OutgoingMetadata::new()
        .append_static("x-request-id", "7")
        .unwrap();
    for id in org_ids {
        chain = chain.append_static("x-scope-orgid", id).unwrap();
    }
    chain
}

/// The `InjectError` a refused call carries as its status's source.
fn inject_error(status: &Status) -> InjectError {
    let source = std::error::Error::source(status).expect("the status has a source");
    source
        .downcast_ref::<InjectError>()
        .expect("the source is the InjectError")
        .clone()
}

const ORDERS: [Order; 2] = [Order::SetOrgIdOutside, Order::SetOrgIdInside];
const CARRIERS: [Carrier; 2] = [Carrier::Request, Carrier::Scope];

#[tokio::test]
async fn the_same_id_or_none_in_the_chain_reaches_the_server_once() {
    let (channel, seen) = server().await;
    for order in ORDERS {
        let mut client = client(channel.clone(), order);
        for carrier in CARRIERS {
            for ids in [&[STAMPED][..], &[]] {
                seen.lock().unwrap().clear();
                let answer = call(&mut client, chain(ids), carrier).await;
                let case = format!("{order:?}, {carrier:?}, chain ids {ids:?}");
                assert_eq!(
                    answer.map_err(|s| s.code()),
                    Ok(STAMPED.to_owned()),
                    "{case}"
                );
                assert_eq!(*seen.lock().unwrap(), [vec![STAMPED.to_owned()]], "{case}");
            }
        }
    }
}

/// A different id, or two, in the chain: `INVALID_ARGUMENT` on the client
/// with the `InjectError` as the status's source, and nothing reaches the
/// server.
#[tokio::test]
async fn a_different_id_or_two_in_the_chain_are_refused_and_never_sent() {
    let (channel, seen) = server().await;
    let different = InjectError::DifferentOrgIdPresent {
        present: "other".into(),
        injected: STAMPED.into(),
    };
    let cases: [(&[&str], InjectError); 2] = [
        (&["other"], different),
        (
            &[STAMPED, STAMPED],
            InjectError::TooManyHeaders { count: 2 },
        ),
    ];
    for order in ORDERS {
        let mut client = client(channel.clone(), order);
        for carrier in CARRIERS {
            for (ids, error) in &cases {
                seen.lock().unwrap().clear();
                let status = call(&mut client, chain(ids), carrier).await.unwrap_err();
                let case = format!("{order:?}, {carrier:?}, chain ids {ids:?}");
                assert_eq!(status.code(), Code::InvalidArgument, "{case}");
                assert_eq!(status.message(), error.to_string(), "{case}");
                assert_eq!(&inject_error(&status), error, "{case}");
                assert!(
                    seen.lock().unwrap().is_empty(),
                    "{case}: the server saw a request"
                );
            }
        }
    }
    assert_eq!(
        cases[0].1.to_string(),
        "cannot inject org id 'stamped': a different org id 'other' is already present"
    );
}

/// A chain attached to the request wins over the task's scope in both
/// layers: the scope's (different) id is neither counted nor sent.
#[tokio::test]
async fn an_attached_chain_wins_over_the_scope_in_either_order() {
    let (channel, seen) = server().await;
    for order in ORDERS {
        let mut client = client(channel.clone(), order);
        for attached in [chain(&[]), chain(&[STAMPED])] {
            seen.lock().unwrap().clear();
            let mut request = request();
            request.set_outgoing_metadata(attached);
            let answer = chain(&["other"])
                .scope(client.unary_echo(request))
                .await
                .map(|response| response.into_inner().message);
            assert_eq!(
                answer.map_err(|s| s.code()),
                Ok(STAMPED.to_owned()),
                "{order:?}"
            );
            assert_eq!(
                *seen.lock().unwrap(),
                [vec![STAMPED.to_owned()]],
                "{order:?}"
            );
        }
    }
}

/// `InjectOrgId for tonic::Request` counts the chain that will be sent with
/// the request, attached or in scope, as dskit's `InjectIntoGRPCRequest`
/// counts pairs appended to the outgoing context.
#[tokio::test]
async fn injecting_into_a_request_counts_its_chain() {
    let (channel, seen) = server().await;
    let mut client = EchoClient::new(
        ServiceBuilder::new()
            .layer(OutgoingMetadataLayer::new())
            .service(channel),
    );
    let same = OrgId::new(STAMPED).unwrap();
    let other = OrgId::new("other").unwrap();

    // Attached: the same id is not added again, a different one is refused.
    let mut attached = request();
    attached.set_outgoing_metadata(chain(&[STAMPED]));
    attached.inject_org_id(&same).unwrap();
    let refused = attached.inject_org_id(&other).unwrap_err();
    assert!(
        matches!(refused, InjectError::DifferentOrgIdPresent { .. }),
        "{refused:?}"
    );
    assert!(attached.metadata().get("x-scope-orgid").is_none());
    let answer = client
        .unary_echo(attached)
        .await
        .unwrap()
        .into_inner()
        .message;
    assert_eq!(answer, STAMPED);

    // In scope: the same.
    let scoped = chain(&[STAMPED]);
    let answer = scoped
        .scope(async {
            let mut request = request();
            request.inject_org_id(&same).unwrap();
            assert!(request.inject_org_id(&other).is_err());
            client.unary_echo(request).await
        })
        .await
        .unwrap()
        .into_inner()
        .message;
    assert_eq!(answer, STAMPED);

    // No org id in the chain: the id goes into the request's metadata.
    let mut plain = request();
    plain.set_outgoing_metadata(chain(&[]));
    plain.inject_org_id(&same).unwrap();
    assert_eq!(plain.metadata().get("x-scope-orgid").unwrap(), STAMPED);
    let answer = client.unary_echo(plain).await.unwrap().into_inner().message;
    assert_eq!(answer, STAMPED);

    let each_once = vec![vec![STAMPED.to_owned()]; 3];
    assert_eq!(*seen.lock().unwrap(), each_once);
}

/// No `OutgoingMetadataLayer`: the chain, attached or in scope, is never
/// sent, so whatever org ids it carries (the stamped one, another, both,
/// none) the call is not refused and the server receives the stamped id
/// exactly once.
#[tokio::test]
async fn without_the_metadata_layer_the_stamped_id_is_sent_whatever_the_chain_carries() {
    let (channel, seen) = server().await;
    let mut client = client(channel, Order::NoMetadataLayer);
    let chains: [&[&str]; 4] = [&[STAMPED], &["other"], &[STAMPED, "other"], &[]];
    for carrier in CARRIERS {
        for ids in chains {
            seen.lock().unwrap().clear();
            let answer = call(&mut client, chain(ids), carrier).await;
            let case = format!("{carrier:?}, chain ids {ids:?}");
            assert_eq!(
                answer.map_err(|s| s.code()),
                Ok(STAMPED.to_owned()),
                "{case}"
            );
            assert_eq!(*seen.lock().unwrap(), [vec![STAMPED.to_owned()]], "{case}");
        }
    }
}

/// Without `OutgoingMetadataLayer` the rule is still judged on what is
/// sent, the request's own metadata: the same id passes once, a different
/// one is refused on the client, whatever the chain carries.
#[tokio::test]
async fn without_the_metadata_layer_the_request_metadata_is_judged() {
    let (channel, seen) = server().await;
    let mut client = client(channel, Order::NoMetadataLayer);
    for (own, chain_ids) in [(STAMPED, &["other"][..]), (STAMPED, &[STAMPED])] {
        seen.lock().unwrap().clear();
        let mut request = request();
        request
            .metadata_mut()
            .insert("x-scope-orgid", own.parse().unwrap());
        request.set_outgoing_metadata(chain(chain_ids));
        let answer = client.unary_echo(request).await.unwrap().into_inner();
        assert_eq!(answer.message, STAMPED);
        assert_eq!(*seen.lock().unwrap(), [vec![STAMPED.to_owned()]]);
    }
    seen.lock().unwrap().clear();
    let mut request = request();
    request
        .metadata_mut()
        .insert("x-scope-orgid", "other".parse().unwrap());
    let status = chain(&[STAMPED])
        .scope(client.unary_echo(request))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        inject_error(&status),
        InjectError::DifferentOrgIdPresent {
            present: "other".into(),
            injected: STAMPED.into(),
        }
    );
    assert!(seen.lock().unwrap().is_empty(), "the server saw a request");
}

/// `SetOrgIdLayer` above `OutgoingMetadataLayer`, the request's own
/// metadata carrying the stamped id and the chain too: the claim covers
/// the header whoever set it, so the id is sent once.
#[tokio::test]
async fn above_the_metadata_layer_an_id_in_the_request_and_the_chain_is_sent_once() {
    let (channel, seen) = server().await;
    let mut client = client(channel, Order::SetOrgIdOutside);
    for carrier in CARRIERS {
        seen.lock().unwrap().clear();
        let mut own = request();
        own.metadata_mut()
            .insert("x-scope-orgid", STAMPED.parse().unwrap());
        let answer = match carrier {
            Carrier::Request => {
                own.set_outgoing_metadata(chain(&[STAMPED]));
                client.unary_echo(own).await
            }
            Carrier::Scope => chain(&[STAMPED]).scope(client.unary_echo(own)).await,
        };
        assert_eq!(answer.unwrap().into_inner().message, STAMPED, "{carrier:?}");
        assert_eq!(
            *seen.lock().unwrap(),
            [vec![STAMPED.to_owned()]],
            "{carrier:?}"
        );
    }
}
