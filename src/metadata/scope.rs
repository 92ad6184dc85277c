//! Getting a chain onto a call: request extensions and a task-local scope.

use std::future::Future;

use tokio::task::futures::TaskLocalFuture;

use super::OutgoingMetadata;

tokio::task_local! {
    static CURRENT: OutgoingMetadata;
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
        CURRENT.scope(self, future)
    }

    /// Runs the synchronous `f` with `self` as the current outgoing
    /// metadata.
    pub fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        CURRENT.sync_scope(self, f)
    }

    /// The current task's outgoing metadata (a handle clone: one atomic
    /// increment), or `None` outside any [`scope`](Self::scope).
    pub fn current() -> Option<OutgoingMetadata> {
        CURRENT.try_with(OutgoingMetadata::clone).ok()
    }

    /// Calls `f` with the current task's outgoing metadata, without cloning
    /// the handle; `None` outside any scope.
    pub fn with_current<R>(f: impl FnOnce(&OutgoingMetadata) -> R) -> Option<R> {
        CURRENT.try_with(f).ok()
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
