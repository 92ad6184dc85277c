//! [`Stripes`]: a window's latency samples and admitted calls, counted on
//! one cache line per group of threads, so that calls on many cores at
//! once do not all write one counter.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// One stripe: samples, their summed nanoseconds and admitted calls,
/// alone on its cache line (128 bytes: two lines, against the adjacent-line prefetcher).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    samples: AtomicU64,
    nanos: AtomicU64,
    admitted: AtomicU64,
}

/// Samples summed over stripes; a thread always adds to the same one.
#[derive(Debug)]
pub(crate) struct Stripes {
    stripes: Box<[Stripe]>,
}

/// The stripe index of each thread: handed out in turn on its first
/// sample.
fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    INDEX.with(|index| {
        if index.get() == usize::MAX {
            index.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        index.get()
    })
}

impl Stripes {
    /// A stripe per core (a power of two, at most 64).
    pub(crate) fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let count = cores.next_power_of_two().min(64);
        Self {
            stripes: (0..count).map(|_| Stripe::default()).collect(),
        }
    }

    #[inline]
    fn mine(&self) -> &Stripe {
        &self.stripes[thread_index() & (self.stripes.len() - 1)]
    }

    /// Adds a sample of `nanos`.
    #[inline]
    pub(crate) fn add(&self, nanos: u64) {
        let stripe = self.mine();
        stripe.samples.fetch_add(1, Ordering::Relaxed);
        stripe.nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Counts an admitted call.
    #[inline]
    pub(crate) fn admitted(&self) {
        self.mine().admitted.fetch_add(1, Ordering::Relaxed);
    }

    /// The calls admitted since the last time, counted from zero again.
    pub(crate) fn take_admitted(&self) -> u64 {
        self.stripes
            .iter()
            .map(|stripe| stripe.admitted.swap(0, Ordering::Relaxed))
            .sum()
    }

    /// The samples so far and their summed nanoseconds.
    pub(crate) fn peek(&self) -> (u64, u64) {
        self.stripes
            .iter()
            .fold((0, 0), |(samples, nanos), stripe| {
                (
                    samples + stripe.samples.load(Ordering::Relaxed),
                    nanos.saturating_add(stripe.nanos.load(Ordering::Relaxed)),
                )
            })
    }

    /// Takes away `samples` samples of `nanos` in all (what
    /// [`peek`](Self::peek) read): samples added since stay for the next
    /// window.
    pub(crate) fn take(&self, mut samples: u64, mut nanos: u64) {
        for stripe in self.stripes.iter() {
            let here = stripe.samples.load(Ordering::Relaxed).min(samples);
            stripe.samples.fetch_sub(here, Ordering::Relaxed);
            samples -= here;
            let here = stripe.nanos.load(Ordering::Relaxed).min(nanos);
            stripe.nanos.fetch_sub(here, Ordering::Relaxed);
            nanos -= here;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_from_many_threads_add_up_and_are_taken_once() {
        let stripes = Stripes::new();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..1000 {
                        stripes.add(3);
                    }
                });
            }
        });
        assert_eq!(stripes.peek(), (4000, 12_000));
        stripes.take(4000, 12_000);
        stripes.add(5);
        assert_eq!(stripes.peek(), (1, 5));
    }
}
