//! The client's link between a [`CombinedLayer`] and
//! the connection its `Channel` is using.
//!
//! A tonic `Channel` built by `Endpoint::connect_with_connector` holds one
//! connection at a time and makes a new one after the old one failed. The
//! layer's connectors publish each connection here once its `ConnBegin`
//! was delivered, and withdraw it before its `ConnEnd`; the layer's RPCs
//! read the connection published when they begin.
//!
//! Connections change rarely and RPCs read on every call, so each layered
//! service keeps its own copy of the current tag ([`LinkedConn`]) and a
//! generation number: an RPC pays one atomic load while the connection is
//! unchanged, and takes the lock only after a change.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::tag::ConnTag;
use crate::stats::StatsHandler;

/// The open connection most recently made by one client layer's
/// connectors, if any.
pub(crate) struct ConnLink<H: StatsHandler> {
    /// Bumped, under the write lock, on every publish and withdraw.
    generation: AtomicU64,
    current: RwLock<Option<ConnTag<H>>>,
}

impl<H: StatsHandler> ConnLink<H> {
    pub(crate) fn new() -> Self {
        Self {
            generation: AtomicU64::new(0),
            current: RwLock::new(None),
        }
    }

    // Only a tag is stored, and no handler code runs under the lock: a
    // poisoned lock holds nothing broken.
    fn read(&self) -> RwLockReadGuard<'_, Option<ConnTag<H>>> {
        self.current.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Option<ConnTag<H>>> {
        self.current.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the current connection with `tag` under the write lock;
    /// what it replaces (an old connection not yet dropped) is released
    /// outside the lock.
    fn set(&self, change: impl FnOnce(&mut Option<ConnTag<H>>) -> Option<ConnTag<H>>) {
        let released = {
            let mut current = self.write();
            let released = change(&mut current);
            self.generation.fetch_add(1, Ordering::Release);
            released
        };
        drop(released);
    }

    /// Makes `tag` the current connection.
    pub(crate) fn publish(&self, tag: ConnTag<H>) {
        self.set(|current| current.replace(tag));
    }

    /// Unlinks `tag` if it is still the current connection (a newer one
    /// may already have replaced it).
    pub(crate) fn withdraw(&self, tag: &ConnTag<H>) {
        self.set(|current| match current {
            Some(linked) if linked.same_conn(tag) => current.take(),
            _ => None,
        });
    }
}

impl<H: StatsHandler> fmt::Debug for ConnLink<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnLink")
            .field("current", &*self.read())
            .finish()
    }
}

/// One layered service's view of its layer's [`ConnLink`]: a copy of the
/// current tag and the generation it was read at.
///
/// The copy keeps a closed connection's tag (its handler states, not the
/// connection) alive until this service's next RPC notices the change.
pub(crate) struct LinkedConn<H: StatsHandler> {
    link: Arc<ConnLink<H>>,
    seen: u64,
    tag: Option<ConnTag<H>>,
}

impl<H: StatsHandler> LinkedConn<H> {
    pub(crate) fn new(link: Arc<ConnLink<H>>) -> Self {
        Self {
            link,
            seen: 0,
            tag: None,
        }
    }

    /// The connection published last and still open as the RPC begins, or
    /// `None` while there is none.
    #[inline]
    pub(crate) fn get(&mut self) -> Option<&ConnTag<H>> {
        if self.link.generation.load(Ordering::Acquire) != self.seen {
            self.refresh();
        }
        self.tag.as_ref()
    }

    #[cold]
    fn refresh(&mut self) {
        let current = self.link.read();
        // Writers bump the generation under the write lock: it is stable
        // while the read lock is held, and matches `current`.
        self.seen = self.link.generation.load(Ordering::Relaxed);
        let fresh = current.clone();
        drop(current);
        // The old tag (maybe a closed connection's last) is released
        // outside the lock.
        drop(std::mem::replace(&mut self.tag, fresh));
    }
}

impl<H: StatsHandler> Clone for LinkedConn<H> {
    fn clone(&self) -> Self {
        Self {
            link: Arc::clone(&self.link),
            seen: self.seen,
            tag: self.tag.clone(),
        }
    }
}

impl<H: StatsHandler> fmt::Debug for LinkedConn<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkedConn")
            .field("seen", &self.seen)
            .field("tag", &self.tag)
            .finish()
    }
}
