//! Getting a chain onto a call: request extensions and a task-local scope.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::futures::TaskLocalFuture;

use super::OutgoingMetadata;

tokio::task_local! {
    static CURRENT: OutgoingMetadata;
}

/// Whether [`OutgoingMetadata::scope`] or [`OutgoingMetadata::sync_scope`]
/// was ever called in this process. Until then `CURRENT` is set nowhere
/// (only those two set it; hiding only replaces a set value), so every
/// lookup can be skipped: one relaxed load instead of a thread-local access
/// on each client call. A scope future set up on one thread and polled on
/// another got there through a synchronising hand-off, which orders this
/// flag's store before the poll.
static SCOPE_EVER_ENTERED: AtomicBool = AtomicBool::new(false);

/// Sets [`SCOPE_EVER_ENTERED`] (writing only the first time, so scopes on
/// many threads do not contend on the line).
#[inline]
fn note_scope_entered() {
    if !SCOPE_EVER_ENTERED.load(Ordering::Relaxed) {
        SCOPE_EVER_ENTERED.store(true, Ordering::Relaxed);
    }
}

impl OutgoingMetadata {
    /// Runs `future` with `self` as the task's current outgoing metadata,
    /// the way a Go context carries it down a call chain.
    /// [`OutgoingMetadataLayer`](super::OutgoingMetadataLayer) sends it on
    /// every call made inside `future` whose request has no chain of its own.
    ///
    /// Scopes nest: an inner scope replaces the outer one until it ends. To
    /// add to the surrounding chain, start from [`current`](Self::current):
    ///
    /// ```
    /// use tonic_hotpath::metadata::OutgoingMetadata;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let outer = OutgoingMetadata::new().append_static("x-request-id", "7").unwrap();
    /// outer
    ///     .scope(async {
    ///         let inner = OutgoingMetadata::current()
    ///             .unwrap_or_default()
    ///             .append_static("x-hop", "2")
    ///             .unwrap();
    ///         inner
    ///             .scope(async {
    ///                 assert_eq!(OutgoingMetadata::current().unwrap().len(), 2);
    ///             })
    ///             .await;
    ///     })
    ///     .await;
    /// assert!(OutgoingMetadata::current().is_none());
    /// # });
    /// ```
    pub fn scope<F: Future>(self, future: F) -> TaskLocalFuture<OutgoingMetadata, F> {
        note_scope_entered();
        CURRENT.scope(self, future)
    }

