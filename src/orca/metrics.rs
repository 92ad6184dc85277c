//! One set of backend metrics ([`BackendMetrics`], grpc-go's
//! `orca.ServerMetrics`): what a recorder holds, how a call's values
//! override the process's, and the report they become.

use std::collections::BTreeMap;

use super::proto::xds::data::orca::v3::OrcaLoadReport;

/// A set of backend metrics, as grpc-go's `orca.ServerMetrics`: the
/// process-wide values of a [`ServerMetricsRecorder`](super::ServerMetricsRecorder),
/// or one call's values of a [`CallMetricsRecorder`](super::CallMetricsRecorder).
///
/// A scalar that was never set (or was deleted) is `None` and is left out of
/// the report (grpc-go keeps `-1` for it). The ranges are gRFC A51's and
/// grpc-go's setters': `cpu_utilization`, `application_utilization`, `qps`
/// and `eps` are `[0, ∞)`; `mem_utilization` and each named `utilization`
/// are `[0, 1]`; `request_cost` and `named_metrics` take any value. The
/// recorders ignore a value out of its range, as grpc-go's do; this plain
/// struct holds whatever it is given.
///
/// ```
/// use tonic_hotpath::orca::BackendMetrics;
///
/// let mut process = BackendMetrics::default();
/// process.cpu_utilization = Some(0.5);
/// process.qps = Some(100.0);
///
/// let mut call = BackendMetrics::default();
/// call.cpu_utilization = Some(0.9);
/// call.request_cost.insert("db_rows".to_owned(), 12.0);
///
/// // A call's values win over the process's (gRFC A51).
/// process.merge(&call);
/// let report = process.to_report();
/// assert_eq!(report.cpu_utilization, 0.9);
/// assert_eq!(report.rps_fractional, 100.0);
/// assert_eq!(report.request_cost["db_rows"], 12.0);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct BackendMetrics {
    /// CPU utilization, `[0, ∞)` (may exceed 1 past a soft limit).
    pub cpu_utilization: Option<f64>,
    /// Memory utilization, `[0, 1]`.
    pub mem_utilization: Option<f64>,
    /// Application-defined utilization, `[0, ∞)`; gRFC A58's weights prefer
    /// it to `cpu_utilization` when it is set and not zero.
    pub application_utilization: Option<f64>,
    /// Queries per second (the report's `rps_fractional`), `[0, ∞)`.
    pub qps: Option<f64>,
    /// Errors per second (the report's `eps`), `[0, ∞)`.
    pub eps: Option<f64>,
    /// Named utilizations, each `[0, 1]`.
    pub utilization: BTreeMap<String, f64>,
    /// Per-request costs (per call only: never sent out of band).
    pub request_cost: BTreeMap<String, f64>,
    /// Named metrics of any value (per call only: never sent out of band).
    pub named_metrics: BTreeMap<String, f64>,
}

impl BackendMetrics {
    /// Whether nothing is set: no scalar, no named value.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Overrides these values with every value set in `over`, as grpc-go's
    /// `ServerMetrics.merge`: a scalar set in `over` replaces this one, and
    /// each named value of `over` replaces the value of the same name.
    pub fn merge(&mut self, over: &BackendMetrics) {
        for (mine, theirs) in [
            (&mut self.cpu_utilization, over.cpu_utilization),
            (&mut self.mem_utilization, over.mem_utilization),
            (
                &mut self.application_utilization,
                over.application_utilization,
            ),
            (&mut self.qps, over.qps),
            (&mut self.eps, over.eps),
        ] {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
        for (mine, theirs) in [
            (&mut self.utilization, &over.utilization),
            (&mut self.request_cost, &over.request_cost),
            (&mut self.named_metrics, &over.named_metrics),
        ] {
            for (name, value) in theirs {
                mine.insert(name.clone(), *value);
            }
        }
    }

    /// The load report these values make (grpc-go's `toLoadReportProto`):
    /// an unset scalar is left at zero, which proto3 does not encode.
    pub fn to_report(&self) -> OrcaLoadReport {
        OrcaLoadReport {
            cpu_utilization: self.cpu_utilization.unwrap_or(0.0),
            mem_utilization: self.mem_utilization.unwrap_or(0.0),
            application_utilization: self.application_utilization.unwrap_or(0.0),
            rps_fractional: self.qps.unwrap_or(0.0),
            eps: self.eps.unwrap_or(0.0),
            utilization: self.utilization.clone(),
            request_cost: self.request_cost.clone(),
            named_metrics: self.named_metrics.clone(),
            ..OrcaLoadReport::default()
        }
    }

    /// The values a report carries; a scalar at zero reads as unset (proto3
    /// cannot tell them apart), as it does to every ORCA reader.
    pub fn from_report(report: &OrcaLoadReport) -> Self {
        let set = |value: f64| (value != 0.0).then_some(value);
        Self {
            cpu_utilization: set(report.cpu_utilization),
            mem_utilization: set(report.mem_utilization),
            application_utilization: set(report.application_utilization),
            qps: set(report.rps_fractional),
            eps: set(report.eps),
            utilization: report.utilization.clone(),
            request_cost: report.request_cost.clone(),
            named_metrics: report.named_metrics.clone(),
        }
    }
}

/// What gives a process's current metrics (grpc-go's
/// `orca.ServerMetricsProvider`): the out-of-band service sends them, and
/// the per-call trailer starts from them before the call's own values.
pub trait ServerMetricsProvider: Send + Sync + 'static {
    /// The current values (a copy: later changes do not show in it).
    fn server_metrics(&self) -> BackendMetrics;
}

