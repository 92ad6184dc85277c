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
    /// Summed squares of the samples in microseconds (µs²: a sample of
    /// 4 s adds 1.6e13, so 10⁶ of them fit).
    squares: AtomicU64,
    admitted: AtomicU64,
}

/// Samples so far: how many, their summed nanoseconds, their summed
/// squares in µs².
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sums {
    pub(crate) samples: u64,
    pub(crate) nanos: u64,
    pub(crate) squares: u64,
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
        let micros = nanos / 1_000;
        stripe.samples.fetch_add(1, Ordering::Relaxed);
        stripe.nanos.fetch_add(nanos, Ordering::Relaxed);
        stripe
            .squares
            .fetch_add(micros.saturating_mul(micros), Ordering::Relaxed);
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

    /// The samples so far.
    pub(crate) fn peek(&self) -> Sums {
        self.stripes
            .iter()
            .fold(Sums::default(), |sums, stripe| Sums {
                samples: sums.samples + stripe.samples.load(Ordering::Relaxed),
                nanos: sums
                    .nanos
                    .saturating_add(stripe.nanos.load(Ordering::Relaxed)),
                squares: sums
                    .squares
                    .saturating_add(stripe.squares.load(Ordering::Relaxed)),
            })
    }

    /// Takes away `sums` (what [`peek`](Self::peek) read): samples added
    /// since stay for the next window.
    pub(crate) fn take(&self, sums: Sums) {
        let Sums {
            mut samples,
            mut nanos,
            mut squares,
        } = sums;
        for stripe in self.stripes.iter() {
            for (counter, left) in [
                (&stripe.samples, &mut samples),
                (&stripe.nanos, &mut nanos),
                (&stripe.squares, &mut squares),
            ] {
                let here = counter.load(Ordering::Relaxed).min(*left);
                counter.fetch_sub(here, Ordering::Relaxed);
                *left -= here;
            }
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
                        stripes.add(3_000);
                    }
                });
            }
        });
        let sums = stripes.peek();
        assert_eq!(
            sums,
            Sums {
                samples: 4000,
                nanos: 12_000_000,
                squares: 36_000
            }
        );
        stripes.take(sums);
        stripes.add(5_000);
        assert_eq!(
            stripes.peek(),
            Sums {
                samples: 1,
                nanos: 5_000,
                squares: 25
            }
        );
    }
}
