//! What each thread keeps for the throttle: its random number generator
//! (xorshift64*, seeded from the standard library's per-thread random
//! keys: no dependency, no lock) and its stripe of the window's counters.

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};

thread_local! {
    /// The generator's state (0: not seeded yet) and the thread's stripe.
    static LOCAL: Cell<(u64, usize)> = const { Cell::new((0, 0)) };
}

/// Hands each new thread the next stripe, so threads spread over them.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

/// A uniform draw in `[0, 1)` and the calling thread's stripe.
#[inline]
pub(crate) fn draw() -> (f64, usize) {
    LOCAL
        .try_with(|local| {
            let (state, stripe) = seeded(local);
            let state = xorshift(state);
            local.set((state, stripe));
            (unit(state), stripe)
        })
        // The thread is being torn down: a fresh seed is as random.
        .unwrap_or_else(|_| (unit(xorshift(seed())), 0))
}

/// The calling thread's stripe.
#[inline]
pub(crate) fn stripe() -> usize {
    LOCAL.try_with(|local| seeded(local).1).unwrap_or(0)
}

#[inline]
fn seeded(local: &Cell<(u64, usize)>) -> (u64, usize) {
    let (state, stripe) = local.get();
    if state != 0 {
        return (state, stripe);
    }
    let seeded = (seed(), NEXT_STRIPE.fetch_add(1, Ordering::Relaxed));
    local.set(seeded);
    seeded
}

/// A non-zero seed: a hash under fresh random keys.
#[cold]
fn seed() -> u64 {
    RandomState::new().hash_one(0x7468_726f_7474_6c65_u64) | 1
}

/// Marsaglia's xorshift64* step (never 0 from a non-zero state).
#[inline]
fn xorshift(mut x: u64) -> u64 {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    x
}

/// The top 53 bits of the scrambled state as a float in `[0, 1)`.
#[inline]
fn unit(state: u64) -> f64 {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    #[allow(clippy::cast_precision_loss)] // 53 bits: exact
    let bits = (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64;
    bits * SCALE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_uniform_in_the_unit_interval() {
        let n = 100_000;
        let mut below_a_quarter = 0;
        for _ in 0..n {
            let (x, _) = draw();
            assert!((0.0..1.0).contains(&x), "{x}");
            if x < 0.25 {
                below_a_quarter += 1;
            }
        }
        // 25 000 expected, standard deviation about 137.
        assert!(
            (23_500..26_500).contains(&below_a_quarter),
            "{below_a_quarter}"
        );
    }

    #[test]
    fn a_thread_keeps_its_stripe_and_threads_get_others() {
        let mine = stripe();
        assert_eq!(draw().1, mine);
        let theirs = std::thread::spawn(stripe).join().unwrap();
        assert_ne!(theirs, mine);
    }
}
