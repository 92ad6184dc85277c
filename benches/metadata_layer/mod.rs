//! `metadata/layer_write`: what [`OutgoingMetadataLayer`] costs per call,
//! end to end (its service over a no-op inner service, in process), beside
//! what a tonic user writes without it and beside the floor.
//!
//! Printed first by `cargo bench --bench metadata` whatever the filter;
//! `tools/bench-layouts metadata` repeats it over several code layouts.
//!
//! Chains of `n` = base + appended entries: 2 = 0 + 2, 6 = 4 + 2 (grpc-go
//! #8860), 20 = 16 + 4, 50 = 40 + 10; each with [`Values::Static`] names
//! and values (as grpc-go #8860's bench and `from_static` make them) and
//! with [`Values::Runtime`] ones (base keys `'static`, appended keys and
//! every value copied once from runtime strings, so each clone is an atomic
//! increment). Rows:
//!
//! - `no layer`: the no-op service alone, called on the request. Every other
//!   row is printed as its cost over this one.
//! - `floor (pre-built pairs)`: a layer holding the chain's own `n`
//!   `HeaderName`/`HeaderValue` pairs that reserves room for them in the
//!   request headers and appends each in order (name by reference, value
//!   cloned: the fastest way into a `HeaderMap` we found). Nothing can write
//!   those entries into those headers for less.
//! - `floor + take chain from extensions`: the same, then the chain's
//!   handle removed from the request's extensions and dropped: what any
//!   layer pays to take a per-call value off the request, as
//!   `OutgoingMetadataLayer` must. (Taken after the write: taken before it,
//!   this row measured up to 18% slower at 50 entries, so the difference
//!   between two rows within about that much is heap and code placement as
//!   much as work.)
//! - `naive (MetadataMap clone)`: what a tonic user writes in a layer: clone
//!   the base `MetadataMap`, append the per-call entries, and extend the
//!   request headers with `into_headers()`.
//! - `OutgoingMetadataLayer`: the crate's layer, taking the chain from the
//!   request's extensions and writing it into the request headers.
//!
//! Every variant starts from the same request, built untimed before each
//! round: `te` and `content-type` already set (as tonic's client sets them,
//! into a map of 6 entries' room), the chain in its extensions (only the
//! crate's layer reads it). The no-op service keeps the requests, so their
//! drop is not timed; the naive layer's emptied map is dropped in its call.
//! The variants run interleaved (see [`super::interleaved`]); the ratios
//! printed after each size compare the rows' cost over no layer.

use std::fmt::Debug;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use tonic::body::Body;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataLayer};
use tower::{Layer, Service};

use super::interleaved::{self, Round};
use support::tenant::NoOp;

const FLOOR: &str = "floor (pre-built pairs)";
const FLOOR_TAKING: &str = "floor + take chain from extensions";
const NAIVE: &str = "naive (MetadataMap clone)";
const LAYER: &str = "OutgoingMetadataLayer";

/// Chain sizes as (base entries, appended entries).
pub const SHAPES: [(usize, usize); 4] = [(0, 2), (4, 2), (16, 4), (40, 10)];

/// Calls per timed round; within [`NoOp::ROOM`].
const ROUND_CALLS: usize = 8;

/// Interleaved rounds per size.
const ROUNDS: usize = 8_000;

/// How the names and values are built.
#[derive(Clone, Copy, Debug)]
pub enum Values {
    /// `'static` names and values (`MetadataValue::from_static`,
    /// `append_static`): a clone copies a pointer.
    Static,
    /// Runtime strings, each copied once into a `Bytes`: a clone is an
    /// atomic reference-count increment.
    Runtime,
}

/// One chain and the same entries as the baselines hold them.
struct Shape {
    chain: OutgoingMetadata,
    base: MetadataMap,
    appended: Vec<(HeaderName, HeaderValue)>,
    pairs: Vec<(HeaderName, HeaderValue)>,
}

