//! The client side of ORCA: endpoint weights from load reports (gRFC A58,
//! grpc-go's `weighted_round_robin`), for `tower`'s `p2c` balancer.
//!
//! - [`EndpointWeights`]: the group of replicas one balancer spreads calls
//!   over, with its [`WeightConfig`]; [`EndpointWeights::endpoint`] adds one
//!   ([`EndpointWeight`]).
//! - [`LoadReports`]: a client stats handler feeding an endpoint from
//!   its calls' `endpoint-load-metrics-bin` trailers.
//! - [`OobWatcher`]: the out-of-band `StreamCoreMetrics` stream feeding an
//!   endpoint (grpc-go's ORCA producer).
//! - [`WeightedLoad`]: an endpoint's service with a `tower::load::Load` of
//!   `(in flight + 1) / weight`, for `tower::balance::p2c::Balance`.
//!
//! Per endpoint: a channel, its client stats layer with the endpoint's
//! handler (or an out-of-band watcher on it), and the [`WeightedLoad`]
//! around it:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tonic::transport::Endpoint;
//! use tonic_hotpath::orca::client::{EndpointWeights, WeightConfig};
//! use tonic_hotpath::stats::CombinedLayer;
//! use tower::ServiceBuilder;
//! use tower::balance::p2c::Balance;
//! use tower::buffer::Buffer;
//! use tower::discover::ServiceList;
//!
//! let group = EndpointWeights::new(WeightConfig::default());
//! let mut replicas = Vec::new();
//! for addr in ["http://10.0.0.1:50051", "http://10.0.0.2:50051"] {
//!     let endpoint = group.endpoint();
//!     let channel = Endpoint::from_shared(addr)?.connect_lazy();
//!     let channel = ServiceBuilder::new()
//!         .layer(CombinedLayer::client().with(endpoint.stats_handler()))
//!         .service(channel);
//!     replicas.push(endpoint.load(channel));
//! }
//! type GrpcRequest = http::Request<tonic::body::Body>;
//! let balanced = Balance::new(ServiceList::new::<GrpcRequest>(replicas));
//! // A cloneable service for a generated client (`HealthClient::new(..)`).
//! let client: Buffer<GrpcRequest, _> = Buffer::new(balanced, 1024);
//! # let _ = client;
//! # Ok(())
//! # }
//! ```

mod config;
mod handler;
mod load;
mod oob;
mod weight;

pub use config::{WeightConfig, WeightConfigBuilder, WeightConfigError};
pub use handler::LoadReports;

/// Renamed [`LoadReports`] (a stats handler is named for what it records;
/// see [`stats`](crate::stats#naming)).
#[deprecated(note = "renamed `LoadReports`")]
pub type LoadReportHandler = LoadReports;
pub use load::{Cost, ResponseFuture, WeightedLoad, WeightedLoadLayer};
pub use oob::{OobWatcher, OobWatcherBuilder};
pub use weight::{EndpointWeight, EndpointWeights, report_weight};
