//! [`MethodTable`]: which methods are recorded under their own name, found
//! for each RPC with no lock and no shared write.

use std::collections::HashSet;
use std::sync::Arc;

use opentelemetry::Value;

use super::attrs::{MethodAttrs, OTHER, method_value, shared};
use super::names::NameTable;

/// Decides whether a method or target is recorded as it is (A66's
/// filters).
pub(super) type NameFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// How an RPC's method is recorded: under its own name (the index of its
/// entry in a [`MethodTable`]) or as `other`. Copied into each RPC's
/// state: a handle with no reference count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecordedMethod {
    Named(u32),
    Other,
}

/// Which methods are recorded under their own name, and their attribute
/// sets.
///
/// Registered methods (added when the handler is built) and learned ones
/// (added by [`learn`](Self::learn), at most `max_learned`) are entries of
/// one [`NameTable`], found by path with atomic loads only (no lock); an
/// RPC then keeps its method's [`RecordedMethod`], and reading the
/// attribute sets again is two more loads. Each entry's attribute sets are
/// boxed so that a table segment stays small.
pub(super) struct MethodTable {
    methods: NameTable<Box<MethodAttrs>>,
    /// Registered services: their methods may be learned.
    services: HashSet<Box<str>>,
    /// Other methods that may be learned.
    filter: Option<NameFilter>,
    /// The attribute sets of everything else.
    other: MethodAttrs,
    target: Value,
}

impl MethodTable {
    /// `methods` are full paths with their leading `/`.
    pub(super) fn new(
        methods: Vec<String>,
        services: impl IntoIterator<Item = String>,
        filter: Option<NameFilter>,
        max_learned: usize,
        target: &str,
    ) -> Self {
        let target = shared(target);
        let mut table = NameTable::new(methods.len(), max_learned);
        for path in methods {
            table.add(&path, || {
                Box::new(MethodAttrs::new(&method_value(&path), &target))
            });
        }
        Self {
            methods: table,
            services: services.into_iter().map(String::into_boxed_str).collect(),
            filter,
            other: MethodAttrs::new(&Value::from(OTHER), &target),
            target,
        }
    }

    /// The registered or learned method at `path` (as in the request,
    /// `/pkg.Service/Method`), if any.
    #[inline]
    pub(super) fn find(&self, path: &str) -> Option<RecordedMethod> {
        self.methods.find(path).map(RecordedMethod::Named)
    }

    /// Whether a method that is not registered may be learned: its
    /// service is registered or the method filter accepts it.
    pub(super) fn accepts(&self, path: &str) -> bool {
        service_of(path).is_some_and(|service| self.services.contains(service))
            || self.filter.as_ref().is_some_and(|filter| filter(path))
    }

    /// Records `path` under its own name from now on, unless
    /// `max_learned` methods are learned already (then: `other`). For a
    /// path the caller found [`accepts`](Self::accepts)ed.
    pub(super) fn learn(&self, path: &str) -> RecordedMethod {
        self.methods
            .learn(path, || {
                Box::new(MethodAttrs::new(&method_value(path), &self.target))
            })
            .map_or(RecordedMethod::Other, RecordedMethod::Named)
    }

    /// Whether `max_learned` methods are learned: no more will be.
    #[inline]
    pub(super) fn is_full(&self) -> bool {
        self.methods.is_full()
    }

    /// The attribute sets of `method`.
    #[inline]
    pub(super) fn attrs(&self, method: RecordedMethod) -> &MethodAttrs {
        match method {
            RecordedMethod::Named(index) => {
                self.methods.get(index).map_or(&self.other, |attrs| attrs)
            }
            RecordedMethod::Other => &self.other,
        }
    }

    pub(super) fn registered_len(&self) -> usize {
        self.methods.added_len()
    }

    pub(super) fn learned_len(&self) -> usize {
        self.methods.learned_len()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max_learned: usize) -> MethodTable {
        MethodTable::new(
            vec![
                "/pkg.R/A".to_owned(),
                "/pkg.R/B".to_owned(),
                "/pkg.R/A".to_owned(),
            ],
            ["pkg.S".to_owned()],
            Some(Arc::new(|path: &str| path.starts_with("/filtered."))),
            max_learned,
            "target",
        )
    }

    #[test]
    fn registered_methods_are_found_and_others_are_not() {
        let table = table(10);
        assert_eq!(
            table.registered_len(),
            2,
            "a method registered twice counts once"
        );
        let a = table.find("/pkg.R/A").expect("registered");
        let b = table.find("/pkg.R/B").expect("registered");
        assert_ne!(a, b);
        assert_eq!(table.find("/pkg.R/C"), None);
        assert_eq!(table.find("/pkg.S/M"), None, "accepted, not yet learned");
        assert!(table.accepts("/pkg.S/M"));
        assert!(table.accepts("/filtered.X/M"));
        assert!(!table.accepts("/pkg.R/C"));
        assert!(!table.accepts("/pkg.S/"));
        assert_eq!(table.learned_len(), 0);
    }

    #[test]
    fn learning_stops_at_the_bound_and_keeps_what_it_learned() {
        let table = table(2);
        let m = table.learn("/pkg.S/M");
        assert_eq!(table.learn("/pkg.S/M"), m, "learned once");
        assert_eq!(table.find("/pkg.S/M"), Some(m));
        let n = table.learn("/filtered.X/N");
        assert_ne!(n, RecordedMethod::Other);
        assert_eq!(
            table.learn("/pkg.S/O"),
            RecordedMethod::Other,
            "past the bound"
        );
        assert_eq!(table.find("/pkg.S/O"), None);
        assert_eq!(table.learned_len(), 2);
        assert_eq!(table.find("/pkg.S/M"), Some(m));
        assert_eq!(table.find("/pkg.R/B").map(|b| b == m), Some(false));
    }

    #[test]
    fn concurrent_learners_agree_on_each_method() {
        let table = Arc::new(table(1_000));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let table = Arc::clone(&table);
                std::thread::spawn(move || {
                    (0..200)
                        .map(|i| table.learn(&format!("/pkg.S/M{i}")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let results: Vec<_> = threads
            .into_iter()
            .map(|thread| thread.join().expect("no panic"))
            .collect();
        assert!(results.windows(2).all(|pair| pair[0] == pair[1]));
        assert_eq!(table.learned_len(), 200);
    }
}
