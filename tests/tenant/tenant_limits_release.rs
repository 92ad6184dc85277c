//! `TenantLimitLayer` gives a call's in-flight place back however the
//! call ends: a client cancel, a deadline, a handler error, a response
//! stream dropped by the client; each time the tenant has its full limit
//! again. Real tonic server and client on 127.0.0.1.

use std::time::Duration;

use support::limits::{
    FAIL, Gate, HOLD, NEVER, burst, call, client, count, outcomes, serve, wait_for,
};
use tonic::Code;
use tonic::transport::Channel;
use tonic_hotpath::limits::{Limits, LimitsHandle, TenantLimitLayer};

use support::EchoClient;

const LIMIT: u32 = 2;

async fn limited() -> (EchoClient<Channel>, LimitsHandle, Gate) {
    let layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(LIMIT));
    let handle = layer.handle();
    let (addr, gate) = serve(layer).await;
    (client(addr).await, handle, gate)
}

/// The tenant's places are all free: `LIMIT` held calls are admitted and
/// one more refused; then they are let go.
async fn full_capacity_again(client: &EchoClient<Channel>, handle: &LimitsHandle, gate: &Gate) {
    wait_for("every place given back", Some(0), || {
        handle.in_flight("team-a")
    })
    .await;
    let before = gate.entered();
    let (held, _) = burst(client, "team-a", HOLD, LIMIT as usize);
    wait_for("held calls", before + LIMIT as usize, || gate.entered()).await;
    assert_eq!(
        call(client, Some("team-a"), "hi").await.0,
        Code::ResourceExhausted
    );
    gate.open();
    assert_eq!(count(&outcomes(held).await, Code::Ok), LIMIT as usize);
    gate.close();
    wait_for("every place given back", Some(0), || {
        handle.in_flight("team-a")
    })
    .await;
}

#[tokio::test]
async fn a_client_cancel_gives_the_place_back() {
    let (client, handle, gate) = limited().await;
    let (held, _) = burst(&client, "team-a", NEVER, LIMIT as usize);
    wait_for("calls in flight", Some(LIMIT), || {
        handle.in_flight("team-a")
    })
    .await;
    assert_eq!(
        call(&client, Some("team-a"), "hi").await.0,
        Code::ResourceExhausted
    );
    // Dropping the call's future resets its stream; the server drops the
    // handler's future and the response.
    for task in held {
        task.abort();
    }
    full_capacity_again(&client, &handle, &gate).await;
}

#[tokio::test]
async fn a_deadline_gives_the_place_back() {
    let (client, handle, gate) = limited().await;
    for _ in 0..LIMIT {
        let mut request = support::limits::request(Some("team-a"), NEVER);
        request.set_timeout(Duration::from_millis(100));
        let code = support::limits::outcome(client.clone().unary_echo(request).await).0;
        assert!(
            matches!(code, Code::DeadlineExceeded | Code::Cancelled),
            "{code:?}"
        );
    }
    full_capacity_again(&client, &handle, &gate).await;
}

#[tokio::test]
async fn a_handler_error_gives_the_place_back() {
    let (client, handle, gate) = limited().await;
    for _ in 0..2 * LIMIT {
        assert_eq!(call(&client, Some("team-a"), FAIL).await.0, Code::Internal);
    }
    full_capacity_again(&client, &handle, &gate).await;
}

#[tokio::test]
async fn a_dropped_response_stream_gives_the_place_back() {
    let (client, handle, gate) = limited().await;
    let mut streams = Vec::new();
    for _ in 0..LIMIT {
        let mut stream = client
            .clone()
            .server_streaming_echo(support::limits::request(Some("team-a"), "first rest"))
            .await
            .expect("admitted")
            .into_inner();
        let first = stream.message().await.expect("first message");
        assert_eq!(first.map(|m| m.message), Some("first".into()));
        streams.push(stream);
    }
    // Both streams are open (the server holds them): no room left.
    assert_eq!(handle.in_flight("team-a"), Some(LIMIT));
    assert_eq!(
        call(&client, Some("team-a"), "hi").await.0,
        Code::ResourceExhausted
    );
    drop(streams);
    full_capacity_again(&client, &handle, &gate).await;
}

#[tokio::test]
async fn a_stream_read_to_its_end_gives_the_place_back() {
    let (client, handle, gate) = limited().await;
    gate.open();
    for _ in 0..2 * LIMIT {
        let mut stream = client
            .clone()
            .server_streaming_echo(support::limits::request(Some("team-a"), "only"))
            .await
            .expect("admitted")
            .into_inner();
        while stream
            .message()
            .await
            .expect("a message or the end")
            .is_some()
        {}
    }
    gate.close();
    full_capacity_again(&client, &handle, &gate).await;
}