impl Shape {
    fn new(base_len: usize, appended_len: usize, values: Values) -> Self {
        let leak = |text: String| -> &'static str { Box::leak(text.into_boxed_str()) };
        let mut base = MetadataMap::new();
        for i in 0..base_len {
            let value = format!("base-value-{i}");
            let value = match values {
                Values::Static => MetadataValue::from_static(leak(value)),
                Values::Runtime => value.parse().expect("ascii"),
            };
            base.insert(leak(format!("x-base-{i}")), value);
        }
        let mut chain = OutgoingMetadata::from_metadata_map(base).expect("in limits");
        for i in 0..appended_len {
            let (key, value) = (format!("x-added-{i}"), format!("added-value-{i}"));
            chain = match values {
                Values::Static => chain.append_static(leak(key), leak(value)),
                Values::Runtime => chain.append(&key, &value),
            }
            .expect("valid pair");
        }
        // The baselines share the chain's own names and values.
        let pairs: Vec<_> = chain
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let appended = pairs[base_len..].to_vec();
        let base = MetadataMap::from_headers(pairs[..base_len].iter().cloned().collect());
        Self {
            chain,
            base,
            appended,
            pairs,
        }
    }

    /// A request as tonic's client hands it to the layers below it, with
    /// the chain attached.
    fn request(&self) -> Request<Body> {
        let mut request = Request::new(Body::empty());
        let headers = request.headers_mut();
        headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        request.extensions_mut().insert(self.chain.clone());
        request
    }
}

/// A layer that edits the request with `edit`, then calls the inner
/// service.
#[derive(Clone)]
struct Edit<F, S> {
    edit: F,
    inner: S,
}

impl<F, S> Service<Request<Body>> for Edit<F, S>
where
    F: FnMut(&mut Request<Body>),
    S: Service<Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> S::Future {
        (self.edit)(&mut request);
        self.inner.call(request)
    }
}

/// The floor's write: room for the pairs, then each appended in order.
#[inline(always)]
fn append_pairs(headers: &mut HeaderMap, pairs: &[(HeaderName, HeaderValue)]) {
    headers.reserve(pairs.len());
    for (name, value) in pairs {
        // By reference: cloned straight into the map's entry, the fastest
        // way in (by value, a write of 50 costs about 1.6x).
        headers.append(name, value.clone());
    }
}

/// The floor: the pre-built pairs, reserved for and appended in order.
fn floor<S>(shape: &Shape, inner: S) -> Edit<impl FnMut(&mut Request<Body>), S> {
    let pairs = shape.pairs.clone();
    Edit {
        edit: move |request: &mut Request<Body>| append_pairs(request.headers_mut(), &pairs),
        inner,
    }
}

/// The floor plus what any layer pays to take a per-call value off the
/// request: the chain's handle removed from the extensions (and dropped).
fn floor_taking<S>(shape: &Shape, inner: S) -> Edit<impl FnMut(&mut Request<Body>), S> {
    let pairs = shape.pairs.clone();
    Edit {
        edit: move |request: &mut Request<Body>| {
            append_pairs(request.headers_mut(), &pairs);
            drop(take_chain(request));
        },
        inner,
    }
}

/// Out of line, so that the pairs' loop compiles as in [`floor`].
#[inline(never)]
fn take_chain(request: &mut Request<Body>) -> Option<OutgoingMetadata> {
    request.extensions_mut().remove()
}

/// The naive layer: clone the base map, append, extend the request headers.
fn naive<S>(shape: &Shape, inner: S) -> Edit<impl FnMut(&mut Request<Body>), S> {
    let base = shape.base.clone();
    let appended = shape.appended.clone();
    Edit {
        edit: move |request: &mut Request<Body>| {
            let mut map = base.clone();
            for (name, value) in &appended {
                // `MetadataMap::append`'s body, on the same name and value.
                map.as_mut().append(name.clone(), value.clone());
            }
            request.headers_mut().extend(map.into_headers());
        },
        inner,
    }
}

/// One call through an always-ready service, polled once.
fn call<S>(service: &mut S, request: Request<Body>) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(service.call(request)).poll(&mut cx) {
        Poll::Ready(response) => response.expect("the no-op service answers"),
        Poll::Pending => unreachable!("the no-op service is always ready"),
    }
}

