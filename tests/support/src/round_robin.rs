//! [`RoundRobin`]: channels to several replicas, each request (each
//! attempt of a retried call) to the next one in turn, as grpc-go's
//! `round_robin` picks once every replica is connected; deterministic,
//! unlike tower's `p2c`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tonic::transport::Channel;

/// Round robin over `Channel`s.
#[derive(Clone)]
pub struct RoundRobin {
    channels: Vec<Channel>,
    next: Arc<AtomicUsize>,
}

impl RoundRobin {
    /// Round robin over `channels` (at least one), starting with the first.
    pub fn new(channels: Vec<Channel>) -> Self {
        assert!(!channels.is_empty(), "round robin over no channel");
        Self {
            channels,
            next: Arc::default(),
        }
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for RoundRobin {
    type Response = http::Response<tonic::body::Body>;
    type Error = tonic::transport::Error;
    type Future = <Channel as tower::Service<http::Request<tonic::body::Body>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Every channel ready, so that whichever is next can be called.
        for channel in &mut self.channels {
            std::task::ready!(channel.poll_ready(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.channels.len();
        self.channels[index].call(request)
    }
}
