//! The call a thread is polling: the layer's response future and body make
//! their call current while they poll the inner service, so that
//! [`CallMetricsRecorder::current`] finds it, as a tokio task-local is
//! found. No allocation until the handler asks for the recorder.

use std::cell::RefCell;

use super::CallMetricsRecorder;

thread_local! {
    /// The call being polled on this thread: `None` outside any; inside
    /// one, its recorder once the handler has asked for it.
    static CURRENT: RefCell<Option<Option<CallMetricsRecorder>>> =
        const { RefCell::new(None) };
}

/// One call's place for its recorder, kept in the layer's response future
/// and then its body; empty (no allocation) until the handler asks.
#[derive(Debug, Default)]
pub(crate) struct CallScope {
    recorder: Option<CallMetricsRecorder>,
}

impl CallScope {
    /// Runs `poll` with this call current on this thread; the call that
    /// was current before (a call polled inside another) is current again
    /// afterwards, also if `poll` panics.
    #[inline]
    pub(crate) fn enter<R>(&mut self, poll: impl FnOnce() -> R) -> R {
        let previous = CURRENT.with(|current| current.replace(Some(self.recorder.take())));
        let guard = Restore {
            scope: self,
            previous: Some(previous),
        };
        let result = poll();
        drop(guard);
        result
    }

    /// The recorder, if the handler asked for it.
    pub(crate) fn recorder(&self) -> Option<&CallMetricsRecorder> {
        self.recorder.as_ref()
    }
}

/// Puts the previous call back (and this call's recorder into its scope)
/// when dropped.
struct Restore<'a> {
    scope: &'a mut CallScope,
    previous: Option<Option<Option<CallMetricsRecorder>>>,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let previous = self.previous.take().flatten();
        // A thread being torn down has no current call to restore.
        let mine = CURRENT.try_with(|current| current.replace(previous));
        if let Ok(Some(recorder)) = mine {
            self.scope.recorder = recorder;
        }
    }
}

/// The current call's recorder, made on first use; `None` outside a call.
pub(super) fn current_recorder() -> Option<CallMetricsRecorder> {
    CURRENT
        .try_with(|current| {
            current.borrow_mut().as_mut().map(|slot| {
                slot.get_or_insert_with(CallMetricsRecorder::default)
                    .clone()
            })
        })
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_only_inside_a_scope_and_made_on_first_use() {
        assert!(CallMetricsRecorder::current().is_none());
        let mut scope = CallScope::default();
        scope.enter(|| {});
        assert!(scope.recorder().is_none(), "nothing made when not asked");
        scope.enter(|| {
            CallMetricsRecorder::current()
                .unwrap()
                .set_request_cost("a", 1.0);
        });
        scope.enter(|| {
            // The same recorder on a later poll.
            CallMetricsRecorder::current()
                .unwrap()
                .set_request_cost("b", 2.0);
        });
        let metrics = scope.recorder().unwrap().metrics();
        assert_eq!(metrics.request_cost.len(), 2);
        assert!(CallMetricsRecorder::current().is_none());
    }

    #[test]
    fn nested_calls_keep_their_own_recorders() {
        let mut outer = CallScope::default();
        let mut inner = CallScope::default();
        outer.enter(|| {
            CallMetricsRecorder::current()
                .unwrap()
                .set_named_metric("outer", 1.0);
            inner.enter(|| {
                CallMetricsRecorder::current()
                    .unwrap()
                    .set_named_metric("inner", 2.0);
            });
            CallMetricsRecorder::current()
                .unwrap()
                .set_named_metric("outer-again", 3.0);
        });
        let outer = outer.recorder().unwrap().metrics().named_metrics;
        let inner = inner.recorder().unwrap().metrics().named_metrics;
        assert_eq!(outer.keys().collect::<Vec<_>>(), ["outer", "outer-again"]);
        assert_eq!(inner.keys().collect::<Vec<_>>(), ["inner"]);
    }

    #[test]
    fn a_panic_inside_restores_the_previous_call() {
        let mut scope = CallScope::default();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            scope.enter(|| {
                CallMetricsRecorder::current().unwrap();
                panic!("handler panicked");
            })
        }));
        assert!(caught.is_err());
        assert!(CallMetricsRecorder::current().is_none());
        assert!(scope.recorder().is_some());
    }
}
