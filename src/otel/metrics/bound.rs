//! How a measurement reaches its instrument: through an OpenTelemetry
//! bound instrument (feature `otel-bound-instruments`) where the provider
//! is known to bind, with the attribute set everywhere else. One code
//! path serves both: [`Recorder::record`].
//!
//! `Counter::add(value, &attributes)` makes the SDK sort, hash and look
//! up the attribute set on every measurement; a bound instrument
//! (`Counter::bind(&attributes)`) resolves the set once and then writes
//! to its series directly. Two facts of OpenTelemetry 0.33 shape this
//! module:
//!
//! - The API's default `bind`, taken by every provider that does not
//!   override it (the SDK built without its own
//!   `experimental_metrics_bound_instruments` feature included), returns a
//!   handle that drops every measurement. So the handler binds only when
//!   it knows the provider binds: when it is the SDK's `SdkMeterProvider`,
//!   whose bound support this crate's feature turns on
//!   ([`provider_binds`]).
//! - The SDK's `bind` inserts the set's series at once, and a cumulative
//!   export reports every series, measured or not: a set bound ahead of
//!   its first measurement would be exported as zeros. So a [`Handle`] is
//!   bound right after its set's first measurement, which is recorded
//!   with the attribute set as always (creating the series, value
//!   included, in one step): a series appears exactly when it always has.

#[cfg(feature = "otel-bound-instruments")]
use std::sync::OnceLock;

use opentelemetry::KeyValue;
#[cfg(feature = "otel-bound-instruments")]
use opentelemetry::metrics::{BoundCounter, BoundHistogram};
use opentelemetry::metrics::{Counter, Histogram};

/// Whether measurements made through `provider`'s meters may be recorded
/// through bound instruments: only with the feature, for the SDK's
/// `SdkMeterProvider` itself (a `dyn MeterProvider` may be anything).
///
/// `P` need not be `'static` (a `&dyn MeterProvider` borrows its
/// provider): `typeid::of` is `TypeId::of` with lifetimes erased, and
/// `SdkMeterProvider` has none, so only that type compares equal.
pub(super) fn provider_binds<P: ?Sized>(provider: &P) -> bool {
    let _ = provider;
    #[cfg(feature = "otel-bound-instruments")]
    {
        typeid::of::<P>() == std::any::TypeId::of::<opentelemetry_sdk::metrics::SdkMeterProvider>()
    }
    #[cfg(not(feature = "otel-bound-instruments"))]
    false
}

/// A synchronous instrument the handler records with: a counter or a
/// histogram.
pub(super) trait Instrument {
    type Value: Copy;
    /// The instrument bound to one attribute set.
    #[cfg(feature = "otel-bound-instruments")]
    type Bound: Send + Sync;

    fn record(&self, value: Self::Value, attributes: &[KeyValue]);

    #[cfg(feature = "otel-bound-instruments")]
    fn bind(&self, attributes: &[KeyValue]) -> Self::Bound;

    #[cfg(feature = "otel-bound-instruments")]
    fn record_bound(bound: &Self::Bound, value: Self::Value);
}

impl Instrument for Counter<u64> {
    type Value = u64;
    #[cfg(feature = "otel-bound-instruments")]
    type Bound = BoundCounter<u64>;

    #[inline]
    fn record(&self, value: u64, attributes: &[KeyValue]) {
        self.add(value, attributes);
    }

    #[cfg(feature = "otel-bound-instruments")]
    fn bind(&self, attributes: &[KeyValue]) -> BoundCounter<u64> {
        Counter::bind(self, attributes)
    }

    #[cfg(feature = "otel-bound-instruments")]
    #[inline]
    fn record_bound(bound: &BoundCounter<u64>, value: u64) {
        bound.add(value);
    }
}

impl<T: Copy> Instrument for Histogram<T> {
    type Value = T;
    #[cfg(feature = "otel-bound-instruments")]
    type Bound = BoundHistogram<T>;

    #[inline]
    fn record(&self, value: T, attributes: &[KeyValue]) {
        Histogram::record(self, value, attributes);
    }

    #[cfg(feature = "otel-bound-instruments")]
    fn bind(&self, attributes: &[KeyValue]) -> BoundHistogram<T> {
        Histogram::bind(self, attributes)
    }

    #[cfg(feature = "otel-bound-instruments")]
    #[inline]
    fn record_bound(bound: &BoundHistogram<T>, value: T) {
        bound.record(value);
    }
}

/// An instrument, and whether it binds (decided once, by the builder).
#[derive(Debug)]
pub(super) struct Recorder<I> {
    instrument: I,
    #[cfg(feature = "otel-bound-instruments")]
    binds: bool,
}

impl<I: Instrument> Recorder<I> {
    pub(super) fn new(instrument: I, binds: bool) -> Self {
        #[cfg(not(feature = "otel-bound-instruments"))]
        let _ = binds;
        Self {
            instrument,
            #[cfg(feature = "otel-bound-instruments")]
            binds,
        }
    }

    /// The instrument itself.
    pub(super) fn instrument(&self) -> &I {
        &self.instrument
    }

    /// Whether [`record`](Self::record) binds handles.
    pub(super) fn binds(&self) -> bool {
        #[cfg(feature = "otel-bound-instruments")]
        return self.binds;
        #[cfg(not(feature = "otel-bound-instruments"))]
        false
    }

    /// Records `value` with `attributes`: through `handle` once it is
    /// bound; until then with the attribute set, binding `handle` right
    /// after (if this recorder binds). `handle` belongs to `attributes`
    /// and this instrument: each set keeps one handle per instrument.
    #[inline]
    pub(super) fn record(&self, value: I::Value, attributes: &[KeyValue], handle: &Handle<I>) {
        #[cfg(feature = "otel-bound-instruments")]
        if let Some(bound) = handle.bound.get() {
            I::record_bound(bound, value);
            return;
        }
        self.instrument.record(value, attributes);
        #[cfg(feature = "otel-bound-instruments")]
        if self.binds {
            self.bind(attributes, handle);
        }
        #[cfg(not(feature = "otel-bound-instruments"))]
        let _ = handle;
    }

    /// Binds `handle` to `attributes`, once: a racing RPC that recorded
    /// its first measurement too finds it bound. Called after the set's
    /// first measurement, which created its series.
    #[cfg(feature = "otel-bound-instruments")]
    #[cold]
    fn bind(&self, attributes: &[KeyValue], handle: &Handle<I>) {
        handle
            .bound
            .get_or_init(|| self.instrument.bind(attributes));
    }
}

/// One attribute set's instrument bound to it, bound on the set's first
/// measurement (see [`Recorder::record`]); empty (and zero-sized without
/// the feature) where the handler does not bind.
pub(super) struct Handle<I: Instrument> {
    #[cfg(feature = "otel-bound-instruments")]
    bound: OnceLock<I::Bound>,
    #[cfg(not(feature = "otel-bound-instruments"))]
    _instrument: std::marker::PhantomData<fn() -> I>,
}

impl<I: Instrument> Default for Handle<I> {
    fn default() -> Self {
        Self {
            #[cfg(feature = "otel-bound-instruments")]
            bound: OnceLock::new(),
            #[cfg(not(feature = "otel-bound-instruments"))]
            _instrument: std::marker::PhantomData,
        }
    }
}

impl<I: Instrument> std::fmt::Debug for Handle<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(feature = "otel-bound-instruments")]
        let bound = self.bound.get().is_some();
        #[cfg(not(feature = "otel-bound-instruments"))]
        let bound = false;
        f.debug_struct("Handle").field("bound", &bound).finish()
    }
}
