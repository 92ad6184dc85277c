//! [`RetryLayer`] and its service [`Retry`].

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tower::{BoxError, Layer, Service};

use super::body::ChannelBudget;
use super::config::RetryConfig;
use super::error::RetryConfigError;
use super::future::ResponseFuture;
use super::response::ResponseBody;
use super::throttle::Throttle;

/// What every call of a channel shares.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) config: Arc<RetryConfig>,
    pub(crate) throttle: Option<Arc<Throttle>>,
    pub(crate) per_call_buffer: usize,
    pub(crate) channel: Option<Arc<ChannelBudget>>,
}

/// gRFC A6 retries for a tonic client: each call whose method has a
/// [`RetryPolicy`](super::RetryPolicy) is tried again when an attempt
/// fails with a retryable code before the server sent response headers,
/// as grpc-go's client does; any call is tried again at once when the
/// server never saw its first attempt (a refused stream, a graceful
/// GOAWAY). Put it above `Channel` (and above
/// [`CombinedLayer::client`](crate::stats::CombinedLayer::client), so
/// that each attempt is an RPC to the stats handlers):
///
/// ```
/// use tonic_hotpath::retry::RetryLayer;
///
/// let retry = RetryLayer::from_service_config(r#"{
///   "methodConfig": [{
///     "name": [{"service": "echo.Echo"}],
///     "retryPolicy": {
///       "maxAttempts": 3, "initialBackoff": "0.05s", "maxBackoff": "1s",
///       "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]
///     }
///   }],
///   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
/// }"#)?;
/// # async fn connect(retry: RetryLayer) -> Result<(), Box<dyn std::error::Error>> {
/// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
///     .connect()
///     .await?;
/// let channel = tower::ServiceBuilder::new().layer(retry).service(channel);
/// // EchoClient::new(channel), as with the bare channel.
/// # let _ = channel;
/// # Ok(())
/// # }
/// # Ok::<(), tonic_hotpath::retry::RetryConfigError>(())
/// ```
///
/// What it keeps, per call, is the request's encoded messages (the
/// `Bytes` tonic made, shared, not copied) until the call commits: when
/// response headers arrive, when the call ends, or when the messages kept
/// pass [`per_call_buffer`](Self::per_call_buffer) (256 KiB, grpc-go's
/// `MaxRetryRPCBufferSize`) or, if set, the channel's
/// [`per_channel_buffer`](Self::per_channel_buffer); past either bound the
/// call goes on but is not retried again.
///
/// Each attempt after the first carries `grpc-previous-rpc-attempts` and
/// the `grpc-timeout` that remains of the call's: the caller's deadline
/// covers every attempt and every backoff. A server's
/// `grpc-retry-pushback-ms` sets the next backoff; a negative or
/// malformed one ends the call.
#[derive(Debug, Clone)]
pub struct RetryLayer {
    settings: Settings,
}

impl RetryLayer {
    /// The per-call bound on kept request bytes unless set otherwise:
    /// 256 KiB, grpc-go's default `MaxRetryRPCBufferSize`.
    pub const DEFAULT_PER_CALL_BUFFER: usize = 256 * 1024;

    /// A layer applying `config`'s policies; its retry budget (if any) is
    /// shared by every service this layer makes.
    pub fn new(config: RetryConfig) -> Self {
        let throttle = config
            .retry_throttling()
            .map(|throttling| Arc::new(Throttle::new(throttling)));
        Self {
            settings: Settings {
                config: Arc::new(config),
                throttle,
                per_call_buffer: Self::DEFAULT_PER_CALL_BUFFER,
                channel: None,
            },
        }
    }

    /// A layer applying the retry part of a gRPC service config (JSON, as
    /// grpc-go's `WithDefaultServiceConfig` takes it).
    pub fn from_service_config(json: &str) -> Result<Self, RetryConfigError> {
        RetryConfig::from_json(json).map(Self::new)
    }

    /// Bounds the request bytes one call keeps for retries; past it the
    /// call is no longer retried.
    pub fn per_call_buffer(mut self, bytes: usize) -> Self {
        self.settings.per_call_buffer = bytes;
        self
    }

    /// Bounds the request bytes all calls through this layer keep
    /// together (none by default, as grpc-go; grpc-java's is 16 MiB): a
    /// call whose next message would pass it is no longer retried. It
    /// costs two atomic operations on one shared counter per message kept.
    pub fn per_channel_buffer(mut self, bytes: usize) -> Self {
        self.settings.channel = Some(Arc::new(ChannelBudget::new(bytes)));
        self
    }

    /// The tokens in the channel's retry budget now, if it has one.
    pub fn retry_tokens(&self) -> Option<f64> {
        self.settings
            .throttle
            .as_ref()
            .map(|throttle| throttle.tokens())
    }

    /// The request bytes the channel's calls keep now, if it is bounded.
    pub fn channel_buffer_used(&self) -> Option<usize> {
        self.settings.channel.as_ref().map(|channel| channel.used())
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Retry<S> {
        Retry {
            inner,
            settings: self.settings.clone(),
        }
    }
}

/// The service of [`RetryLayer`].
#[derive(Debug, Clone)]
pub struct Retry<S> {
    inner: S,
    settings: Settings,
}

impl<S> Retry<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, B, RB> Service<Request<B>> for Retry<S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>> + Clone,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<ResponseBody<RB>>;
    type Error = BoxError;
    type Future = ResponseFuture<S, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The ready service makes the first attempt; its clone takes its
        // place here (tower's `Buffer` pattern).
        let clone = self.inner.clone();
        let service = std::mem::replace(&mut self.inner, clone);
        ResponseFuture::new(service, request, &self.settings)
    }
}
