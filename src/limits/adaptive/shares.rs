//! The tenants' places under an adaptive limit: each tenant's calls in
//! flight, its weight, and the summed weight of the tenants with a call in
//! flight (the *active* ones), from which a tenant's fair share of the
//! limit follows.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// One tenant's calls in flight, weight, and recent admissions.
#[derive(Debug)]
pub(crate) struct Share {
    in_flight: AtomicU32,
    weight: u32,
    /// The window its admissions are counted in (high 32 bits) and their
    /// count (low 32 bits).
    recent: AtomicU64,
    /// Its admissions in the window before that one.
    previous: AtomicU32,
    /// Set by each call, cleared by each sweep: a share unseen since the
    /// last sweep and with nothing in flight is evicted.
    seen: AtomicBool,
}

impl Share {
    fn new(weight: u32) -> Self {
        Self {
            in_flight: AtomicU32::new(0),
            weight,
            recent: AtomicU64::new(0),
            previous: AtomicU32::new(0),
            seen: AtomicBool::new(true),
        }
    }

    /// Counts an admission in window `window` (the windows closed so
    /// far, from 1).
    #[inline]
    pub(crate) fn admitted(&self, window: u64) {
        let recent = self.recent.load(Ordering::Relaxed);
        if recent >> 32 == window & 0xffff_ffff {
            self.recent.fetch_add(1, Ordering::Relaxed);
        } else {
            self.roll(recent, window);
        }
    }

