//! Attribute sets, built once per method and handed to every RPC of that
//! method by reference: recording a measurement clones no `KeyValue` and
//! allocates nothing in this crate.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use opentelemetry::{Key, KeyValue, StringValue, Value};
use tonic::Code;

use crate::stats::Side;

/// The value recorded for methods and targets that are not recorded as
/// they are (A66).
pub(super) const OTHER: &str = "other";

const METHOD: Key = Key::from_static_str("grpc.method");
const STATUS: Key = Key::from_static_str("grpc.status");
const TARGET: Key = Key::from_static_str("grpc.target");

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

/// One method's attribute sets. `started` is `[grpc.method, grpc.target]`
/// and `ended[code]` is `[grpc.method, grpc.status, grpc.target]`; the
/// server records the same sets without their last element (A66 gives the
/// server no target).
#[derive(Debug)]
pub(super) struct MethodAttrs {
    started: [KeyValue; 2],
    ended: [[KeyValue; 3]; STATUS_NAMES.len()],
}

impl MethodAttrs {
    fn new(method: &Value, target: &Value) -> Self {
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
        }
    }

    /// The attributes of `*.started` on `side`.
    pub(super) fn started(&self, side: Side) -> &[KeyValue] {
        match side {
            Side::Server => &self.started[..1],
            Side::Client => &self.started,
        }
    }

    /// The attributes of the measurements recorded at the end of an RPC
    /// that ended with `code` on `side`.
    pub(super) fn ended(&self, side: Side, code: Code) -> &[KeyValue] {
        // Every `Code` has a name; a code tonic adds later counts as UNKNOWN.
        let set = self
            .ended
            .get(code as usize)
            .unwrap_or(&self.ended[Code::Unknown as usize]);
        match side {
            Side::Server => &set[..2],
            Side::Client => set,
        }
    }
}

/// Decides whether a method or target is recorded as it is (A66's
/// filters).
pub(super) type NameFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Which methods are recorded as they are, and their attribute sets.
pub(super) struct MethodTable {
    /// Registered full method paths (`/pkg.Service/Method`): built once.
    registered: HashMap<Box<str>, Arc<MethodAttrs>>,
    /// Registered services: their methods are recorded as they are.
    services: HashSet<Box<str>>,
    /// Other methods the application chose to record as they are.
    filter: Option<NameFilter>,
    /// Attribute sets of methods accepted by `services` or `filter`, built
    /// on an RPC's first sight of them, at most `max_learned` of them.
    learned: RwLock<HashMap<Box<str>, Arc<MethodAttrs>>>,
    max_learned: usize,
    /// Everything else.
    other: Arc<MethodAttrs>,
    target: Value,
}

impl MethodTable {
    /// `methods` are full paths with their leading `/`.
    pub(super) fn new(
        methods: impl IntoIterator<Item = String>,
        services: impl IntoIterator<Item = String>,
        filter: Option<NameFilter>,
        max_learned: usize,
        target: &str,
    ) -> Self {
        let target = shared(target);
        let registered = methods
            .into_iter()
            .map(|path| {
                let attrs = Arc::new(MethodAttrs::new(&method_value(&path), &target));
                (path.into_boxed_str(), attrs)
            })
            .collect();
        Self {
            registered,
            services: services.into_iter().map(String::into_boxed_str).collect(),
            filter,
            learned: RwLock::default(),
            max_learned,
            other: Arc::new(MethodAttrs::new(&Value::from(OTHER), &target)),
            target,
        }
    }

    /// The attribute sets for an RPC to `path` (as in the request,
    /// `/pkg.Service/Method`).
    pub(super) fn attrs(&self, path: &str) -> Arc<MethodAttrs> {
        if let Some(attrs) = self.registered.get(path) {
            return Arc::clone(attrs);
        }
        // A method learned earlier passed the test below then: on every
        // later RPC of a registered service, one lookup instead of three.
        if let Some(attrs) = self.read_learned().get(path) {
            return Arc::clone(attrs);
        }
        if !self.recorded_as_is(path) {
            return Arc::clone(&self.other);
        }
        let mut learned = self.learned.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(attrs) = learned.get(path) {
            return Arc::clone(attrs);
        }
        if learned.len() >= self.max_learned {
            return Arc::clone(&self.other);
        }
        let attrs = Arc::new(MethodAttrs::new(&method_value(path), &self.target));
        learned.insert(path.into(), Arc::clone(&attrs));
        attrs
    }

    fn recorded_as_is(&self, path: &str) -> bool {
        service_of(path).is_some_and(|service| self.services.contains(service))
            || self.filter.as_ref().is_some_and(|filter| filter(path))
    }

    fn read_learned(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Box<str>, Arc<MethodAttrs>>> {
        self.learned.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn registered_len(&self) -> usize {
        self.registered.len()
    }

    pub(super) fn learned_len(&self) -> usize {
        self.read_learned().len()
    }

    pub(super) fn services(&self) -> impl Iterator<Item = &str> {
        self.services.iter().map(AsRef::as_ref)
    }

    pub(super) fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    pub(super) fn target(&self) -> &Value {
        &self.target
    }
}

/// The service of a full method path: `pkg.Service` of
/// `/pkg.Service/Method`; `None` unless both parts are non-empty.
pub(super) fn service_of(path: &str) -> Option<&str> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/')).then_some(service)
}

/// `grpc.method`'s value: the path without its leading `/` (A66:
/// `google.bigtable.v2.Bigtable/CheckAndMutateRow`).
fn method_value(path: &str) -> Value {
    shared(path.strip_prefix('/').unwrap_or(path))
}

/// A string value whose clones share one allocation.
fn shared(text: &str) -> Value {
    Value::String(StringValue::from(Arc::<str>::from(text)))
}
