//! A tower service that records what a handler would, below
//! `CallMetricsLayer`: it takes the call's recorder and sets a request
//! cost and two named metrics, then calls its inner service. Shared by the
//! allocation test and the `orca` and `scale` benches.

use std::task::{Context, Poll};

use tonic_hotpath::orca::CallMetricsRecorder;

/// Records a cost and two named metrics per call, then calls `S`.
#[derive(Clone)]
pub struct Records<S>(pub S);

impl<S: tower::Service<R>, R> tower::Service<R> for Records<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        let recorder = CallMetricsRecorder::current().expect("below CallMetricsLayer");
        recorder.set_request_cost("cost", 3456.32);
        recorder.set_named_metric("queue_depth", 3.0);
        recorder.set_named_metric("cache_hit", 1.0);
        self.0.call(request)
    }
}