    /// Runs the synchronous `f` with `self` as the current outgoing
    /// metadata.
    pub fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        note_scope_entered();
        CURRENT.sync_scope(self, f)
    }

    /// The current task's outgoing metadata (a handle clone: one atomic
    /// increment), or `None` outside any [`scope`](Self::scope).
    pub fn current() -> Option<OutgoingMetadata> {
        Self::with_current_borrowed(OutgoingMetadata::clone)
    }

    /// Calls `f` with the current task's outgoing metadata; `None` outside
    /// any scope. The handle is cloned (one atomic increment) so that `f`
    /// runs with no borrow of the task-local held: it may do anything,
    /// including calling a service through
    /// [`OutgoingMetadataLayer`](super::OutgoingMetadataLayer).
    pub fn with_current<R>(f: impl FnOnce(&OutgoingMetadata) -> R) -> Option<R> {
        Self::current().as_ref().map(f)
    }

    /// `false` if no task has a current chain, because no scope was ever
    /// entered in this process (one relaxed load).
    #[inline]
    pub(crate) fn may_have_current() -> bool {
        SCOPE_EVER_ENTERED.load(Ordering::Relaxed)
    }

    /// [`with_current`](Self::with_current) without the clone, for the
    /// crate's own short `f`s only: `f` runs while the task-local is
    /// borrowed, so it must not call a service (whose
    /// [`OutgoingMetadataLayer`](super::OutgoingMetadataLayer) would then
    /// fail to hide the scope from the layers below it).
    #[inline]
    pub(crate) fn with_current_borrowed<R>(f: impl FnOnce(&OutgoingMetadata) -> R) -> Option<R> {
        if !Self::may_have_current() {
            return None;
        }
        CURRENT.try_with(f).ok()
    }

    /// Calls `f` with the chain [`OutgoingMetadataLayer`](super::OutgoingMetadataLayer)
    /// would send with a request carrying `extensions`: the attached one,
    /// else the task's current one, else `None`. Reads in place (no clone);
    /// the same borrowing rule as [`with_current_borrowed`](Self::with_current_borrowed).
    #[inline]
    #[cfg(feature = "tenant")]
    pub(crate) fn with_pending<R>(
        extensions: &http::Extensions,
        mut f: impl FnMut(Option<&OutgoingMetadata>) -> R,
    ) -> R {
        if let Some(attached) = extensions.get::<OutgoingMetadata>() {
            return f(Some(attached));
        }
        if !Self::may_have_current() {
            return f(None);
        }
        match CURRENT.try_with(|current| f(Some(current))) {
            Ok(result) => result,
            Err(_) => f(None),
        }
    }

    /// Whether [`OutgoingMetadataLayer`](super::OutgoingMetadataLayer)
    /// would write a non-empty chain for a request carrying `extensions`:
    /// the attached chain's, else the task's current one's. O(1): an
    /// extensions lookup, then (only once a scope was ever entered) a
    /// task-local read.
    #[inline]
    #[cfg(feature = "tenant")]
    pub(crate) fn is_pending(extensions: &http::Extensions) -> bool {
        Self::with_pending(extensions, |chain| {
            chain.is_some_and(|chain| !chain.is_empty())
        })
    }

    /// Runs `f` (the call into the layers below
    /// [`OutgoingMetadataLayer`](super::OutgoingMetadataLayer), once it has
    /// written the chain into the headers) with an empty chain as the task's
    /// current one, if there is a current one: below the layer the chain
    /// lives in the headers only, so no layer there sees it twice.
    ///
    /// Out of line: callers first ask [`may_have_current`](Self::may_have_current)
    /// and, when no scope was ever entered, call directly (moving nothing
    /// into a closure).
    #[inline(never)]
    pub(crate) fn hiding_current<R>(f: impl FnOnce() -> R) -> R {
        if CURRENT.try_with(|_| ()).is_err() {
            return f();
        }
        // Cannot panic: the task-local is set and accessible (checked just
        // above) and not borrowed, as the crate never calls out while it
        // holds a borrow (see `with_current`).
        CURRENT.sync_scope(OutgoingMetadata::new(), f)
    }
}

/// Attaches an [`OutgoingMetadata`] chain to a `tonic::Request` (through its
/// extensions), for [`OutgoingMetadataLayer`](super::OutgoingMetadataLayer)
/// to send. A chain on the request wins over the task-local one.
///
/// ```
/// use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataExt};
///
/// let md = OutgoingMetadata::new().append_static("x-request-id", "42")?;
/// let mut request = tonic::Request::new(());
/// request.set_outgoing_metadata(md);
/// assert_eq!(request.outgoing_metadata().unwrap().len(), 1);
/// # Ok::<(), tonic_hotpath::metadata::MetadataError>(())
/// ```
pub trait OutgoingMetadataExt {
    /// Attaches `metadata`, replacing any chain attached before.
    fn set_outgoing_metadata(&mut self, metadata: OutgoingMetadata);

    /// The attached chain, if any.
    fn outgoing_metadata(&self) -> Option<&OutgoingMetadata>;
}

impl<T> OutgoingMetadataExt for tonic::Request<T> {
    fn set_outgoing_metadata(&mut self, metadata: OutgoingMetadata) {
        self.extensions_mut().insert(metadata);
    }

    fn outgoing_metadata(&self) -> Option<&OutgoingMetadata> {
        self.extensions().get()
    }
}
