//! [`NameTable`]: values found by name on every RPC with no lock and no
//! shared write, some added when the handler is built and, up to a bound,
//! more learned while it runs. Methods (their attribute sets) and tenants
//! are kept in one each.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::append_only::AppendOnlyTable;

/// Bounds on the number of buckets of the name index: enough for the
/// default learned-method bound, without a large array for a large one.
const MIN_BUCKETS: usize = 16;
const MAX_BUCKETS: usize = 4096;

/// A value with its name.
struct Entry<T> {
    name: Box<str>,
    value: T,
    /// The next entry in the same bucket of the name index.
    next_in_bucket: OnceLock<u32>,
}

/// Values found by name, each at a `u32` index that stays its own until
/// the table is dropped (a handle with no reference count).
///
/// Values added when building ([`add`](Self::add)) and values learned
/// later ([`learn`](Self::learn), at most `max_learned` of them) are
/// entries of one append-only table, found by name through one hash
/// index: a fixed array of buckets, each the head of a chain of entries
/// linked through `OnceLock`s. A lookup hashes the name once and follows
/// the chain with atomic loads only; reading a value by index is two more
/// loads. Learning is rare (once per name, at most `max_learned` times in
/// all), so learners take a mutex and readers never do: the index changes
/// by setting an empty `OnceLock` (the end of a chain) after the new entry
/// is in the table, so a reader sees either the chain without it or the
/// whole entry. Once `max_learned` names are learned, learning is refused
/// with one atomic load, without the mutex.
pub(super) struct NameTable<T> {
    entries: AppendOnlyTable<Entry<T>>,
    buckets: Box<[OnceLock<u32>]>,
    hasher: RandomState,
    /// Names added when building.
    added: usize,
    /// Names learned so far; written only under `learning`.
    learned: AtomicUsize,
    max_learned: usize,
    /// Serialises learning.
    learning: Mutex<()>,
}

impl<T> NameTable<T> {
    /// A table for about `expected` names added when building, and at
    /// most `max_learned` learned.
    pub(super) fn new(expected: usize, max_learned: usize) -> Self {
        let buckets = expected
            .saturating_add(max_learned)
            .clamp(MIN_BUCKETS, MAX_BUCKETS)
            .next_power_of_two();
        Self {
            entries: AppendOnlyTable::new(),
            buckets: (0..buckets).map(|_| OnceLock::new()).collect(),
            hasher: RandomState::new(),
            added: 0,
            learned: AtomicUsize::new(0),
            max_learned,
            learning: Mutex::new(()),
        }
    }

    /// Adds `name` with the value `make` returns, while building (not
    /// counted against `max_learned`). `None` if `name` is there already.
    pub(super) fn add(&mut self, name: &str, make: impl FnOnce() -> T) -> Option<u32> {
        if self.find(name).is_some() {
            return None;
        }
        let index = self.insert(name, make())?;
        self.added += 1;
        Some(index)
    }

    /// The index of `name`, if it was added or learned.
    #[inline]
    pub(super) fn find(&self, name: &str) -> Option<u32> {
        let mut link = &self.buckets[self.bucket_of(name)];
        while let Some(&index) = link.get() {
            let entry = self.entries.get(index)?;
            if *entry.name == *name {
                return Some(index);
            }
            link = &entry.next_in_bucket;
        }
        None
    }

    /// The value at `index` (from [`find`](Self::find), [`add`](Self::add)
    /// or [`learn`](Self::learn)).
    #[inline]
    pub(super) fn get(&self, index: u32) -> Option<&T> {
        self.entries.get(index).map(|entry| &entry.value)
    }

    /// The index of `name`, learning it with the value `make` returns if
    /// it is not in the table: `None` once `max_learned` names are learned.
    pub(super) fn learn(&self, name: &str, make: impl FnOnce() -> T) -> Option<u32> {
        // Once full, refused without the lock.
        if self.is_full() {
            return self.find(name);
        }
        let _learning = self.learning.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = self.find(name) {
            return Some(found);
        }
        let learned = self.learned.load(Ordering::Relaxed);
        if learned >= self.max_learned {
            return None;
        }
        let index = self.insert(name, make())?;
        self.learned.store(learned + 1, Ordering::Release);
        Some(index)
    }

