//! Instructions per admitted call through `TenantLimitLayer`, counted
//! under callgrind (steadier than timings on a loaded machine):
//!
//! ```text
//! cargo bench --bench limits_instructions --no-run   # prints the binary
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null BIN limit 200000
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null BIN bare 200000
//! ```
//!
//! The difference of the two totals ÷ the calls is the layer's cost per
//! admitted call (one known tenant, under its in-flight limit and rate, a
//! no-op service answering at once).

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::{Request, Response};
use tonic_hotpath::limits::{Limits, Rate, TenantLimitLayer};
use tower::{Layer, Service, service_fn};

fn request() -> Request<()> {
    let mut request = Request::new(());
    *request.uri_mut() = http::Uri::from_static("/tenant.Echo/Say");
    request
        .headers_mut()
        .insert("x-scope-orgid", http::HeaderValue::from_static("team-a"));
    request
}

/// Calls `service` `calls` times, each on a fresh request, polling each
/// response future once (the no-op service answers at once).
fn run<S, B>(mut service: S, calls: u64)
where
    S: Service<Request<()>, Response = Response<B>, Error = Infallible>,
{
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..calls {
        let request = request();
        assert!(service.poll_ready(&mut cx).is_ready(), "always ready");
        let future = pin!(service.call(request));
        match future.poll(&mut cx) {
            Poll::Ready(Ok(response)) => drop(black_box(response)),
            _ => panic!("the no-op service answers at once"),
        }
    }
}

/// The no-op service.
fn no_op() -> impl Service<Request<()>, Response = Response<()>, Error = Infallible> + Clone {
    service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) })
}

/// `calls` admitted calls of one known tenant (its state made by a first
/// call, not counted apart: one call in `calls`).
fn run_limited(calls: u64) {
    let rate = Rate::new(1e9, 1_000_000).unwrap_or_else(|e| panic!("{e}"));
    let layer = TenantLimitLayer::new(
        Limits::unlimited()
            .with_max_in_flight(1_000_000)
            .with_rate(rate),
    );
    run(layer.layer(no_op()), calls);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes `--bench`: run a short smoke of both.
    let (which, calls) = match (args.get(1).map(String::as_str), args.get(2)) {
        (Some(which @ ("limit" | "bare")), Some(calls)) => {
            (which.to_owned(), calls.parse().unwrap_or(100_000))
        }
        _ => ("both".to_owned(), 1_000),
    };
    match which.as_str() {
        "bare" => run(no_op(), calls),
        "limit" => run_limited(calls),
        _ => {
            run(no_op(), calls);
            run_limited(calls);
            println!("limits_instructions: run under callgrind (see the file's docs)");
        }
    }
}
