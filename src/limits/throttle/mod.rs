//! Client-side adaptive throttling ([`AdaptiveThrottleLayer`]): the client
//! stops sending what the backend would refuse, as the Google SRE book's
//! "Handling Overload" describes and grpc-go's RLS balancer implements
//! (`balancer/rls/internal/adaptive`).
//!
//! # What counts
//!
//! Every call made through the layer is a *request*; a call the backend
//! answered with anything but a refusal is an *accept*. A refusal is a
//! status in the layer's refusal codes (`UNAVAILABLE` and
//! `RESOURCE_EXHAUSTED` by default,
//! [`with_refusal_codes`](AdaptiveThrottleLayer::with_refusal_codes)),
//! wherever it is:
//!
//! - in the response headers (a trailers-only response: what tonic's
//!   server answers a handler's error with, and what a limit layer sends);
//! - in the trailers at the end of the body (read as the body passes: the
//!   call counts when its trailers arrive);
//! - in the HTTP status of a response without `grpc-status` (a proxy's
//!   bare `503` or `429`), mapped as tonic maps it (`429`, `502`, `503`,
//!   `504` are `UNAVAILABLE`);
//! - an error from the inner service (the transport failed: no
//!   connection) or from the body (a reset stream, a lost connection)
//!   counts as `UNAVAILABLE`.
//!
//! A body that ends without a status is `UNKNOWN` (an accept), as tonic
//! reports it. A call the application gives up before its status arrives
//! (a cancel, a deadline: the future or the body dropped) counts as an
//! accept: nothing refused it, and every call made must count once for
//! the formula to hold.
//!
//! # Where it differs from grpc-go
//!
//! Same defaults: a lookback of 30 s in 100 bins, K (`ratioForAccepts`)
//! 2, a padding of 8 (`requestsPadding`), and the same formula,
//! `max(0, (requests − K·accepts) / (requests + padding))`: with no
//! requests in the window nothing is throttled, and a backend refusing
//! everything still gets about `padding` calls per lookback (the SRE book
//! pads with 1; [`with_requests_padding`](AdaptiveThrottleLayer::with_requests_padding)
//! sets either). As in grpc-go, requests are accepts plus throttles,
//! registered when a call ends (a sent call) or is rejected (a local
//! rejection); a call in flight is not counted yet. The differences:
//!
//! - **No lock.** grpc-go sums its bins under a mutex on every call. Here a
//!   call reads a cached probability (one atomic load), draws a number
//!   from its thread's generator, and, at its end, adds one to a counter
//!   on its thread's stripe (a cache line of its own). The bins and the
//!   probability are updated once per bin, by the first call to pass the
//!   bin's end (a compare-and-swap picks it; the others do not wait).
//! - **One bin behind.** The probability is computed from the closed bins
//!   only, so a count weighs in at most one bin (300 ms by default) after
//!   its call ended, and leaves the window a lookback after that. During
//!   that first bin of an outage every call is still sent.
//! - **Registration.** grpc-go's RLS control channel, in its current
//!   source, calls `ShouldThrottle` but never `RegisterBackendResponse`
//!   (only its unit tests do): counting only its own rejections, which
//!   need a probability above 0 to begin with, that throttle never
//!   rejects. Here every sent call registers its outcome, as the
//!   throttler's own documentation asks.
//! - **Settings.** grpc-go fixes them; here K, the lookback, the bins, the
//!   padding and the refusal codes are settings, K at least 1
//!   ([`InvalidThrottleError`] otherwise).
//!
//! # Cost
//!
//! A sent call costs a clock read (quanta), a comparison with the open
//! bin's end, the cached probability, an `Arc` clone and drop (the call's
//! outcome outlives the service), a thread-local draw when the
//! probability is not 0, a `grpc-status` lookup in the response headers
//! and one in the trailers, and one relaxed add on its thread's stripe.
//! It allocates nothing. A rejected call allocates only its response's
//! header map (static values, nothing encoded): while a backend is down,
//! rejecting is no dearer than the call it saves.

mod body;
mod config;
mod future;
mod layer;
mod local;
mod state;
mod window;

pub use body::ResponseBody;
pub use config::InvalidThrottleError;
pub use future::ResponseFuture;
pub use layer::{AdaptiveThrottle, AdaptiveThrottleLayer};
pub use state::ThrottleCounts;
