//! [`AppendOnlyTable`]: entries appended rarely and read by index on every
//! RPC, with no lock and no write to memory that other threads read; and
//! [`SlotTable`], its storage, whose slots are filled in any order.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Slots of the first segment; each later segment holds twice as many as
/// the one before, so the table allocates in proportion to what it holds.
const FIRST_SEGMENT_LEN: usize = 16;

/// Enough segments for every `u32` index: `16 × (2^29 − 1) ≥ 2^32`.
const SEGMENTS: usize = 29;

/// A table of `T`s indexed by `u32` that only grows: an entry, once
/// appended, stays at its index until the table is dropped, so an index
/// is a handle that needs no reference count.
///
/// Reading an entry is two atomic loads (its segment's `OnceLock`, then
/// its own) and nothing else: readers on many cores share the table's
/// cache lines without writing to them. Appending takes a fresh index
/// with one atomic increment and allocates a segment when it opens one;
/// concurrent appends are safe (each fills its own slot).
///
/// Why not a `RwLock<Vec<T>>` or an `Arc` snapshot: a read lock and an
/// `Arc` clone are both read-modify-writes on a cache line every RPC of
/// the process shares. A fixed array of `OnceLock`s would do, but would
/// allocate its whole capacity up front; segments keep the same reads
/// and grow with the entries.
pub(super) struct AppendOnlyTable<T> {
    slots: SlotTable<T, SEGMENTS>,
    /// Indices handed out so far (some may still be filling).
    claimed: AtomicUsize,
}

impl<T> AppendOnlyTable<T> {
    pub(super) fn new() -> Self {
        Self {
            slots: SlotTable::new(),
            claimed: AtomicUsize::new(0),
        }
    }

    /// Appends `value` and returns its index, or `None` (dropping `value`)
    /// once every `u32` index is taken.
    pub(super) fn push(&self, value: T) -> Option<u32> {
        let index = u32::try_from(self.claimed.fetch_add(1, Ordering::Relaxed)).ok()?;
        // The index is this call's alone, so its slot is empty.
        self.slots.slot(index)?.set(value).ok()?;
        Some(index)
    }

    /// The entry at `index`, once its `push` has returned (or, from
    /// another thread, once that thread published the index through an
    /// acquire/release pair such as a `OnceLock`).
    #[inline]
    pub(super) fn get(&self, index: u32) -> Option<&T> {
        self.slots.get(index)
    }
}

/// A table of `T`s indexed by `u32` whose slots are filled once each, in
/// any order: [`AppendOnlyTable`]'s storage, and a cache keyed by small
/// indices (the attribute sets of each method for one tenant).
///
/// `N` segments hold the indices below `16 × (2^N − 1)` (every `u32` for
/// 29); an index past them has no slot. A slot is read with two atomic
/// loads, as an [`AppendOnlyTable`]'s entry; filling one allocates its
/// segment if that is the first slot filled there (segments double in
/// size, so a table whose indices stay below `n` allocates at most about
/// `2n` slots).
pub(super) struct SlotTable<T, const N: usize> {
    segments: [OnceLock<Box<[OnceLock<T>]>>; N],
}

