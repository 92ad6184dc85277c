//! [`CallRecord`]: `grpc.client.call.duration` once per call when a
//! retrying layer makes a call several attempts (A66): each attempt's
//! `End` leaves its attribute set here, and the call's end records the
//! last one, over the whole call.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;

use crate::stats::{CallAttempt, CallValue};

/// The last ended attempt's series of a call.
#[derive(Debug, Default)]
pub(crate) struct CallRecord {
    last: Mutex<Option<(Histogram<f64>, Vec<KeyValue>)>>,
}

impl CallRecord {
    /// The record of `attempt`'s call, made by its first attempt; the
    /// call's end records its duration.
    pub(crate) fn of(attempt: &CallAttempt) -> CallValue<Self> {
        let started = attempt.call().started();
        attempt.call().value(|| {
            let finish: Box<dyn FnOnce(&CallRecord) + Send> =
                Box::new(move |record: &CallRecord| record.finish(started));
            (CallRecord::default(), Some(finish))
        })
    }

    /// An attempt ended with this series: the call's, unless a later
    /// attempt ends too.
    pub(crate) fn attempt_ended(&self, histogram: &Histogram<f64>, attrs: &[KeyValue]) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((histogram.clone(), attrs.to_vec()));
    }

    fn finish(&self, started: Instant) {
        let last = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((histogram, attrs)) = last {
            histogram.record(started.elapsed().as_secs_f64(), &attrs);
        }
    }
}
