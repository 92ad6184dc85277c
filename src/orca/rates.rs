//! Queries and errors per second from the stats layer's own counts
//! ([`CallRates`]), published into a [`ServerMetricsRecorder`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tonic::Code;

use super::ServerMetricsRecorder;
use crate::stats::{RpcEvent, ShardedCounter, StatsHandler};

/// The server's queries and errors per second, counted by the stats layer
/// and published into a [`ServerMetricsRecorder`] as its `qps` and `eps`,
/// for an application that has no rates of its own. Weighted round robin
/// (gRFC A58) ignores a report without QPS, so a server that wants to be
/// weighed must report it.
///
/// Attach it to the server's
/// [`CombinedLayer`](crate::stats::CombinedLayer) (it counts each call's
/// `End`: every call as a query, one that ended with any status but `OK`
/// as an error, in per-core counters, so calls on different cores never
/// contend), and publish: [`publish`](Self::publish) sets the rates since
/// the previous publish; [`publish_every`](Self::publish_every) does it on
/// a timer.
///
/// ```
/// use std::time::Duration;
/// use tonic_hotpath::orca::{CallRates, ServerMetricsProvider, ServerMetricsRecorder};
/// use tonic_hotpath::stats::CombinedLayer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let recorder = ServerMetricsRecorder::new();
/// let rates = CallRates::new(recorder.clone());
/// let layer = CombinedLayer::server().with(rates.clone());
/// // Server::builder().layer(layer)...
/// # let _ = layer;
/// let publisher = tokio::spawn(rates.publish_every(Duration::from_secs(1)));
/// # publisher.abort();
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct CallRates {
    inner: Arc<Counts>,
}

#[derive(Debug)]
struct Counts {
    recorder: ServerMetricsRecorder,
    calls: ShardedCounter,
    errors: ShardedCounter,
    /// When the rates were last published, and the counts then.
    last: Mutex<(Instant, u64, u64)>,
}

impl CallRates {
    /// Counts calls for `recorder`'s `qps` and `eps`; nothing is published
    /// until [`publish`](Self::publish) is called.
    pub fn new(recorder: ServerMetricsRecorder) -> Self {
        Self {
            inner: Arc::new(Counts {
                recorder,
                calls: ShardedCounter::new(),
                errors: ShardedCounter::new(),
                last: Mutex::new((Instant::now(), 0, 0)),
            }),
        }
    }

    /// Calls ended so far, and those of them that failed.
    pub fn counts(&self) -> (u64, u64) {
        (self.inner.calls.get(), self.inner.errors.get())
    }

    /// Sets the recorder's `qps` and `eps` to the rates since the previous
    /// publish (or since [`new`](Self::new)), and returns them. A publish
    /// less than a millisecond after the previous one changes nothing and
    /// returns `None` (too short to be a rate).
    pub fn publish(&self) -> Option<(f64, f64)> {
        let now = Instant::now();
        let (calls, errors) = self.counts();
        let mut last = self
            .inner
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(last.0);
        if elapsed < Duration::from_millis(1) {
            return None;
        }
        let seconds = elapsed.as_secs_f64();
        let qps = calls.saturating_sub(last.1) as f64 / seconds;
        let eps = errors.saturating_sub(last.2) as f64 / seconds;
        *last = (now, calls, errors);
        drop(last);
        self.inner.recorder.set_qps(qps);
        self.inner.recorder.set_eps(eps);
        Some((qps, eps))
    }

    /// Publishes every `period` (at least a millisecond), forever: spawn it,
    /// and abort the task to stop.
    pub async fn publish_every(self, period: Duration) {
        let mut ticks = tokio::time::interval(period.max(Duration::from_millis(1)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is at once: the first rate is over one period.
        ticks.tick().await;
        loop {
            ticks.tick().await;
            self.publish();
        }
    }
}

impl StatsHandler for CallRates {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;

    #[inline]
    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::End(end) = event {
            self.inner.calls.add(1);
            if end.code != Code::Ok {
                self.inner.errors.add(1);
            }
        }
    }
}
