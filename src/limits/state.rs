//! One tenant's limiter state: its calls in flight, its rate bucket and
//! its work-unit bucket, all per-tenant atomics, the slot a rate keeper
//! other than these buckets may fill ([`TenantExtra`]), and the [`Slot`]
//! an admitted call holds.

use std::any::Any;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::gcra::{Gcra, GcraState};
use crate::tenant::OrgId;

/// The calls in flight: the low 32 bits of the state word.
const IN_FLIGHT: u64 = 0xFFFF_FFFF;
/// Set by every admission, cleared by each eviction sweep: a tenant
/// without it has had no call admitted since the last sweep.
const SEEN: u64 = 1 << 62;
/// The state was evicted (the whole word is this): a call that finds it
/// looks the tenant up again.
const EVICTED: u64 = 1 << 63;

/// One tenant's state. Aligned to 128 bytes (with the `Arc` counts it
/// shares a line with), so that two busy tenants never share a cache
/// line: the only lines RPCs of several tenants write are their own.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct TenantState {
    /// Calls in flight (low 32 bits), [`SEEN`] and [`EVICTED`]: one word,
    /// so that an eviction (a compare-and-swap from "none in flight, not
    /// seen" to [`EVICTED`]) fails if any call was admitted meanwhile.
    word: AtomicU64,
    /// The rate bucket (its TAT; 0 when full).
    rate: GcraState,
    /// The work-unit bucket: touched only by charges, so only when the
    /// tenant has a work rate. It costs no memory: it sits in the line's
    /// padding.
    work: GcraState,
    /// What a shared rate keeper keeps for this tenant (the Redis
    /// backend's leases), made on its first use; empty (one word, in the
    /// padding) with the local buckets only.
    extra: OnceLock<Box<dyn TenantExtra>>,
}

/// What a rate keeper other than the local buckets keeps per tenant, in
/// the tenant's state (see `keeper`).
pub(crate) trait TenantExtra: Any + Send + Sync + fmt::Debug {
    /// Whether it holds nothing an eviction of the tenant would lose, at
    /// `now` (ns since the limiter's epoch).
    fn is_idle(&self, now: u64) -> bool;
}

/// Which of a tenant's buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bucket {
    /// Its calls (the rate).
    Calls,
    /// Its work units (the work rate).
    Work,
}

/// Why a call was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotAdmitted {
    /// The tenant has its in-flight limit of calls in flight.
    InFlight,
    /// The tenant's calls came faster than its rate; the bucket admits
    /// the call `wait` ns later.
    Rate {
        /// Nanoseconds until the bucket admits the call (above 0).
        wait: u64,
    },
    /// This state was evicted: look the tenant up again.
    Evicted,
    /// A shared rate keeper had no unit for this replica; a retry may
    /// pass `wait` ns later.
    SharedRate {
        /// Nanoseconds until a retry may pass (above 0).
        wait: u64,
        /// The keeper's answer in flight may change the verdict (the call
        /// may wait for it: `keeper::SharedRates::wait_for_answer`).
        answer_due: bool,
    },
}

impl TenantState {
    /// Admits a call under `max_in_flight` and, with `rate`, the rate's
    /// parameters at `now` (read off `clock`, which a refusal reads
    /// again: see `GcraState::try_acquire`): takes a token, then an
    /// in-flight place. A refused call writes nothing (a token taken for a
    /// call then refused for its in-flight limit is given back).
    #[inline]
    pub(crate) fn admit(
        &self,
        max_in_flight: Option<u32>,
        rate: Option<(Gcra, u64)>,
        clock: impl Fn() -> u64,
    ) -> Result<(), NotAdmitted> {
        if let Some((gcra, now)) = rate
            && let Err(wait) = self.rate.try_acquire(gcra, now, clock)
        {
            return Err(self.unless_evicted(NotAdmitted::Rate { wait }));
        }
        let occupied = self.occupy(max_in_flight);
        if let (Err(NotAdmitted::InFlight), Some((gcra, _))) = (occupied, rate) {
            self.rate.refund(gcra);
        }
        occupied
    }

