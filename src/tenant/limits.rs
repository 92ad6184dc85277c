//! The per-tenant limits' old path, kept for one release: they moved to
//! [`crate::limits`]. Every type and function here is a deprecated alias
//! (a use warns, naming the new path); the two traits are re-exported
//! as they are (rustc does not warn through a re-export).

/// Deprecated aliases of `crate::limits` items, each with its note.
macro_rules! moved {
    ($($(#[$cfg:meta])* $name:ident $(<$($generic:ident),+>)?;)*) => {$(
        $(#[$cfg])*
        #[doc = concat!("Moved to [`", stringify!($name), "`](crate::limits::", stringify!($name), ").")]
        #[deprecated(note = "moved to `tonic_hotpath::limits`: import it from there")]
        pub type $name $(<$($generic),+>)? = crate::limits::$name $(<$($generic),+>)?;
    )*};
}

moved! {
    InFlightSlot;
    InvalidRateError;
    LimitError;
    LimitKind;
    Limits;
    LimitsHandle;
    Rate;
    ResponseBody<B>;
    ResponseFuture<S, B>;
    TenantBudget;
    TenantLimit<S>;
    TenantLimitLayer;
    #[cfg(feature = "otel")]
    LimitMetrics;
    #[cfg(feature = "otel")]
    TenantLabels;
    #[cfg(feature = "limits-file")]
    FileWatch;
    #[cfg(feature = "limits-file")]
    LimitsFileError;
    #[cfg(feature = "limits-file")]
    OverridesError;
    #[cfg(feature = "limits-redis")]
    LeasePolicy;
    #[cfg(feature = "limits-redis")]
    RedisBackend;
    #[cfg(feature = "limits-redis")]
    RedisBackendBuilder;
    #[cfg(feature = "limits-redis")]
    RedisBackendError;
    #[cfg(feature = "limits-redis")]
    RedisBackendErrorKind;
    #[cfg(feature = "limits-redis")]
    RedisBackendStatus;
}

#[doc(no_inline)]
pub use crate::limits::{LimitObserver, TenantBudgetExt};

/// Moved to [`parse_overrides`](crate::limits::parse_overrides).
///
/// # Errors
///
/// As [`crate::limits::parse_overrides`].
#[cfg(feature = "limits-file")]
#[deprecated(note = "moved: use `tonic_hotpath::limits::parse_overrides`")]
pub fn parse_overrides(
    text: &str,
    defaults: crate::limits::Limits,
) -> Result<Vec<(super::OrgId, crate::limits::Limits)>, crate::limits::OverridesError> {
    crate::limits::parse_overrides(text, defaults)
}
