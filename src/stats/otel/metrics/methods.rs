//! [`MethodTable`]: which methods are recorded under their own name, found
//! for each RPC with no lock and no shared write.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use opentelemetry::Value;

use super::append_only::AppendOnlyTable;
use super::attrs::{MethodAttrs, OTHER, method_value, shared};

/// Decides whether a method or target is recorded as it is (A66's
/// filters).
pub(super) type NameFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Bounds on the number of buckets of the path index: enough for the
/// default learned-method bound, without a large array for a large one.
const MIN_BUCKETS: usize = 16;
const MAX_BUCKETS: usize = 4096;

/// How an RPC's method is recorded: under its own name (the index of its
/// entry in a [`MethodTable`]) or as `other`. Copied into each RPC's
/// state: a handle with no reference count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecordedMethod {
    Named(u32),
    Other,
}

/// A method recorded under its own name.
struct Entry {
    /// The full path, `/pkg.Service/Method`.
    path: Box<str>,
    /// Boxed so that a table segment stays small.
    attrs: Box<MethodAttrs>,
    /// The next entry in the same bucket of the path index.
    next_in_bucket: OnceLock<u32>,
}

/// Which methods are recorded under their own name, and their attribute
/// sets.
///
/// Registered methods (added when the handler is built) and learned ones
/// (added by [`learn`](Self::learn)) are entries of one append-only table,
/// found by path through one hash index: a fixed array of buckets, each
/// the head of a chain of entries linked through `OnceLock`s. A lookup
/// hashes the path once and follows the chain with atomic loads only; an
/// RPC then keeps its method's [`RecordedMethod`], and reading the
/// attribute sets again is two more loads. Learning is rare (once per
/// method, at most `max_learned` times in all), so learners take a mutex
/// and readers never do: the index changes by setting an empty
/// `OnceLock` (the end of a chain) after the new entry is in the table,
/// so a reader sees either the chain without it or the whole entry.
pub(super) struct MethodTable {
    entries: AppendOnlyTable<Entry>,
    buckets: Box<[OnceLock<u32>]>,
    hasher: RandomState,
    registered: usize,
    /// Registered services: their methods may be learned.
    services: HashSet<Box<str>>,
    /// Other methods that may be learned.
    filter: Option<NameFilter>,
    /// Methods learned so far; written only under `learning`.
    learned: AtomicUsize,
    max_learned: usize,
    /// Serialises learning.
    learning: Mutex<()>,
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
        let buckets = methods
            .len()
            .saturating_add(max_learned)
            .clamp(MIN_BUCKETS, MAX_BUCKETS)
            .next_power_of_two();
        let target = shared(target);
        let mut table = Self {
            entries: AppendOnlyTable::new(),
            buckets: (0..buckets).map(|_| OnceLock::new()).collect(),
            hasher: RandomState::new(),
            registered: 0,
            services: services.into_iter().map(String::into_boxed_str).collect(),
            filter,
            learned: AtomicUsize::new(0),
            max_learned,
            learning: Mutex::new(()),
            other: MethodAttrs::new(&Value::from(OTHER), &target),
            target,
        };
        for path in methods {
            if table.find(&path).is_none() && table.insert(&path).is_some() {
                table.registered += 1;
            }
        }
        table
    }

    /// The registered or learned method at `path` (as in the request,
    /// `/pkg.Service/Method`), if any.
    #[inline]
    pub(super) fn find(&self, path: &str) -> Option<RecordedMethod> {
        let mut link = &self.buckets[self.bucket_of(path)];
        while let Some(&index) = link.get() {
            let entry = self.entries.get(index)?;
            if *entry.path == *path {
                return Some(RecordedMethod::Named(index));
            }
            link = &entry.next_in_bucket;
        }
        None
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
        // Once full, refused without the lock.
        if self.is_full() {
            return RecordedMethod::Other;
        }
        let _learning = self.learning.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = self.find(path) {
            return found;
        }
        let learned = self.learned.load(Ordering::Relaxed);
        if learned >= self.max_learned {
            return RecordedMethod::Other;
        }
        match self.insert(path) {
            Some(index) => {
                self.learned.store(learned + 1, Ordering::Release);
                RecordedMethod::Named(index)
            }
            None => RecordedMethod::Other,
        }
    }

    /// Whether `max_learned` methods are learned: no more will be.
    #[inline]
    pub(super) fn is_full(&self) -> bool {
        self.learned.load(Ordering::Acquire) >= self.max_learned
    }

    /// The attribute sets of `method`.
    #[inline]
    pub(super) fn attrs(&self, method: RecordedMethod) -> &MethodAttrs {
        match method {
            RecordedMethod::Named(index) => self
                .entries
                .get(index)
                .map_or(&self.other, |entry| &entry.attrs),
            RecordedMethod::Other => &self.other,
        }
    }

    /// Adds an entry for `path` (not in the table) and links it at the end
    /// of its bucket's chain. Called while building, or under `learning`:
    /// one inserter at a time.
    fn insert(&self, path: &str) -> Option<u32> {
        let index = self.entries.push(Entry {
            path: path.into(),
            attrs: Box::new(MethodAttrs::new(&method_value(path), &self.target)),
            next_in_bucket: OnceLock::new(),
        })?;
        let mut link = &self.buckets[self.bucket_of(path)];
        while let Some(&next) = link.get() {
            link = &self.entries.get(next)?.next_in_bucket;
        }
        link.set(index).ok()?;
        Some(index)
    }

    #[inline]
    fn bucket_of(&self, path: &str) -> usize {
        // The bucket count is a power of two: keep the hash's low bits.
        (self.hasher.hash_one(path) as usize) & (self.buckets.len() - 1)
    }

    pub(super) fn registered_len(&self) -> usize {
        self.registered
    }

    pub(super) fn learned_len(&self) -> usize {
        self.learned.load(Ordering::Acquire)
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
    fn every_entry_is_found_through_long_bucket_chains() {
        // 16 buckets for 5 000 methods: chains of hundreds.
        let table = MethodTable::new(Vec::new(), ["pkg.S".to_owned()], None, 0, "t");
        let table = MethodTable {
            max_learned: 5_000,
            ..table
        };
        assert_eq!(table.buckets.len(), MIN_BUCKETS);
        let learned: Vec<_> = (0..5_000)
            .map(|i| table.learn(&format!("/pkg.S/M{i}")))
            .collect();
        for (i, method) in learned.iter().enumerate() {
            assert_eq!(table.find(&format!("/pkg.S/M{i}")), Some(*method));
        }
        assert_eq!(table.find("/pkg.S/M5000"), None);
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