    /// The tenant's first admission in a new window: the count so far
    /// becomes the previous one (if that window was the last), the new
    /// one starts at 1. A race with another admission of the tenant loses
    /// a count at most.
    #[cold]
    fn roll(&self, recent: u64, window: u64) {
        let window = window & 0xffff_ffff;
        let last = if recent >> 32 == window.wrapping_sub(1) & 0xffff_ffff {
            (recent & 0xffff_ffff) as u32
        } else {
            0
        };
        if self
            .recent
            .compare_exchange(
                recent,
                (window << 32) | 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.previous.store(last, Ordering::Relaxed);
        } else {
            self.recent.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Its admissions in the last window closed before `window`.
    pub(crate) fn last_window(&self, window: u64) -> u32 {
        let recent = self.recent.load(Ordering::Relaxed);
        let index = recent >> 32;
        if index == window & 0xffff_ffff {
            self.previous.load(Ordering::Relaxed)
        } else if index == window.wrapping_sub(1) & 0xffff_ffff {
            (recent & 0xffff_ffff) as u32
        } else {
            0
        }
    }

    /// The tenant's calls in flight.
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// The tenants' shares. Reads take no lock (papaya); a new tenant is one
/// insertion; beyond `max_tenants` new tenants share one overflow share.
#[derive(Debug)]
pub(crate) struct Shares {
    map: papaya::HashMap<Box<str>, Arc<Share>>,
    /// Calls without a valid org id, counted as one tenant.
    anonymous: Arc<Share>,
    /// New tenants beyond the cap, counted as one tenant.
    overflow: Arc<Share>,
    weights: HashMap<Box<str>, u32>,
    default_weight: u32,
    /// The summed weight of the shares with a call in flight.
    active_weight: AtomicU64,
    tenants: AtomicUsize,
    max_tenants: usize,
}

impl Shares {
    /// Shares weighing `weights` (others `default_weight`), tracking at
    /// most `max_tenants` tenants.
    pub(crate) fn new(
        weights: HashMap<Box<str>, u32>,
        default_weight: u32,
        max_tenants: usize,
    ) -> Self {
        let default_weight = default_weight.max(1);
        Self {
            map: papaya::HashMap::new(),
            anonymous: Arc::new(Share::new(default_weight)),
            overflow: Arc::new(Share::new(default_weight)),
            weights,
            default_weight,
            active_weight: AtomicU64::new(0),
            tenants: AtomicUsize::new(0),
            max_tenants,
        }
    }

    /// The share of `tenant` (`None`: a call without an org id), made on
    /// its first call.
    #[inline]
    pub(crate) fn of(&self, tenant: Option<&str>) -> Arc<Share> {
        let Some(tenant) = tenant else {
            return Arc::clone(&self.anonymous);
        };
        let map = self.map.pin();
        if let Some(share) = map.get(tenant) {
            share.seen.store(true, Ordering::Relaxed);
            return Arc::clone(share);
        }
        self.insert(tenant)
    }

    #[cold]
    fn insert(&self, tenant: &str) -> Arc<Share> {
        let weight = self.weights.get(tenant).copied();
        // Tenants with a weight of their own are always tracked (their
        // number is bounded by the configuration).
        if weight.is_none() && self.tenants.load(Ordering::Relaxed) >= self.max_tenants {
            return Arc::clone(&self.overflow);
        }
        let share = Arc::new(Share::new(weight.unwrap_or(self.default_weight)));
        let map = self.map.pin();
        match map.try_insert(Box::from(tenant), Arc::clone(&share)) {
            Ok(_) => {
                self.tenants.fetch_add(1, Ordering::Relaxed);
                share
            }
            Err(occupied) => Arc::clone(occupied.current),
        }
    }

    /// Counts a call of `share` in flight; returns the tenant's calls in
    /// flight, this one included, and the active weight with the tenant's.
    #[inline]
    pub(crate) fn enter(&self, share: &Share) -> (u32, u64) {
        let before = share.in_flight.fetch_add(1, Ordering::AcqRel);
        let active = if before == 0 {
            self.active_weight
                .fetch_add(u64::from(share.weight), Ordering::AcqRel)
                + u64::from(share.weight)
        } else {
            self.active_weight.load(Ordering::Acquire)
        };
        // Another tenant's last call may have left between our count and
        // this read: the active weight holds this tenant's at least.
        (before + 1, active.max(u64::from(share.weight)))
    }

    /// Ends a call of `share`.
    #[inline]
    pub(crate) fn leave(&self, share: &Share) {
        if share.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.active_weight
                .fetch_sub(u64::from(share.weight), Ordering::AcqRel);
        }
    }

    /// The fair share (whole calls) of a tenant of `weight` in `limit`,
    /// the active tenants weighing `active` in all.
    #[inline]
    pub(crate) fn fair(limit: u32, weight: u32, active: u64) -> u64 {
        u64::from(limit) * u64::from(weight) / active.max(1)
    }

    /// The weight of `share`.
    #[inline]
    pub(crate) fn weight(share: &Share) -> u32 {
        share.weight
    }

    /// Evicts the tenants unseen since the last sweep with nothing in
    /// flight, and clears the others' mark. A call that holds a share
    /// keeps it (its `Arc`), so eviction loses no count: at worst a tenant
    /// evicted as a call of it arrives has two shares for a moment.
    pub(crate) fn sweep(&self) {
        let map = self.map.pin();
        let mut evicted = 0;
        map.retain(|_, share| {
            let keep = share.seen.swap(false, Ordering::Relaxed) || share.in_flight() > 0;
            evicted += usize::from(!keep);
            keep
        });
        self.tenants.fetch_sub(evicted, Ordering::Relaxed);
    }

    /// The tenants tracked (beside the anonymous and overflow shares).
    pub(crate) fn len(&self) -> usize {
        self.tenants.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_active_weight_follows_the_tenants_with_calls_in_flight() {
        let weights = HashMap::from([(Box::from("big"), 3)]);
        let shares = Shares::new(weights, 1, 10);
        let big = shares.of(Some("big"));
        let small = shares.of(Some("small"));
        assert_eq!(shares.enter(&big), (1, 3));
        assert_eq!(shares.enter(&big), (2, 3));
        assert_eq!(shares.enter(&small), (1, 4));
        shares.leave(&big);
        shares.leave(&big);
        assert_eq!(shares.enter(&small), (2, 1));
        assert_eq!(Shares::fair(12, 3, 4), 9);
        assert_eq!(Shares::fair(12, 1, 4), 3);
        assert_eq!(Shares::fair(3, 1, 0), 3);
    }

    #[test]
    fn admissions_are_counted_per_window_and_the_last_one_is_read() {
        let share = Share::new(1);
        assert_eq!(share.last_window(1), 0);
        share.admitted(1);
        share.admitted(1);
        assert_eq!(share.last_window(1), 0, "window 1 is not over");
        assert_eq!(share.last_window(2), 2);
        share.admitted(2);
        assert_eq!(share.last_window(2), 2);
        assert_eq!(share.last_window(3), 1);
        // An idle window in between: nothing in the last one.
        share.admitted(5);
        assert_eq!(share.last_window(5), 0);
        assert_eq!(share.last_window(7), 0);
    }

    #[test]
    fn beyond_the_cap_new_tenants_share_the_overflow_until_swept() {
        let weights = HashMap::from([(Box::from("weighted"), 2)]);
        let shares = Shares::new(weights, 1, 2);
        let a = shares.of(Some("a"));
        shares.of(Some("b"));
        let c = shares.of(Some("c"));
        let d = shares.of(Some("d"));
        assert!(Arc::ptr_eq(&c, &d), "c and d share the overflow");
        assert_eq!(Shares::weight(&shares.of(Some("weighted"))), 2);
        assert_eq!(shares.len(), 3);
        // a has a call in flight; b and weighted none: two sweeps evict
        // those two (the first clears the marks).
        shares.enter(&a);
        shares.sweep();
        shares.sweep();
        assert_eq!(shares.len(), 1);
        let c = shares.of(Some("c"));
        assert!(!Arc::ptr_eq(&c, &d), "room again");
        shares.leave(&a);
        assert_eq!(a.in_flight(), 0);
        assert!(Arc::ptr_eq(&shares.of(None), &shares.of(None)));
    }
}
