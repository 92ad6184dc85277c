//! [`CallAttempt`]: an RPC that is one attempt of a client call a retrying
//! layer may try several times (grpc-go's `stats.Begin`
//! `IsTransparentRetryAttempt`, gRFC A66's attempts and A72's attempt
//! spans), and [`CallScope`]: what a stats handler keeps for the whole
//! call, over its attempts.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// The request extension a retrying layer
/// (`retry::RetryLayer`) puts on each attempt
/// of a client call: which attempt it is, and the call they share. A
/// [`CombinedLayer::client`](super::CombinedLayer::client) below that
/// layer hands it to its handlers in [`RpcInfo::attempt`](super::RpcInfo::attempt);
/// without a retrying layer above it, `None`, and each RPC is a call of
/// one attempt.
///
/// ```
/// use tonic_hotpath::stats::CallAttempt;
///
/// let first = CallAttempt::first();
/// let retry = first.next(false);
/// assert_eq!(retry.previous_attempts(), 1);
/// assert!(!retry.is_transparent());
/// assert!(first.call().same_call(retry.call()));
/// ```
#[derive(Clone, Debug)]
pub struct CallAttempt {
    call: CallScope,
    previous_attempts: u32,
    transparent: bool,
}

impl CallAttempt {
    /// The first attempt of a new call, which starts now.
    pub fn first() -> Self {
        Self {
            call: CallScope::new(),
            previous_attempts: 0,
            transparent: false,
        }
    }

    /// The attempt after this one: a `transparent` retry (the server never
    /// saw this one; not counted in `grpc-previous-rpc-attempts`) or one
    /// under the retry policy.
    #[must_use]
    pub fn next(&self, transparent: bool) -> Self {
        Self {
            call: self.call.clone(),
            previous_attempts: self.previous_attempts + u32::from(!transparent),
            transparent,
        }
    }

    /// The attempts before this one that the retry policy made (the
    /// `grpc-previous-rpc-attempts` it carries; transparent retries are
    /// not counted), A72's `previous-rpc-attempts`.
    pub fn previous_attempts(&self) -> u32 {
        self.previous_attempts
    }

    /// Whether this attempt is a transparent retry (A72's
    /// `transparent-retry`; grpc-go's `IsTransparentRetryAttempt`).
    pub fn is_transparent(&self) -> bool {
        self.transparent
    }

    /// The call this attempt is part of.
    pub fn call(&self) -> &CallScope {
        &self.call
    }
}

/// A client call over its attempts: when it started, and a place where
/// handlers keep what they record once per call (A66's
/// `grpc.client.call.duration`, A72's call span). The call is over when
/// its last holder lets go: the retrying layer once the caller has the
/// answer, and each handler once its attempt ended; then the `on_end`
/// callbacks run, once each.
#[derive(Clone)]
pub struct CallScope(Arc<Shared>);

struct Shared {
    started: Instant,
    /// Handlers' per-call values, by type.
    values: Mutex<Vec<(TypeId, Arc<dyn Any + Send + Sync>)>>,
    on_end: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl fmt::Debug for CallScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallScope")
            .field("started", &self.0.started)
            .finish_non_exhaustive()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let callbacks = std::mem::take(
            self.on_end
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for callback in callbacks {
            callback();
        }
    }
}

impl CallScope {
    fn new() -> Self {
        Self(Arc::new(Shared {
            started: Instant::now(),
            values: Mutex::new(Vec::new()),
            on_end: Mutex::new(Vec::new()),
        }))
    }

    /// When the call started (before its first attempt).
    pub fn started(&self) -> Instant {
        self.0.started
    }

    /// Whether `other` is the same call.
    pub fn same_call(&self, other: &CallScope) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The call's value of type `T`, made by `make` (and `on_end` given
    /// it to run when the call is over) the first time any attempt asks.
    /// The value holds the call open: a handler keeps it until its
    /// attempt ends.
    pub fn value<T, F>(&self, make: F) -> CallValue<T>
    where
        T: Send + Sync + 'static,
        F: FnOnce() -> (T, Option<Box<dyn FnOnce(&T) + Send>>),
    {
        let mut values = self.0.values.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, value)) = values.iter().find(|(id, _)| *id == TypeId::of::<T>())
            && let Ok(value) = Arc::clone(value).downcast::<T>()
        {
            return CallValue {
                value,
                _call: self.clone(),
            };
        }
        let (value, on_end) = make();
        let value = Arc::new(value);
        values.push((
            TypeId::of::<T>(),
            Arc::clone(&value) as Arc<dyn Any + Send + Sync>,
        ));
        drop(values);
        if let Some(on_end) = on_end {
            let at_end = Arc::clone(&value);
            self.0
                .on_end
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Box::new(move || on_end(&at_end)));
        }
        CallValue {
            value,
            _call: self.clone(),
        }
    }
}

/// A handler's per-call value ([`CallScope::value`]); while it is held,
/// the call is not over.
pub struct CallValue<T> {
    value: Arc<T>,
    _call: CallScope,
}

impl<T> std::ops::Deref for CallValue<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: fmt::Debug> fmt::Debug for CallValue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn a_call_s_value_is_shared_by_its_attempts_and_its_end_runs_once_last() {
        let ended = Arc::new(AtomicU32::new(0));
        let first = CallAttempt::first();
        let make = || {
            let ended = Arc::clone(&ended);
            move || {
                (
                    AtomicU32::new(0),
                    Some(Box::new(move |count: &AtomicU32| {
                        ended.store(count.load(Ordering::SeqCst), Ordering::SeqCst);
                    }) as Box<dyn FnOnce(&AtomicU32) + Send>),
                )
            }
        };
        first.call().value(make()).fetch_add(1, Ordering::SeqCst);
        let transparent = first.next(true);
        assert_eq!(transparent.previous_attempts(), 0);
        let retry = transparent.next(false);
        assert_eq!(retry.previous_attempts(), 1);
        retry.call().value(make()).fetch_add(1, Ordering::SeqCst);
        drop(first);
        drop(transparent);
        assert_eq!(ended.load(Ordering::SeqCst), 0, "the call is not over");
        drop(retry);
        assert_eq!(
            ended.load(Ordering::SeqCst),
            2,
            "one value, both attempts' counts"
        );
    }
}
