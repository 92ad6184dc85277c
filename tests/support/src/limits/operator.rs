//! The stack an operator runs, shared by the scale bench's `operator` mode
//! and the test that it never refuses a call under limits it cannot reach
//! (`tenant_limits_operator`): every observer on one
//! `CombinedLayer::server()` (gRFC A66 metrics, channelz, a binary log),
//! then `RequireOrgIdLayer` and `TenantLimitLayer`.
//!
//! Needs the features `otel`, `channelz` and `limits`; the stack itself
//! (everything but [`generous_limits`]) `binlog` too.

use tonic_hotpath::limits::{Limits, Rate, TenantLimitLayer};
#[cfg(feature = "binlog")]
pub use with_log::*;

/// A `TenantLimitLayer` whose limits the runs never reach (1 000 000 in
/// flight; 10⁹ calls per second with a burst of 1 000 000), so every call
/// is admitted and counted.
pub fn generous_limits() -> TenantLimitLayer {
    let rate = Rate::new(1e9, 1_000_000).expect("valid rate");
    TenantLimitLayer::new(
        Limits::unlimited()
            .with_max_in_flight(1_000_000)
            .with_rate(rate),
    )
}

/// The stack and its log (feature `binlog`).
#[cfg(feature = "binlog")]
mod with_log {
    use std::io;

    use tonic_hotpath::binlog::proto::GrpcLogEntry;
    use tonic_hotpath::binlog::{BinaryLog, Filter, Framing, Sink};
    use tonic_hotpath::channelz::ServerEntry;
    use tonic_hotpath::limits::TenantLimitLayer;
    use tonic_hotpath::otel::OtelMetrics;
    use tonic_hotpath::stats::{Combined, CombinedLayer, ServerSide};
    use tonic_hotpath::tenant::RequireOrgIdLayer;
    use tower::ServiceBuilder;
    use tower::layer::util::{Identity, Stack};

    /// Takes whole buffers of framed entries (grpc-go's framing) and keeps
    /// nothing: a sink without the disk.
    #[derive(Debug, Default)]
    pub struct Discard;

    impl Sink for Discard {
        fn write(&mut self, entry: &GrpcLogEntry) -> io::Result<()> {
            std::hint::black_box(entry);
            Ok(())
        }

        fn framing(&self) -> Option<Framing> {
            Some(Framing::Grpc)
        }

        fn write_framed(&mut self, entries: &[u8]) -> io::Result<()> {
            std::hint::black_box(entries);
            Ok(())
        }
    }

    /// A binary log into [`Discard`] whose filter leaves out `path` (the
    /// method called: `/package.Service/Method`), as an operator logs other
    /// services: one filter lookup per call, nothing written.
    pub fn log_leaving_out(path: &str) -> BinaryLog {
        let method = path.trim_start_matches('/');
        let filter = Filter::parse(&format!("other.Service/*,-{method}")).expect("valid filter");
        assert_eq!(filter.lookup(path), None, "{path} is left out");
        BinaryLog::builder(filter, Discard)
            .build()
            .expect("writer thread")
    }

    /// The operator's observers on one layer.
    pub type Observers =
        CombinedLayer<Combined<Combined<OtelMetrics, ServerEntry>, BinaryLog>, ServerSide>;

    /// The operator's stack, outermost first.
    pub type OperatorStack = ServiceBuilder<
        Stack<TenantLimitLayer, Stack<RequireOrgIdLayer, Stack<Observers, Identity>>>,
    >;

    /// The operator's stack: `CombinedLayer::server()` with `metrics`,
    /// channelz's `ServerEntry` and `log`, then `RequireOrgIdLayer`, then
    /// `limits`.
    pub fn operator_stack(
        metrics: OtelMetrics,
        log: BinaryLog,
        limits: TenantLimitLayer,
    ) -> OperatorStack {
        let observers = CombinedLayer::server()
            .with(metrics)
            .with(ServerEntry::new())
            .with(log);
        ServiceBuilder::new()
            .layer(observers)
            .layer(RequireOrgIdLayer::new())
            .layer(limits)
    }
}
