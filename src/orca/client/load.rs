//! The balancer's view of an endpoint ([`WeightedLoad`]): a
//! `tower::load::Load` from its in-flight calls and its weight, for
//! `tower::balance::p2c`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Instant;

use tower::Layer;
use tower::Service;
use tower::load::Load;

use super::weight::EndpointWeight;

/// An endpoint's service, counting its calls in flight, whose
/// [`Load`] is `(in flight + 1) / weight`: `tower::balance::p2c::Balance`
/// then sends each call to the less loaded of two replicas, in proportion
/// to the weights their load reports give (gRFC A58).
///
/// The weight is the endpoint's usable weight, or the mean of the usable
/// weights of its group when it has none; when no endpoint of the group
/// has one, every weight counts as 1 and the load is the calls in flight
/// plus one (tower's `PendingRequests`). A call is in flight from
/// [`call`](Service::call) until its response future completes or is
/// dropped (the response's headers for a tonic client).
///
/// ```
/// use std::convert::Infallible;
///
/// use tonic_hotpath::orca::client::EndpointWeights;
/// use tower::load::Load;
///
/// let group = EndpointWeights::default();
/// let endpoint = group.endpoint();
/// let service = endpoint.load(tower::service_fn(|_: ()| async { Ok::<_, Infallible>(()) }));
/// assert_eq!(service.load().value(), 1.0); // nothing in flight, no weights
/// ```
pub struct WeightedLoad<S> {
    inner: S,
    endpoint: EndpointWeight,
}

impl EndpointWeight {
    /// `service` (this endpoint's channel, with its stats layer) as the
    /// balancer sees it.
    pub fn load<S>(&self, service: S) -> WeightedLoad<S> {
        WeightedLoad {
            inner: service,
            endpoint: self.clone(),
        }
    }

    /// A layer making this endpoint's [`WeightedLoad`] service.
    pub fn load_layer(&self) -> WeightedLoadLayer {
        WeightedLoadLayer {
            endpoint: self.clone(),
        }
    }
}

impl<S> WeightedLoad<S> {
    /// The endpoint it reads.
    pub fn endpoint(&self) -> &EndpointWeight {
        &self.endpoint
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The load at `now`.
    pub fn load_at(&self, now: Instant) -> Cost {
        let endpoint = &self.endpoint;
        let calls = (endpoint.in_flight() + 1) as f64;
        let stamp = endpoint.stamp(now);
        match endpoint.group().mean(stamp) {
            None => Cost(calls),
            Some(mean) => Cost(calls / endpoint.weight_at_stamp(stamp).unwrap_or(mean)),
        }
    }
}

impl<S> Load for WeightedLoad<S> {
    type Metric = Cost;

    fn load(&self) -> Cost {
        self.load_at(Instant::now())
    }
}

impl<S, Request> Service<Request> for WeightedLoad<S>
where
    S: Service<Request>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        self.endpoint
            .state()
            .in_flight
            .fetch_add(1, Ordering::Relaxed);
        ResponseFuture {
            inner: self.inner.call(request),
            in_flight: Some(InFlight {
                endpoint: self.endpoint.clone(),
            }),
        }
    }
}

impl<S: Clone> Clone for WeightedLoad<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            endpoint: self.endpoint.clone(),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for WeightedLoad<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeightedLoad")
            .field("inner", &self.inner)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

/// A layer making an endpoint's [`WeightedLoad`] service
/// ([`EndpointWeight::load_layer`]).
#[derive(Clone, Debug)]
pub struct WeightedLoadLayer {
    endpoint: EndpointWeight,
}

impl<S> Layer<S> for WeightedLoadLayer {
    type Service = WeightedLoad<S>;

    fn layer(&self, inner: S) -> WeightedLoad<S> {
        self.endpoint.load(inner)
    }
}

/// A [`WeightedLoad`] load: lower is less loaded.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Cost(f64);

impl Cost {
    /// `(in flight + 1) / weight`.
    pub fn value(self) -> f64 {
        self.0
    }
}

/// One call in flight; ends when dropped.
struct InFlight {
    endpoint: EndpointWeight,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.endpoint
            .state()
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`WeightedLoad`]: the call is in flight
    /// until it completes or is dropped.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        in_flight: Option<InFlight>,
    }
}

impl<F: Future> Future for ResponseFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let output = std::task::ready!(this.inner.poll(cx));
        this.in_flight.take();
        Poll::Ready(output)
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("in_flight", &self.in_flight.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use super::*;
    use crate::orca::OrcaLoadReport;
    use crate::orca::client::{EndpointWeights, WeightConfig};

    fn report(cpu: f64) -> OrcaLoadReport {
        OrcaLoadReport {
            cpu_utilization: cpu,
            rps_fractional: 100.0,
            ..OrcaLoadReport::default()
        }
    }

    #[test]
    fn cost_uses_weight_mean_and_in_flight() {
        let config = WeightConfig::builder()
            .blackout_period(Duration::ZERO)
            .weight_update_period(Duration::ZERO)
            .build()
            .unwrap();
        let group = EndpointWeights::new(config);
        let service = || tower::service_fn(|_: ()| async { Ok::<_, Infallible>(()) });
        let (a, b, c) = (group.endpoint(), group.endpoint(), group.endpoint());
        let (la, lb, lc) = (a.load(service()), b.load(service()), c.load(service()));
        let t0 = Instant::now();
        // No weights: in flight + 1.
        assert_eq!(la.load_at(t0).value(), 1.0);
        a.on_load_report_at(&report(0.5), t0); // 200
        b.on_load_report_at(&report(0.25), t0); // 400
        assert_eq!(la.load_at(t0).value(), 1.0 / 200.0);
        assert_eq!(lb.load_at(t0).value(), 1.0 / 400.0);
        // c has none: the mean, 300.
        assert_eq!(lc.load_at(t0).value(), 1.0 / 300.0);
        assert!(lb.load_at(t0) < lc.load_at(t0) && lc.load_at(t0) < la.load_at(t0));
    }

    #[tokio::test]
    async fn in_flight_lasts_until_the_response() {
        use tower::ServiceExt;

        let group = EndpointWeights::default();
        let endpoint = group.endpoint();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let rx = std::sync::Mutex::new(Some(rx));
        let mut service = endpoint.load(tower::service_fn(move |_: ()| {
            let rx = rx.lock().unwrap().take();
            async move {
                if let Some(rx) = rx {
                    let _ = rx.await;
                }
                Ok::<_, Infallible>(())
            }
        }));
        let pending = service.ready().await.unwrap().call(());
        assert_eq!(endpoint.in_flight(), 1);
        assert_eq!(service.load().value(), 2.0);
        let dropped = service.ready().await.unwrap().call(());
        assert_eq!(endpoint.in_flight(), 2);
        drop(dropped);
        assert_eq!(endpoint.in_flight(), 1);
        tx.send(()).unwrap();
        pending.await.unwrap();
        assert_eq!(endpoint.in_flight(), 0);
    }
}
