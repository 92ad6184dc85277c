//! Attribute sets, built once per method (and, with the tenant attribute,
//! once per method and tenant recorded) and handed to every RPC of that
//! method by reference: recording a measurement clones no `KeyValue` and
//! allocates nothing in this crate. Beside each set, its [`Handle`]s to
//! the instruments it is recorded with (bound instruments, see `bound`).

use std::sync::Arc;
#[cfg(feature = "tenant")]
use std::sync::OnceLock;

use opentelemetry::metrics::Counter;
use opentelemetry::{Key, KeyValue, StringValue, Value};
use tonic::Code;

use super::bound::Handle;
use super::instruments::{EndedHandles, StartedHandles};
use crate::stats::Side;

/// The value recorded for methods and targets that are not recorded as
/// they are (A66).
pub(super) const OTHER: &str = "other";

pub(super) const METHOD: Key = Key::from_static_str("grpc.method");
pub(super) const STATUS: Key = Key::from_static_str("grpc.status");
pub(super) const TARGET: Key = Key::from_static_str("grpc.target");

/// A66's `grpc.status` values (gRPC's code names), indexed by code.
const STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// An attribute set, and the handles its measurements are recorded
/// through.
#[derive(Debug, Clone, Copy)]
pub(super) struct Series<'a, H> {
    pub(super) attrs: &'a [KeyValue],
    pub(super) handles: &'a H,
}

/// One method's attribute sets. `started` is `[grpc.method, grpc.target]`
/// and `ended[code]` is `[grpc.method, grpc.status, grpc.target]`; the
/// server records the same sets without their last element (A66 gives the
/// server no target). Each set has its handles beside it.
#[derive(Debug)]
pub(super) struct MethodAttrs {
    started: [KeyValue; 2],
    ended: [[KeyValue; 3]; STATUS_NAMES.len()],
    started_handles: StartedHandles,
    ended_handles: [EndedHandles; STATUS_NAMES.len()],
}

impl MethodAttrs {
    pub(super) fn new(method: &Value, target: &Value) -> Self {
        let method = KeyValue::new(METHOD, method.clone());
        let target = KeyValue::new(TARGET, target.clone());
        Self {
            started: [method.clone(), target.clone()],
            ended: std::array::from_fn(|code| {
                [
                    method.clone(),
                    KeyValue::new(STATUS, STATUS_NAMES[code]),
                    target.clone(),
                ]
            }),
            started_handles: StartedHandles::default(),
            ended_handles: std::array::from_fn(|_| EndedHandles::default()),
        }
    }

    /// The attributes of `*.started` on `side`, with their handle.
    pub(super) fn started(&self, side: Side) -> Series<'_, Handle<Counter<u64>>> {
        let attrs = match side {
            Side::Server => &self.started[..1],
            Side::Client => &self.started[..],
        };
        Series {
            attrs,
            handles: self.started_handles.side(side),
        }
    }

    /// The attributes of the measurements recorded at the end of an RPC
    /// that ended with `code` on `side`, with their handles (`side`'s are
    /// those to read).
    pub(super) fn ended(&self, side: Side, code: Code) -> Series<'_, EndedHandles> {
        let code = status_index(code);
        let set = &self.ended[code];
        let attrs = match side {
            Side::Server => &set[..2],
            Side::Client => &set[..],
        };
        Series {
            attrs,
            handles: &self.ended_handles[code],
        }
    }
}

/// `code`'s index in [`STATUS_NAMES`]: every `Code` has a name; a code
/// tonic adds later counts as UNKNOWN.
#[inline]
fn status_index(code: Code) -> usize {
    if (code as usize) < STATUS_NAMES.len() {
        code as usize
    } else {
        Code::Unknown as usize
    }
}

/// The attribute sets of one method for one tenant: `started` is
/// `[grpc.method, tenant, grpc.target]` and `ended[code]` is
/// `[grpc.method, grpc.status, tenant, grpc.target]`; the server records
/// them without their last element, as [`MethodAttrs`]. Built on the first
/// RPC of that method and tenant, each `ended` set (with its handles) on
/// the first RPC that ends with its code (most combinations see only a
/// few codes: this keeps a combination at about 600 bytes instead of
/// 4 KiB).
#[cfg(feature = "tenant")]
#[derive(Debug)]
pub(super) struct TenantAttrs {
    started: [KeyValue; 3],
    started_handles: StartedHandles,
    ended: [OnceLock<Box<TenantEnded>>; STATUS_NAMES.len()],
}

/// One of [`TenantAttrs`]' `ended` sets, with its handles.
#[cfg(feature = "tenant")]
#[derive(Debug)]
struct TenantEnded {
    set: [KeyValue; 4],
    handles: EndedHandles,
}

#[cfg(feature = "tenant")]
impl TenantAttrs {
    /// `method`'s sets with `tenant` (the tenant attribute) added.
    pub(super) fn new(method: &MethodAttrs, tenant: &KeyValue) -> Self {
        let [method, target] = method.started.clone();
        Self {
            started: [method, tenant.clone(), target],
            started_handles: StartedHandles::default(),
            ended: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// The attributes of `*.started` on `side`, with their handle.
    #[inline]
    pub(super) fn started(&self, side: Side) -> Series<'_, Handle<Counter<u64>>> {
        let attrs = match side {
            Side::Server => &self.started[..2],
            Side::Client => &self.started[..],
        };
        Series {
            attrs,
            handles: self.started_handles.side(side),
        }
    }

    /// The attributes of the measurements recorded at the end of an RPC
    /// that ended with `code` on `side`, with their handles (`side`'s are
    /// those to read).
    #[inline]
    pub(super) fn ended(&self, side: Side, code: Code) -> Series<'_, EndedHandles> {
        let code = status_index(code);
        let ended = self.ended[code].get_or_init(|| {
            let [method, tenant, target] = self.started.clone();
            Box::new(TenantEnded {
                set: [
                    method,
                    KeyValue::new(STATUS, STATUS_NAMES[code]),
                    tenant,
                    target,
                ],
                handles: EndedHandles::default(),
            })
        });
        let attrs = match side {
            Side::Server => &ended.set[..3],
            Side::Client => &ended.set[..],
        };
        Series {
            attrs,
            handles: &ended.handles,
        }
    }
}

/// `grpc.method`'s value: the path without its leading `/` (A66:
/// `google.bigtable.v2.Bigtable/CheckAndMutateRow`).
pub(super) fn method_value(path: &str) -> Value {
    shared(path.strip_prefix('/').unwrap_or(path))
}

/// A string value whose clones share one allocation.
pub(super) fn shared(text: &str) -> Value {
    Value::String(StringValue::from(Arc::<str>::from(text)))
}