    /// Whether `max_learned` names are learned: no more will be.
    #[inline]
    pub(super) fn is_full(&self) -> bool {
        self.learned.load(Ordering::Acquire) >= self.max_learned
    }

    /// How many names were added when building.
    pub(super) fn added_len(&self) -> usize {
        self.added
    }

    /// How many names were learned.
    pub(super) fn learned_len(&self) -> usize {
        self.learned.load(Ordering::Acquire)
    }

    /// Adds an entry for `name` (not in the table) and links it at the end
    /// of its bucket's chain. Called while building, or under `learning`:
    /// one inserter at a time.
    fn insert(&self, name: &str, value: T) -> Option<u32> {
        let index = self.entries.push(Entry {
            name: name.into(),
            value,
            next_in_bucket: OnceLock::new(),
        })?;
        let mut link = &self.buckets[self.bucket_of(name)];
        while let Some(&next) = link.get() {
            link = &self.entries.get(next)?.next_in_bucket;
        }
        link.set(index).ok()?;
        Some(index)
    }

    #[inline]
    fn bucket_of(&self, name: &str) -> usize {
        // The bucket count is a power of two: keep the hash's low bits.
        (self.hasher.hash_one(name) as usize) & (self.buckets.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn added_names_are_found_and_counted_once() {
        let mut table = NameTable::new(2, 0);
        let a = table.add("a", || 1).expect("new");
        assert_eq!(table.add("a", || 2), None, "added once");
        let b = table.add("b", || 3).expect("new");
        assert_ne!(a, b);
        assert_eq!(table.find("a"), Some(a));
        assert_eq!(table.get(a), Some(&1));
        assert_eq!(table.get(b), Some(&3));
        assert_eq!(table.find("c"), None);
        assert_eq!(table.added_len(), 2);
        assert!(table.is_full(), "nothing may be learned");
        assert_eq!(table.learn("c", || 4), None);
        assert_eq!(table.learn("a", || 5), Some(a), "found, not learned");
        assert_eq!(table.learned_len(), 0);
    }

    #[test]
    fn learning_stops_at_the_bound_and_keeps_what_it_learned() {
        let table = NameTable::new(0, 2);
        let m = table.learn("m", || 1).expect("room");
        assert_eq!(table.learn("m", || 2), Some(m), "learned once");
        assert_eq!(table.get(m), Some(&1));
        let n = table.learn("n", || 3).expect("room");
        assert_ne!(n, m);
        assert!(table.is_full());
        assert_eq!(table.learn("o", || 4), None, "past the bound");
        assert_eq!(table.find("o"), None);
        assert_eq!(table.learned_len(), 2);
        assert_eq!(table.find("m"), Some(m));
    }

    #[test]
    fn every_entry_is_found_through_long_bucket_chains() {
        // 16 buckets for 5 000 names: chains of hundreds.
        let table = NameTable {
            max_learned: 5_000,
            ..NameTable::new(0, 0)
        };
        assert_eq!(table.buckets.len(), MIN_BUCKETS);
        let learned: Vec<_> = (0..5_000)
            .map(|i| table.learn(&format!("m{i}"), || i).expect("room"))
            .collect();
        for (i, index) in learned.iter().enumerate() {
            assert_eq!(table.find(&format!("m{i}")), Some(*index));
            assert_eq!(table.get(*index), Some(&i));
        }
        assert_eq!(table.find("m5000"), None);
    }

    #[test]
    fn concurrent_learners_agree_on_each_name() {
        let table = Arc::new(NameTable::new(0, 1_000));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let table = Arc::clone(&table);
                std::thread::spawn(move || {
                    (0..200)
                        .map(|i| table.learn(&format!("m{i}"), || i))
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
