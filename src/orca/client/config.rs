//! How reports become weights ([`WeightConfig`]): gRFC A58's settings of
//! `weighted_round_robin`, with grpc-go's defaults.

use std::fmt;
use std::time::Duration;

/// gRFC A58's weight settings (grpc-go's `weighted_round_robin` config),
/// for an [`EndpointWeights`](super::EndpointWeights) group.
///
/// `Default` is grpc-go's: a 10 s blackout period, a 3 min weight
/// expiration period, a 1 s weight update period and an error utilization
/// penalty of 1.0.
///
/// ```
/// use std::time::Duration;
///
/// use tonic_hotpath::orca::client::WeightConfig;
///
/// let config = WeightConfig::builder()
///     .blackout_period(Duration::ZERO)
///     .error_utilization_penalty(2.0)
///     .build()?;
/// assert_eq!(config.blackout_period(), Duration::ZERO);
/// assert_eq!(config.weight_expiration_period(), Duration::from_secs(180));
/// assert!(WeightConfig::builder().error_utilization_penalty(-1.0).build().is_err());
/// # Ok::<(), tonic_hotpath::orca::client::WeightConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeightConfig {
    blackout_period: Duration,
    weight_expiration_period: Duration,
    weight_update_period: Duration,
    error_utilization_penalty: f64,
}

impl Default for WeightConfig {
    fn default() -> Self {
        Self {
            blackout_period: Duration::from_secs(10),
            weight_expiration_period: Duration::from_secs(180),
            weight_update_period: Duration::from_secs(1),
            error_utilization_penalty: 1.0,
        }
    }
}

impl WeightConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> WeightConfigBuilder {
        WeightConfigBuilder {
            config: Self::default(),
        }
    }

    /// How long an endpoint must have reported (non-empty reports, without
    /// a gap of the expiration period) before its weight is used; zero
    /// uses a weight from the first report on.
    pub fn blackout_period(&self) -> Duration {
        self.blackout_period
    }

    /// How long after its last report an endpoint's weight stops being
    /// used; the blackout period then starts again with its next report.
    pub fn weight_expiration_period(&self) -> Duration {
        self.weight_expiration_period
    }

    /// How often the group's mean weight (the weight of endpoints without
    /// a usable one of their own) is recomputed, as grpc-go recomputes its
    /// weights; zero recomputes it on every pick. With no blackout period,
    /// an endpoint's first report also recomputes it. An endpoint's own
    /// weight is always read as it is now.
    pub fn weight_update_period(&self) -> Duration {
        self.weight_update_period
    }

    /// The multiplier of the error rate (`eps / qps`) added to the
    /// utilization.
    pub fn error_utilization_penalty(&self) -> f64 {
        self.error_utilization_penalty
    }
}

/// Builds a [`WeightConfig`]; every setting not given keeps its default.
#[derive(Clone, Copy, Debug)]
pub struct WeightConfigBuilder {
    config: WeightConfig,
}

impl WeightConfigBuilder {
    /// See [`WeightConfig::blackout_period`] (default 10 s).
    #[must_use]
    pub fn blackout_period(mut self, period: Duration) -> Self {
        self.config.blackout_period = period;
        self
    }

    /// See [`WeightConfig::weight_expiration_period`] (default 3 min).
    #[must_use]
    pub fn weight_expiration_period(mut self, period: Duration) -> Self {
        self.config.weight_expiration_period = period;
        self
    }

    /// See [`WeightConfig::weight_update_period`] (default 1 s).
    #[must_use]
    pub fn weight_update_period(mut self, period: Duration) -> Self {
        self.config.weight_update_period = period;
        self
    }

    /// See [`WeightConfig::error_utilization_penalty`] (default 1.0); must
    /// be finite and not negative, as grpc-go requires.
    #[must_use]
    pub fn error_utilization_penalty(mut self, penalty: f64) -> Self {
        self.config.error_utilization_penalty = penalty;
        self
    }

    /// The config, or why it is invalid (a negative or non-finite penalty).
    pub fn build(self) -> Result<WeightConfig, WeightConfigError> {
        let penalty = self.config.error_utilization_penalty;
        if !(penalty.is_finite() && penalty >= 0.0) {
            return Err(WeightConfigError { penalty });
        }
        Ok(self.config)
    }
}

/// A [`WeightConfig`] that cannot be built: its error utilization penalty
/// is negative or not finite (grpc-go: "errorUtilizationPenalty must be
/// non-negative").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeightConfigError {
    penalty: f64,
}

impl fmt::Display for WeightConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error utilization penalty must be finite and non-negative, got {}",
            self.penalty
        )
    }
}

impl std::error::Error for WeightConfigError {}