/// Calls `service` on every request, keeping the responses (dropped
/// untimed).
#[inline(never)]
fn timed_calls<S>(
    service: &mut S,
    requests: &mut Vec<Request<Body>>,
    responses: &mut Vec<Response<Body>>,
) -> Duration
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: Debug,
{
    let start = Instant::now();
    responses.extend(requests.drain(..).map(|request| call(service, request)));
    start.elapsed()
}

/// One timed round of a variant: `ROUND_CALLS` calls on fresh requests.
fn round<'a, S>(shape: &'a Shape, no_op: &'a NoOp, mut service: S) -> Round<'a>
where
    S: Service<Request<Body>, Response = Response<Body>> + 'a,
    S::Error: Debug,
{
    let mut requests = Vec::with_capacity(ROUND_CALLS);
    let mut responses = Vec::with_capacity(ROUND_CALLS);
    Box::new(move || {
        no_op.clear();
        responses.clear();
        requests.extend(std::iter::repeat_with(|| shape.request()).take(ROUND_CALLS));
        timed_calls(&mut service, &mut requests, &mut responses)
    })
}

/// Checks that the three layers write the same headers in the same
/// order, so the rows compare like with like.
fn check_same_output(shape: &Shape) {
    fn written<S: Service<Request<Body>, Response = Response<Body>>>(
        shape: &Shape,
        layer: impl FnOnce(NoOp) -> S,
    ) -> Vec<(HeaderName, HeaderValue)>
    where
        S::Error: Debug,
    {
        let no_op = NoOp::new();
        call(&mut layer(no_op.clone()), shape.request());
        let [request] = <[_; 1]>::try_from(no_op.take()).expect("one request");
        request
            .headers()
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    }
    let floor = written(shape, |inner| floor(shape, inner));
    let floor_taking = written(shape, |inner| floor_taking(shape, inner));
    let naive = written(shape, |inner| naive(shape, inner));
    let layer = written(shape, |inner| OutgoingMetadataLayer::new().layer(inner));
    assert_eq!(floor.len(), 2 + shape.pairs.len());
    assert_eq!(
        floor, floor_taking,
        "the two floors write different headers"
    );
    assert_eq!(
        floor, naive,
        "floor and naive layer write different headers"
    );
    assert_eq!(
        floor, layer,
        "floor and OutgoingMetadataLayer write different headers"
    );
}

/// The interleaved measurement, one size after another.
pub fn interleaved_layer_write() {
    let shapes = [Values::Static, Values::Runtime]
        .into_iter()
        .flat_map(|values| SHAPES.map(|(base, appended)| (base, appended, values)));
    for (base_len, appended_len, values) in shapes {
        let shape = Shape::new(base_len, appended_len, values);
        check_same_output(&shape);
        let n = base_len + appended_len;
        let no_op = NoOp::new();
        let mut variants: Vec<(&str, Round<'_>)> = vec![
            ("no layer", round(&shape, &no_op, no_op.clone())),
            (FLOOR, round(&shape, &no_op, floor(&shape, no_op.clone()))),
            (
                FLOOR_TAKING,
                round(&shape, &no_op, floor_taking(&shape, no_op.clone())),
            ),
            (NAIVE, round(&shape, &no_op, naive(&shape, no_op.clone()))),
            (
                LAYER,
                round(
                    &shape,
                    &no_op,
                    OutgoingMetadataLayer::new().layer(no_op.clone()),
                ),
            ),
        ];
        let label = format!("layer write {values:?} n={n:<2}");
        let fastest =
            interleaved::print_overhead(&label, &mut variants, ROUNDS, ROUND_CALLS as u32);
        let over = |i: usize| fastest[i] - fastest[0];
        println!(
            "interleaved {label}  ratio layer/naive {:.2}x  layer/floor {:.2}x  layer/(floor + take) {:.2}x  floor/naive {:.2}x",
            over(4) / over(3),
            over(4) / over(1),
            over(4) / over(2),
            over(1) / over(3),
        );
    }
}
