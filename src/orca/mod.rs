//! ORCA backend load reports (gRFC A51), as grpc-go's `orca` package has
//! them, and the client side no Rust stack had: a tonic server reports its
//! load (CPU, memory and application utilization, queries and errors per
//! second, named utilizations, per-call request costs) in each call's
//! `endpoint-load-metrics-bin` trailer and on the out-of-band
//! `xds.service.orca.v3.OpenRcaService` stream; gRPC's
//! `weighted_round_robin` (grpc-go, grpc-java, C-core), grpc-js and Envoy's
//! `client_side_weighted_round_robin` weigh the replicas by it, and so does
//! a tonic client through `tower`'s `p2c` balancer.
//!
//! - [`BackendMetrics`]: one set of values, with grpc-go's merge (a call's
//!   values win over the process's); [`ServerMetricsProvider`]: what gives
//!   a process's current values.
//! - [`ServerMetricsRecorder`]: the process's values, set from anywhere,
//!   read lock-free; [`CallMetricsRecorder`]: one call's, taken by its
//!   handler with [`CallMetricsRecorder::current`].
//! - [`CallRates`]: queries and errors per second from the stats layer's
//!   own counts, published into a [`ServerMetricsRecorder`].
//! - [`server::CallMetricsLayer`]: writes each call's report into its
//!   trailers.
//! - [`ReportFormat`]: the header a server writes a report into;
//!   [`load_report_from`]: a report read from a call's trailers, with
//!   grpc-go's rules; [`parse_endpoint_load_metrics`]: Envoy's
//!   `endpoint-load-metrics` header (`BIN`, `TEXT`, `JSON`), with Envoy's.
//! - [`OrcaService`]: the out-of-band `OpenRcaService` (grpc-go's
//!   `orca.Service`): a provider's metrics at once, then on every interval.
//! - [`client`]: gRFC A58's endpoint weights from the reports (per-call
//!   trailers through a stats handler, or the out-of-band stream), as a
//!   `tower::load::Load` for `tower`'s `p2c` balancer.

pub mod client;
mod encode;
mod envoy;
mod header;
pub(crate) mod metrics;
mod rates;
mod recorder;
pub mod server;
mod service;

#[allow(deprecated)]
pub use header::{ENVOY_HEADER, GRPC_TRAILER};
pub use header::{
    LoadReportError, LoadReportErrorKind, ReportFormat, load_report_from,
    parse_endpoint_load_metrics,
};
pub use metrics::{BackendMetrics, ServerMetricsProvider};
pub use rates::CallRates;
pub use recorder::{CallMetricsRecorder, ServerMetricsRecorder};
pub use service::{OrcaService, OrcaServiceBuilder, ReportStream};

/// Renamed [`OrcaService`]: the old name was the generated trait's
/// (`proto::…::open_rca_service_server::OpenRcaService`).
#[deprecated(note = "renamed `OrcaService`")]
pub type OpenRcaService = OrcaService;
/// Renamed [`OrcaServiceBuilder`].
#[deprecated(note = "renamed `OrcaServiceBuilder`")]
pub type OpenRcaServiceBuilder = OrcaServiceBuilder;

/// The generated messages of `xds.data.orca.v3` (`OrcaLoadReport`) and
/// `xds.service.orca.v3` (`OrcaLoadReportRequest`, and the tonic client and
/// server of `OpenRcaService`), from cncf/xds's `.proto` files, regenerated
/// with `tools/gen-protos`. The report's maps are `BTreeMap`s, so one report
/// always encodes to the same bytes.
#[allow(missing_docs, clippy::all, clippy::pedantic, rustdoc::all)]
pub mod proto {
    /// `xds.*`
    pub mod xds {
        /// `xds.data.*`
        pub mod data {
            /// `xds.data.orca.*`
            pub mod orca {
                /// `xds.data.orca.v3`
                pub mod v3 {
                    include!("generated/xds.data.orca.v3.rs");
                }
            }
        }
        /// `xds.service.*`
        pub mod service {
            /// `xds.service.orca.*`
            pub mod orca {
                /// `xds.service.orca.v3`
                pub mod v3 {
                    include!("generated/xds.service.orca.v3.rs");
                }
            }
        }
    }
}

pub use proto::xds::data::orca::v3::OrcaLoadReport;