/// A shared provider provides.
impl<P: ServerMetricsProvider + ?Sized> ServerMetricsProvider for std::sync::Arc<P> {
    fn server_metrics(&self) -> BackendMetrics {
        P::server_metrics(self)
    }
}

/// Which range a metric's setter accepts (grpc-go's setters): a value
/// outside it, or NaN, is ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Range {
    /// `[0, ∞)`: CPU and application utilization, QPS, EPS.
    NonNegative,
    /// `[0, 1]`: memory utilization, named utilizations.
    Fraction,
    /// Any value but NaN: request costs, named metrics.
    Any,
}

impl Range {
    /// Whether `value` may be recorded.
    #[inline]
    pub(crate) fn accepts(self, value: f64) -> bool {
        match self {
            Range::NonNegative => value >= 0.0,
            Range::Fraction => (0.0..=1.0).contains(&value),
            Range::Any => !value.is_nan(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_grpc_go_setters() {
        assert!(Range::NonNegative.accepts(0.0));
        assert!(Range::NonNegative.accepts(7.5));
        assert!(!Range::NonNegative.accepts(-0.01));
        assert!(!Range::NonNegative.accepts(f64::NAN));
        assert!(Range::Fraction.accepts(1.0));
        assert!(!Range::Fraction.accepts(1.01));
        assert!(!Range::Fraction.accepts(-1.0));
        assert!(Range::Any.accepts(-5.0));
        assert!(!Range::Any.accepts(f64::NAN));
    }

    #[test]
    fn merge_lets_the_call_win_and_keeps_the_rest() {
        let mut process = BackendMetrics {
            cpu_utilization: Some(0.5),
            mem_utilization: Some(0.25),
            qps: Some(10.0),
            ..BackendMetrics::default()
        };
        process.utilization.insert("disk".into(), 0.5);
        process.utilization.insert("net".into(), 0.1);
        let mut call = BackendMetrics {
            cpu_utilization: Some(0.75),
            ..BackendMetrics::default()
        };
        call.utilization.insert("disk".into(), 0.9);
        call.named_metrics.insert("rows".into(), 3.0);
        process.merge(&call);
        assert_eq!(process.cpu_utilization, Some(0.75));
        assert_eq!(process.mem_utilization, Some(0.25));
        assert_eq!(process.qps, Some(10.0));
        assert_eq!(process.utilization["disk"], 0.9);
        assert_eq!(process.utilization["net"], 0.1);
        assert_eq!(process.named_metrics["rows"], 3.0);
    }

    #[test]
    fn report_round_trips_set_values() {
        let mut metrics = BackendMetrics {
            cpu_utilization: Some(0.821),
            application_utilization: Some(1.5),
            eps: Some(2.0),
            ..BackendMetrics::default()
        };
        metrics.request_cost.insert("cost".into(), 3456.32);
        let report = metrics.to_report();
        assert_eq!(report.mem_utilization, 0.0);
        assert_eq!(BackendMetrics::from_report(&report), metrics);
        assert!(BackendMetrics::default().is_empty());
        assert!(!metrics.is_empty());
    }
}
