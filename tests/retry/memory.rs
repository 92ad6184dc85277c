//! What the layer keeps stays within its bounds, whatever the caller
//! streams: a client stream of 3 MiB keeps at most the per-call bound,
//! and a call answered with response headers keeps nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use support::{EchoClient, EchoRequest};
use tonic_hotpath::retry::{RetryConfig, RetryLayer};

const PER_CALL: usize = 256 * 1024;
const MESSAGES: usize = 48;

#[tokio::test]
async fn a_long_client_stream_keeps_at_most_the_per_call_bound() {
    let addr = support::spawn_echo().await;
    let retry = RetryLayer::new(RetryConfig::new())
        .per_call_buffer(PER_CALL)
        .per_channel_buffer(4 * PER_CALL);
    let channel = tower::ServiceBuilder::new()
        .layer(retry.clone())
        .service(support::connect(addr).await);
    let mut client = EchoClient::new(channel);
    // Sample what the channel keeps while 48 messages of 64 KiB go out
    // (the joined answer stays under tonic's 4 MiB decoding limit).
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (retry, most, done) = (retry.clone(), Arc::clone(&most), Arc::clone(&done));
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                let used = retry.channel_buffer_used().unwrap();
                most.fetch_max(used, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        })
    };
    let word = "w".repeat(64 * 1024 - 1);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let sender = tokio::spawn(async move {
        for _ in 0..MESSAGES {
            if tx
                .send(EchoRequest {
                    message: word.clone(),
                })
                .await
                .is_err()
            {
                break;
            }
        }
    });
    let response = client
        .client_streaming_echo(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap();
    sender.await.unwrap();
    done.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    assert_eq!(
        response.into_inner().message.len(),
        MESSAGES * (64 * 1024 - 1) + MESSAGES - 1
    );
    let most = most.load(Ordering::SeqCst);
    assert!(
        most <= PER_CALL,
        "kept {most} bytes at most, bound {PER_CALL}"
    );
    assert_eq!(retry.channel_buffer_used(), Some(0), "all given back");
}

#[tokio::test]
async fn response_headers_commit_the_call_and_free_what_it_kept() {
    let addr = support::spawn_echo().await;
    let retry = RetryLayer::new(RetryConfig::new()).per_channel_buffer(1 << 30);
    let channel = tower::ServiceBuilder::new()
        .layer(retry.clone())
        .service(support::connect(addr).await);
    let mut client = EchoClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(EchoRequest {
        message: "one".into(),
    })
    .await
    .unwrap();
    let mut responses = client
        .bidirectional_streaming_echo(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(responses.message().await.unwrap().unwrap().message, "one");
    // Committed at the headers: new messages are not kept.
    for _ in 0..10 {
        tx.send(EchoRequest {
            message: "x".repeat(1000),
        })
        .await
        .unwrap();
        responses.message().await.unwrap().unwrap();
    }
    assert_eq!(
        retry.channel_buffer_used(),
        Some(0),
        "what was kept before the headers is given back as the attempt reads on"
    );
    drop(tx);
    assert!(responses.message().await.unwrap().is_none());
}
