//! The setters both recorders share, with grpc-go's ranges: a value
//! outside its range (or NaN) is ignored, as grpc-go's setters ignore it.

/// Defines on `$recorder` (which has `fn update(&self, impl Fn(&mut
/// BackendMetrics))`) the setters and deleters of grpc-go's
/// `ServerMetricsRecorder`.
macro_rules! utilization_setters {
    ($recorder:ty) => {
        impl $recorder {
            /// Sets CPU utilization, `[0, ∞)` (it may exceed 1 past a soft
            /// limit); a value out of range is ignored.
            pub fn set_cpu_utilization(&self, value: f64) {
                self.set_scalar(value, $crate::orca::metrics::Range::NonNegative, |m| {
                    &mut m.cpu_utilization
                });
            }

            /// Unsets CPU utilization: it is left out of reports.
            pub fn delete_cpu_utilization(&self) {
                self.update(|m| m.cpu_utilization = None);
            }

            /// Sets memory utilization, `[0, 1]`; a value out of range is
            /// ignored.
            pub fn set_memory_utilization(&self, value: f64) {
                self.set_scalar(value, $crate::orca::metrics::Range::Fraction, |m| {
                    &mut m.mem_utilization
                });
            }

            /// Unsets memory utilization.
            pub fn delete_memory_utilization(&self) {
                self.update(|m| m.mem_utilization = None);
            }

            /// Sets application utilization, `[0, ∞)`; a value out of range
            /// is ignored. Weighted round robin (gRFC A58) prefers it to CPU
            /// utilization when set and not zero.
            pub fn set_application_utilization(&self, value: f64) {
                self.set_scalar(value, $crate::orca::metrics::Range::NonNegative, |m| {
                    &mut m.application_utilization
                });
            }

            /// Unsets application utilization.
            pub fn delete_application_utilization(&self) {
                self.update(|m| m.application_utilization = None);
            }

            /// Sets queries per second (the report's `rps_fractional`),
            /// `[0, ∞)`; a value out of range is ignored.
            pub fn set_qps(&self, value: f64) {
                self.set_scalar(value, $crate::orca::metrics::Range::NonNegative, |m| {
                    &mut m.qps
                });
            }

            /// Unsets queries per second.
            pub fn delete_qps(&self) {
                self.update(|m| m.qps = None);
            }

            /// Sets errors per second (the report's `eps`), `[0, ∞)`; a
            /// value out of range is ignored.
            pub fn set_eps(&self, value: f64) {
                self.set_scalar(value, $crate::orca::metrics::Range::NonNegative, |m| {
                    &mut m.eps
                });
            }

            /// Unsets errors per second.
            pub fn delete_eps(&self) {
                self.update(|m| m.eps = None);
            }

            /// Sets the named utilization `name`, `[0, 1]`; a value out of
            /// range is ignored.
            pub fn set_named_utilization(&self, name: impl Into<String>, value: f64) {
                if $crate::orca::metrics::Range::Fraction.accepts(value) {
                    let name = name.into();
                    self.update(|m| {
                        m.utilization.insert(name.clone(), value);
                    });
                }
            }

            /// Removes the named utilization `name`.
            pub fn delete_named_utilization(&self, name: &str) {
                self.update(|m| {
                    m.utilization.remove(name);
                });
            }

            /// Sets one scalar if `range` accepts `value`.
            fn set_scalar(
                &self,
                value: f64,
                range: $crate::orca::metrics::Range,
                field: fn(&mut $crate::orca::BackendMetrics) -> &mut Option<f64>,
            ) {
                if range.accepts(value) {
                    self.update(|m| *field(m) = Some(value));
                }
            }
        }
    };
}
