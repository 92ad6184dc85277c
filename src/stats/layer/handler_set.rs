//! [`HandlerSet`]: what a [`CombinedLayer`] holds, sealed.

use std::sync::Arc;

use super::layer::LayerConns;
use crate::stats::StatsHandler;
#[cfg(doc)]
use crate::stats::{Combined, CombinedLayer};

/// What a [`CombinedLayer`] holds: no handler yet (`()`, as
/// [`CombinedLayer::server`] and [`CombinedLayer::client`] make it) or a
/// [`StatsHandler`] (one, or several as a [`Combined`]). It is the bound on
/// the layer's `H`, for code generic over any layer.
///
/// Sealed: this crate implements it for exactly those, and nothing else
/// can (its items are the crate's own).
///
/// ```
/// use tonic_hotpath::stats::{CombinedLayer, HandlerSet, ServerSide};
///
/// /// Any server layer, with or without handlers, taking 1 MiB messages.
/// fn one_mebibyte<H: HandlerSet>(layer: CombinedLayer<H, ServerSide>) -> CombinedLayer<H, ServerSide> {
///     layer.max_message_len(1 << 20)
/// }
/// let layer = one_mebibyte(CombinedLayer::server());
/// # let _ = layer;
/// ```
pub trait HandlerSet {
    /// What the layer keeps beside its handlers: nothing without one, the
    /// connections linked to the layer with one.
    #[doc(hidden)]
    type Conns: Clone + Send + Sync + 'static;

    /// Seals the trait: its argument's type cannot be named outside this
    /// crate, so no other crate can write the method.
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

mod sealed {
    /// The argument of [`HandlerSet::sealed`](super::HandlerSet::sealed).
    #[derive(Debug)]
    pub struct Token;
}

impl HandlerSet for () {
    type Conns = ();

    fn sealed(_: sealed::Token) {}
}

impl<H: StatsHandler> HandlerSet for H {
    type Conns = Arc<LayerConns<H>>;

    fn sealed(_: sealed::Token) {}
}