    /// Takes an in-flight place under `max_in_flight` (the token of the
    /// call's rate, if any, already taken: the caller gives it back if
    /// this refuses the call for its in-flight limit).
    #[inline]
    pub(crate) fn occupy(&self, max_in_flight: Option<u32>) -> Result<(), NotAdmitted> {
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            if word & EVICTED != 0 {
                // Dead state: its token does not matter any more.
                return Err(NotAdmitted::Evicted);
            }
            if max_in_flight.is_some_and(|max| word & IN_FLIGHT >= u64::from(max)) {
                return Err(NotAdmitted::InFlight);
            }
            match self.word.compare_exchange_weak(
                word,
                (word + 1) | SEEN,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(current) => word = current,
            }
        }
    }

    /// Takes `n` units from the local `bucket` with parameters `gcra` at
    /// `now` (read off `clock`, which a refusal reads again), all or none;
    /// refused, how long (ns) until it holds them.
    #[inline]
    pub(crate) fn take(
        &self,
        bucket: Bucket,
        gcra: Gcra,
        now: u64,
        n: u64,
        clock: impl Fn() -> u64,
    ) -> Result<(), u64> {
        match bucket {
            Bucket::Calls if n == 1 => self.rate.try_acquire(gcra, now, clock),
            Bucket::Calls => self.rate.try_acquire_n(gcra, now, n, clock),
            Bucket::Work => self.work.try_acquire_n(gcra, now, n, clock),
        }
    }

    /// Gives back `n` units taken from the local `bucket` by
    /// [`take`](Self::take) (or [`admit`](Self::admit)).
    pub(crate) fn give_back(&self, bucket: Bucket, gcra: Gcra, n: u64) {
        match bucket {
            Bucket::Calls => self.rate.refund_n(gcra, n),
            Bucket::Work => self.work.refund_n(gcra, n),
        }
    }

    /// What the shared rate keeper of type `T` keeps for this tenant,
    /// made on first use. `None` only if another type filled the slot
    /// (one limiter has one keeper: never).
    #[allow(
        dead_code,
        reason = "the shared half of the seam: used once a shared keeper is built in"
    )]
    #[inline]
    pub(crate) fn extra<T: TenantExtra + Default>(&self) -> Option<&T> {
        let extra: &dyn Any = &**self.extra.get_or_init(|| Box::<T>::default());
        extra.downcast_ref()
    }

    /// `refused`, or [`NotAdmitted::Evicted`] if the state is dead.
    #[cold]
    pub(crate) fn unless_evicted(&self, refused: NotAdmitted) -> NotAdmitted {
        if self.word.load(Ordering::Acquire) & EVICTED != 0 {
            NotAdmitted::Evicted
        } else {
            refused
        }
    }

    /// Ends one admitted call.
    #[inline]
    fn release(&self) {
        self.word.fetch_sub(1, Ordering::Release);
    }

    /// Calls in flight now.
    pub(crate) fn in_flight(&self) -> u32 {
        (self.word.load(Ordering::Acquire) & IN_FLIGHT) as u32
    }

    /// One eviction sweep's visit at `now`: clears [`SEEN`] from a
    /// tenant seen since the last sweep; evicts (true) a tenant not seen
    /// since, with no call in flight and full buckets: a state equal to a
    /// fresh one, so evicting it loses nothing. Called by one sweeper
    /// at a time.
    pub(crate) fn sweep(&self, now: u64) -> bool {
        let word = self.word.load(Ordering::Acquire);
        if word & SEEN != 0 {
            self.word.fetch_and(!SEEN, Ordering::AcqRel);
            return false;
        }
        // A call admitted after the load sets SEEN, so the swap fails:
        // the state is evicted only if nothing was admitted meanwhile.
        word & (IN_FLIGHT | EVICTED) == 0
            && self.rate.is_full(now)
            && self.work.is_full(now)
            && self.extra.get().is_none_or(|extra| extra.is_idle(now))
            && self
                .word
                .compare_exchange(word, EVICTED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }
}

/// The in-flight places an admitted call holds: one per tenant it was
/// charged to. Given back when dropped (the response body carries it).
#[derive(Debug)]
pub(crate) struct Slot(Places);

#[derive(Debug)]
enum Places {
    One(Arc<TenantState>),
    Many(Box<[Arc<TenantState>]>),
}

impl Slot {
    /// The place of a single-tenant call.
    pub(crate) fn one(state: Arc<TenantState>) -> Self {
        Self(Places::One(state))
    }

    /// The places of a federated call, one per tenant charged.
    pub(crate) fn many(states: Vec<Arc<TenantState>>) -> Self {
        Self(Places::Many(states.into_boxed_slice()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        match &self.0 {
            Places::One(state) => state.release(),
            Places::Many(states) => states.iter().for_each(|state| state.release()),
        }
    }
}

/// A tenant id with its hash, computed once per call and used for both
/// the overrides table and the state map.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hashed<'a> {
    pub(crate) hash: u64,
    pub(crate) id: &'a str,
}

impl<'a> Hashed<'a> {
    /// `id` hashed by `hasher` (the limiter's, randomly keyed SipHash:
    /// tenant ids come from clients, so their hashes must not be
    /// predictable).
    #[inline]
    pub(crate) fn new(hasher: &impl BuildHasher, id: &'a str) -> Self {
        Self {
            hash: hasher.hash_one(id),
            id,
        }
    }
}

impl Hash for Hashed<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// The state map's key: the tenant and its hash.
#[derive(Debug, Clone)]
pub(crate) struct TenantKey {
    hash: u64,
    id: OrgId,
}

impl TenantKey {
    pub(crate) fn new(key: Hashed<'_>) -> Self {
        Self {
            hash: key.hash,
            id: OrgId::from_checked(key.id.as_bytes()),
        }
    }
}

impl Hash for TenantKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl PartialEq for TenantKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.id == other.id
    }
}

