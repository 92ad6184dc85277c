//! The client's link between a [`CombinedLayer`](super::CombinedLayer) and
//! the connection its `Channel` is using.
//!
//! A tonic `Channel` built by `Endpoint::connect_with_connector` holds one
//! connection at a time and makes a new one after the old one failed. The
//! layer's connectors publish each connection here once its `ConnBegin`
//! was delivered, and withdraw it before its `ConnEnd`; the layer's RPCs
//! read the connection published when they begin.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::StatsHandler;
use super::conn::ConnTag;

/// The open connection most recently made by one client layer's
/// connectors, if any.
pub(crate) struct ConnLink<H: StatsHandler> {
    /// Set once a connector shares this link: until then RPCs skip the
    /// lock (a layer used without its connector pays one relaxed load).
    armed: AtomicBool,
    current: Mutex<Option<ConnTag<H>>>,
}

impl<H: StatsHandler> ConnLink<H> {
    pub(crate) fn new() -> Self {
        Self {
            armed: AtomicBool::new(false),
            current: Mutex::new(None),
        }
    }

    fn current(&self) -> MutexGuard<'_, Option<ConnTag<H>>> {
        // Only a tag is stored, and no handler code runs under the lock.
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called when a connector starts sharing this link.
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::Relaxed);
    }

    /// The connection published last and still open (one reference count
    /// increment), or `None` while there is none.
    #[inline]
    pub(crate) fn get(&self) -> Option<ConnTag<H>> {
        if !self.armed.load(Ordering::Relaxed) {
            return None;
        }
        self.current().clone()
    }

    /// Makes `tag` the current connection. The tag it replaces (an old
    /// connection not yet dropped) is released outside the lock.
    pub(crate) fn publish(&self, tag: ConnTag<H>) {
        let replaced = self.current().replace(tag);
        drop(replaced);
    }

    /// Unlinks `tag` if it is still the current connection (a newer one
    /// may already have replaced it).
    pub(crate) fn withdraw(&self, tag: &ConnTag<H>) {
        let withdrawn = {
            let mut current = self.current();
            match &*current {
                Some(linked) if linked.same_conn(tag) => current.take(),
                _ => None,
            }
        };
        drop(withdrawn);
    }
}

impl<H: StatsHandler> fmt::Debug for ConnLink<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnLink")
            .field("current", &*self.current())
            .finish()
    }
}
