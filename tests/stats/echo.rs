//! The shared echo service works over real TCP for every RPC kind.

use support::{EchoClient, EchoRequest};
use tokio_stream::StreamExt;

fn req(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

#[tokio::test]
async fn echo_service_answers_every_rpc_kind() {
    let addr = support::spawn_echo().await;
    let mut client = EchoClient::new(support::connect(addr).await);

    let unary = client.unary_echo(req("hello")).await.unwrap().into_inner();
    assert_eq!(unary.message, "hello");

    let mut words = client
        .server_streaming_echo(req("a b c"))
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(item) = words.next().await {
        got.push(item.unwrap().message);
    }
    assert_eq!(got, ["a", "b", "c"]);

    let joined = client
        .client_streaming_echo(tokio_stream::iter([req("x"), req("y")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(joined.message, "x y");

    let mut bidi = client
        .bidirectional_streaming_echo(tokio_stream::iter([req("1"), req("2")]))
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(item) = bidi.next().await {
        got.push(item.unwrap().message);
    }
    assert_eq!(got, ["1", "2"]);
}