impl Eq for TenantKey {}

impl papaya::Equivalent<TenantKey> for Hashed<'_> {
    fn equivalent(&self, key: &TenantKey) -> bool {
        self.hash == key.hash && key.id == self.id
    }
}

/// Hashes a key that carries its own hash ([`Hashed`], [`TenantKey`]):
/// the hash is computed once per call, with the limiter's keyed hasher,
/// and not again by each table.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PassThrough;

impl BuildHasher for PassThrough {
    type Hasher = PassThroughHasher;

    fn build_hasher(&self) -> PassThroughHasher {
        PassThroughHasher(0)
    }
}

/// The [`PassThrough`] hasher: its hash is the `u64` written.
#[derive(Debug)]
pub(crate) struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in (FNV-1a).
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock standing still at the `now` the calls are given (0).
    const STILL: fn() -> u64 = || 0;

    #[test]
    fn the_in_flight_limit_is_exact_and_places_come_back_on_drop() {
        let state = Arc::new(TenantState::default());
        let slots: Vec<Slot> = (0..5)
            .filter(|_| state.admit(Some(3), None, STILL).is_ok())
            .map(|_| Slot::one(Arc::clone(&state)))
            .collect();
        assert_eq!(slots.len(), 3);
        assert_eq!(
            state.admit(Some(3), None, STILL),
            Err(NotAdmitted::InFlight)
        );
        drop(slots);
        assert_eq!(state.in_flight(), 0);
        assert_eq!(
            state.admit(Some(0), None, STILL),
            Err(NotAdmitted::InFlight)
        );
    }

    #[test]
    fn a_call_refused_for_in_flight_keeps_its_token() {
        let gcra = Gcra::of(super::super::config::Rate::new(1.0, 2).unwrap(), 1);
        let state = TenantState::default();
        assert!(state.admit(Some(1), Some((gcra, 0)), STILL).is_ok());
        assert_eq!(
            state.admit(Some(1), Some((gcra, 0)), STILL),
            Err(NotAdmitted::InFlight)
        );
        state.release();
        assert!(state.admit(Some(1), Some((gcra, 0)), STILL).is_ok());
        state.release();
        assert_eq!(
            state.admit(None, Some((gcra, 0)), STILL),
            Err(NotAdmitted::Rate {
                wait: 1_000_000_000
            })
        );
    }

    #[test]
    fn only_an_unseen_idle_full_state_is_evicted_and_then_refuses_everything() {
        let gcra = Gcra::of(super::super::config::Rate::new(1.0, 1).unwrap(), 1);
        let state = TenantState::default();
        assert!(state.admit(None, Some((gcra, 0)), STILL).is_ok());
        assert!(!state.sweep(0), "seen: kept, SEEN cleared");
        assert!(!state.sweep(0), "in flight: kept");
        state.release();
        assert!(!state.sweep(1), "bucket not full yet: kept");
        assert!(state.sweep(2_000_000_000));
        assert_eq!(state.admit(None, None, STILL), Err(NotAdmitted::Evicted));
        assert_eq!(
            state.admit(None, Some((gcra, 0)), STILL),
            Err(NotAdmitted::Evicted)
        );
    }

    #[test]
    fn keys_match_their_lookups_by_id_and_hash() {
        let hasher = std::collections::hash_map::RandomState::new();
        let lookup = Hashed::new(&hasher, "team-a");
        let key = TenantKey::new(lookup);
        assert!(papaya::Equivalent::equivalent(&lookup, &key));
        assert_eq!(PassThrough.hash_one(&key), PassThrough.hash_one(lookup));
        assert!(!papaya::Equivalent::equivalent(
            &Hashed::new(&hasher, "team-b"),
            &key
        ));
    }

    #[test]
    fn a_state_whose_work_bucket_is_not_full_is_kept() {
        let gcra = Gcra::of(super::super::config::Rate::new(1.0, 10).unwrap(), 1);
        let state = TenantState::default();
        assert_eq!(state.take(Bucket::Work, gcra, 0, 4, STILL), Ok(()));
        assert_eq!(
            state.take(Bucket::Work, gcra, 0, 7, STILL),
            Err(1_000_000_000)
        );
        assert!(!state.sweep(0), "work bucket not full: kept");
        assert!(!state.sweep(3_999_999_999), "still not full");
        state.give_back(Bucket::Work, gcra, 4);
        assert!(state.sweep(0), "refunded: full again");
        // The work bucket fits in the line the state had anyway.
        assert_eq!(std::mem::size_of::<TenantState>(), 128);
    }
}