impl<T, const N: usize> SlotTable<T, N> {
    pub(super) fn new() -> Self {
        Self {
            segments: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// The value at `index`, if its slot is filled.
    #[inline]
    pub(super) fn get(&self, index: u32) -> Option<&T> {
        let (segment, offset) = locate(index);
        self.segments.get(segment)?.get()?.get(offset)?.get()
    }

    /// The value at `index`, filled with `make` first if the slot is
    /// empty; `None` if `index` has no slot. A thread that finds another
    /// filling the slot waits for it (once per slot, ever); a filled slot
    /// costs what [`get`](Self::get) does.
    // The tenant attribute's cache; unused without the `tenant` feature.
    #[cfg_attr(not(feature = "tenant"), allow(dead_code))]
    #[inline]
    pub(super) fn get_or_init(&self, index: u32, make: impl FnOnce() -> T) -> Option<&T> {
        match self.get(index) {
            Some(value) => Some(value),
            None => Some(self.slot(index)?.get_or_init(make)),
        }
    }

    /// The slot of `index`, its segment allocated if it was not.
    fn slot(&self, index: u32) -> Option<&OnceLock<T>> {
        let (segment, offset) = locate(index);
        let slots = self.segments.get(segment)?.get_or_init(|| {
            (0..FIRST_SEGMENT_LEN << segment)
                .map(|_| OnceLock::new())
                .collect()
        });
        slots.get(offset)
    }
}

/// The segment of `index` and its offset in that segment.
#[inline]
fn locate(index: u32) -> (usize, usize) {
    let index = index as usize;
    // Segment `k` starts at `FIRST_SEGMENT_LEN × (2^k − 1)`.
    let segment = (index / FIRST_SEGMENT_LEN + 1).ilog2() as usize;
    (segment, index - FIRST_SEGMENT_LEN * ((1 << segment) - 1))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn indices_map_onto_segments_without_gaps() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(15), (0, 15));
        assert_eq!(locate(16), (1, 0));
        assert_eq!(locate(47), (1, 31));
        assert_eq!(locate(48), (2, 0));
        let (last, offset) = locate(u32::MAX);
        assert!(last < SEGMENTS);
        assert!(offset < FIRST_SEGMENT_LEN << last);
        let mut expected = (0, 0);
        for index in 0..10_000 {
            assert_eq!(locate(index), expected, "index {index}");
            expected.1 += 1;
            if expected.1 == FIRST_SEGMENT_LEN << expected.0 {
                expected = (expected.0 + 1, 0);
            }
        }
    }

    #[test]
    fn entries_stay_at_their_index() {
        let table = AppendOnlyTable::new();
        assert_eq!(table.get(0), None);
        for value in 0..1_000_u32 {
            assert_eq!(table.push(value), Some(value));
        }
        for index in 0..1_000 {
            assert_eq!(table.get(index), Some(&index));
        }
        assert_eq!(table.get(1_000), None);
        assert_eq!(table.get(u32::MAX), None);
    }

    #[test]
    fn concurrent_appends_each_get_their_own_index() {
        let table = Arc::new(AppendOnlyTable::new());
        let threads: Vec<_> = (0..4_u32)
            .map(|thread| {
                let table = Arc::clone(&table);
                std::thread::spawn(move || {
                    (0..500)
                        .map(|i| {
                            let value = thread * 1_000 + i;
                            (table.push(value).expect("room"), value)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut indices = Vec::new();
        for thread in threads {
            for (index, value) in thread.join().expect("no panic") {
                assert_eq!(table.get(index), Some(&value));
                indices.push(index);
            }
        }
        indices.sort_unstable();
        assert_eq!(indices, (0..2_000).collect::<Vec<_>>());
    }

    #[test]
    fn slots_fill_once_in_any_order() {
        let table = SlotTable::<_, 10>::new();
        assert_eq!(table.get(5_000), None);
        assert_eq!(table.get_or_init(5_000, || 1), Some(&1));
        assert_eq!(table.get_or_init(5_000, || 2), Some(&1), "filled once");
        assert_eq!(table.get_or_init(3, || 3), Some(&3));
        assert_eq!(table.get(3), Some(&3));
        assert_eq!(table.get(4), None);
        // 10 segments: indices below 16 × 1023.
        assert_eq!(table.get_or_init(16 * 1023 - 1, || 4), Some(&4));
        assert_eq!(table.get_or_init(16 * 1023, || 5), None);
        assert_eq!(table.get(u32::MAX), None);
        // Only the segments of the slots filled were allocated.
        let allocated = table.segments.iter().filter(|s| s.get().is_some()).count();
        assert_eq!(allocated, 3);
    }
}
