//! One tenant's lease on one fleet-wide bucket (its calls or its work
//! units): the units this replica may spend without asking Redis, the
//! units it admitted on credit, the state of its next request, and this
//! replica's share of the fleet's traffic: five words, two leases a
//! tenant ([`FleetTenant`](super::tenant::FleetTenant)).
//!
//! Time here is in ticks ([`tick`](super::tick)).

use std::sync::atomic::{AtomicU64, Ordering};

use super::share::TrafficShare;
use super::tick::nanos;
use crate::limits::config::Rate;
use crate::limits::gcra::Gcra;

/// Units in a lease: the low 24 bits of [`Lease::stock`].
const UNITS: u64 = (1 << 24) - 1;
/// The most units one lease holds.
pub(crate) const MAX_LEASE: u64 = UNITS;
/// The expiry (ticks) of [`Lease::stock`], and the time fields of
/// [`Lease::status`] and [`Lease::history`]: 40 bits (over 36 years).
const TIME_BITS: u32 = 40;
const TIME: u64 = (1 << TIME_BITS) - 1;

/// Status: a request for this lease is in flight (or scheduled).
const REQUESTING: u64 = 1 << 63;
/// Status: the last answer was short (the fleet's bucket is nearly
/// empty): no credit until a full answer.
const NEAR_LIMIT: u64 = 1 << 62;
/// Status: the low-water mark (units), 22 bits above the time.
const LOW_SHIFT: u32 = TIME_BITS;
const LOW: u64 = (1 << 22) - 1;

/// What [`Lease::take`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// Taken from the lease; a request should be made now (the lease is
    /// at its low-water mark and none is in flight: this caller won the
    /// right to send it).
    Taken { request: bool },
    /// The lease is dry or expired.
    Dry,
}

/// Why [`Lease::credit`] did not admit on credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoCredit {
    /// Nanoseconds until a retry may pass: until the fleet's bucket holds
    /// a unit (from the last answer), at least `min_wait`.
    pub(crate) wait: u64,
    /// Whether this caller should send a request now.
    pub(crate) request: bool,
    /// Whether an answer is due that may change the verdict: the debt is
    /// at its bound, or the fleet's bucket was nearly empty at the last
    /// answer and that answer is too old to tell when the bucket holds a
    /// unit now (older than the least time between two requests, or its
    /// wait is over). A caller that can wait for the answer in flight and
    /// judge the call again gets the fleet's own verdict and pushback.
    pub(crate) answer_due: bool,
}

/// One tenant's lease on one fleet-wide bucket.
#[derive(Debug, Default)]
pub(crate) struct Lease {
    /// Units left (low 24 bits) and the tick they expire at (above).
    stock: AtomicU64,
    /// Units admitted on credit and not yet charged to the fleet's bucket
    /// (the next request charges them; they count against the bound on
    /// credit until its answer).
    debt: AtomicU64,
    /// [`REQUESTING`], [`NEAR_LIMIT`], the low-water mark, and the tick
    /// until which the fleet's bucket is empty (low 40 bits).
    status: AtomicU64,
    /// Written and read by requests only (one at a time): the units in
    /// stock right after the last answer (low 24 bits) and its tick.
    history: AtomicU64,
    /// Written by requests only: this replica's share of the fleet's
    /// traffic on the bucket.
    traffic: TrafficShare,
}

impl Lease {
    /// Takes `n` units (1 to [`MAX_LEASE`]) at tick `now`, all or none.
    #[inline]
    pub(crate) fn take(&self, n: u64, now: u64) -> Take {
        let mut stock = self.stock.load(Ordering::Acquire);
        loop {
            let units = stock & UNITS;
            if units < n || (stock >> 24) <= now {
                return Take::Dry;
            }
            match self.stock.compare_exchange_weak(
                stock,
                stock - n,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    let status = self.status.load(Ordering::Relaxed);
                    let low = (status >> LOW_SHIFT) & LOW;
                    let request =
                        units - n <= low && status & REQUESTING == 0 && self.start_request();
                    return Take::Taken { request };
                }
                Err(current) => stock = current,
            }
        }
    }

    /// Claims the right to send the next request; false if one is in
    /// flight.
    #[inline]
    pub(crate) fn start_request(&self) -> bool {
        self.status.fetch_or(REQUESTING, Ordering::AcqRel) & REQUESTING == 0
    }

    /// Gives back `n` units taken by [`take`](Self::take) (a call refused
    /// by another limit). Units of an expired lease are not given back.
    pub(crate) fn give_back(&self, n: u64, now: u64) {
        let _ = self
            .stock
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |stock| {
                ((stock >> 24) > now && (stock & UNITS) + n <= UNITS).then_some(stock + n)
            });
    }

    /// Admits `n` units on credit at tick `now` (`fresh` reads the clock
    /// again, in ticks), when the fleet's bucket was not nearly
    /// empty at the last answer and the debt stays within `max_debt` (or
    /// is 0: one charge at a time may always go on credit). `local` is the
    /// fallback bucket's verdict, asked only then. The debt is charged to
    /// the fleet's bucket by the next request, which the caller sends when
    /// told to.
    ///
    /// Near the limit there is no credit. The refusal's wait is the
    /// fleet's, from the last answer, while that wait is not over;
    /// otherwise a request is due (started here unless one is in flight)
    /// and the refusal says so ([`NoCredit::answer_due`]), as it does
    /// when the debt is at its bound (the request charging it is in
    /// flight) or the local bucket refuses (its wait is no fleet's).
    #[cold]
    pub(crate) fn credit(
        &self,
        n: u64,
        now: u64,
        fresh: impl FnOnce() -> u64,
        limits: CreditLimits,
        local: impl FnOnce() -> Result<(), u64>,
    ) -> Result<bool, NoCredit> {
        let CreditLimits { max_debt, min_wait } = limits;
        let status = self.status.load(Ordering::Acquire);
        let dry_until = status & TIME;
        if status & NEAR_LIMIT != 0 {
            // Before the tick the last answer named, the fleet's bucket
            // holds no batch for this replica whatever other replicas did
            // since (they only take units): nothing to ask. `now` was read
            // before this state was loaded (a thread preempted in between
            // would hold an old one): a refusal is judged by a reading
            // taken after the load, `fresh` ticks, never earlier than `now`.
            let now = if dry_until > now {
                fresh().max(now)
            } else {
                now
            };
            let known = dry_until > now;
            let request = !known && status & REQUESTING == 0 && self.start_request();
            let wait = nanos(dry_until.saturating_sub(now)).max(min_wait);
            return Err(NoCredit {
                wait,
                request,
                answer_due: !known,
            });
        }
        let debt = self.debt.load(Ordering::Acquire);
        if debt != 0 && debt.saturating_add(n) > max_debt {
            // The request that charges the debt is in flight (or starts
            // here): its answer judges the call.
            let request = status & REQUESTING == 0 && self.start_request();
            return Err(NoCredit {
                wait: min_wait,
                request,
                answer_due: true,
            });
        }
        if let Err(wait) = local() {
            // The local bucket's wait is this replica's guess, not the
            // fleet's: the fleet judges the call (its answer is due).
            let request = status & REQUESTING == 0 && self.start_request();
            return Err(NoCredit {
                wait: wait.max(min_wait),
                request,
                answer_due: true,
            });
        }
        self.debt.fetch_add(n, Ordering::AcqRel);
        Ok(status & REQUESTING == 0 && self.start_request())
    }

    /// Gives back `n` units admitted on credit (a call refused by another
    /// limit).
    pub(crate) fn forgive(&self, n: u64) {
        let _ = self
            .debt
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |debt| {
                Some(debt.saturating_sub(n))
            });
    }

    /// The debt now, for a request to charge. It stays counted (against
    /// the bound on credit) until the answer says it was charged.
    pub(crate) fn debt(&self) -> u64 {
        self.debt.load(Ordering::Acquire)
    }

    /// `charged` units of the debt were charged to the fleet's bucket.
    pub(crate) fn paid(&self, charged: u64) {
        self.forgive(charged);
    }

    /// The units in stock at tick `now` (0 if expired).
    pub(crate) fn units(&self, now: u64) -> u64 {
        let stock = self.stock.load(Ordering::Acquire);
        if (stock >> 24) > now {
            stock & UNITS
        } else {
            0
        }
    }

    /// The last answer: units in stock right after it, and its tick.
    pub(crate) fn history(&self) -> (u64, u64) {
        let history = self.history.load(Ordering::Acquire);
        (history & UNITS, history >> 24)
    }

    /// Adds `granted` units at tick `now`, valid until `expires`: the units
    /// left of an unexpired lease stay (with the new expiry). Records the
    /// history, sets the low-water mark, and the fleet's state: nearly
    /// empty (`short`: the answer gave less than asked) until
    /// `dry_until`. Leaves the request in flight (see
    /// [`finish`](Self::finish)).
    pub(crate) fn fill(&self, granted: u64, now: u64, expires: u64, answer: Answered) {
        let mut after = 0;
        let _ = self
            .stock
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |stock| {
                let left = if (stock >> 24) > now {
                    stock & UNITS
                } else {
                    0
                };
                after = (left + granted).min(UNITS);
                Some(((expires & TIME) << 24) | after)
            });
        self.history
            .store(((now & TIME) << 24) | after, Ordering::Release);
        let flags = if answer.short { NEAR_LIMIT } else { 0 };
        let status = REQUESTING
            | flags
            | ((answer.low_water.min(LOW)) << LOW_SHIFT)
            | (answer.dry_until & TIME);
        self.status.store(status, Ordering::Release);
    }

    /// The tick before which the fleet's bucket holds no batch for this
    /// replica, if the last answer was short (0 otherwise): a request
    /// waits for it.
    pub(crate) fn near_limit_until(&self) -> u64 {
        let status = self.status.load(Ordering::Acquire);
        if status & NEAR_LIMIT != 0 {
            status & TIME
        } else {
            0
        }
    }

    /// An answer at tick `now`, the previous one at tick `before` (0:
    /// none): this replica charged `charged` units, and the fleet's
    /// traffic is now `fleet` (see [`TrafficShare::record`]).
    pub(crate) fn record_traffic(&self, charged: u64, fleet: f64, now: u64, before: u64) {
        self.traffic.record(charged, fleet, now, before);
    }

    /// The fallback bucket while Redis is down, at tick `now` (see
    /// [`TrafficShare::fallback`]).
    pub(crate) fn fallback(&self, rate: Rate, now: u64) -> Option<(Rate, Gcra)> {
        self.traffic.fallback(rate, self.history().1, now)
    }

    /// Whether the last answer was short: the fleet's bucket was nearly
    /// empty.
    pub(crate) fn is_near_limit(&self) -> bool {
        self.status.load(Ordering::Acquire) & NEAR_LIMIT != 0
    }

    /// Ends the request in flight (the next one may start).
    pub(crate) fn finish(&self) {
        self.status.fetch_and(!REQUESTING, Ordering::AcqRel);
    }

    /// Whether a request is in flight.
    pub(crate) fn requesting(&self) -> bool {
        self.status.load(Ordering::Acquire) & REQUESTING != 0
    }

    /// Whether the lease holds nothing a sweep would lose: no units in
    /// stock at `now`, no debt, no request in flight.
    pub(crate) fn is_idle(&self, now: u64) -> bool {
        self.units(now) == 0 && self.debt.load(Ordering::Acquire) == 0 && !self.requesting()
    }
}

/// The bounds of [`Lease::credit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CreditLimits {
    /// The most units admitted on credit and not yet charged.
    pub(crate) max_debt: u64,
    /// The least wait of a refusal (ns).
    pub(crate) min_wait: u64,
}

/// What an answer set besides the units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answered {
    /// The answer gave less than asked: the fleet's bucket is nearly empty.
    pub(crate) short: bool,
    /// The tick until which the bucket holds no unit (0: it holds one).
    pub(crate) dry_until: u64,
    /// The units in stock at which the next request starts.
    pub(crate) low_water: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: Answered = Answered {
        short: false,
        dry_until: 0,
        low_water: 2,
    };

    #[test]
    fn units_are_taken_until_the_low_water_mark_asks_for_more_once() {
        let lease = Lease::default();
        assert_eq!(lease.take(1, 5), Take::Dry, "no lease yet");
        assert!(lease.start_request());
        lease.fill(5, 5, 100, FULL);
        lease.finish();
        assert_eq!(lease.take(2, 6), Take::Taken { request: false });
        // 3 left, then 2: at the mark, one request.
        assert_eq!(lease.take(1, 6), Take::Taken { request: true });
        assert_eq!(lease.take(1, 6), Take::Taken { request: false });
        assert_eq!(lease.take(2, 6), Take::Dry, "1 left: all or none");
        assert_eq!(lease.take(1, 6), Take::Taken { request: false });
        assert_eq!(lease.take(1, 6), Take::Dry);
    }

    #[test]
    fn an_expired_lease_is_dry_and_its_units_are_not_carried_over() {
        let lease = Lease::default();
        lease.fill(10, 0, 50, FULL);
        assert_eq!(lease.units(49), 10);
        assert_eq!(lease.take(1, 50), Take::Dry);
        lease.give_back(1, 50);
        assert_eq!(lease.units(50), 0);
        lease.fill(3, 60, 110, FULL);
        assert_eq!(lease.units(60), 3, "the expired 10 are gone");
        assert_eq!(lease.history(), (3, 60));
        lease.fill(4, 70, 120, FULL);
        assert_eq!(lease.units(70), 7, "an unexpired stock stays");
    }

    /// Debt bound 4, least wait 7 ns.
    const BOUNDS: CreditLimits = CreditLimits {
        max_debt: 4,
        min_wait: 7,
    };

    fn refused(wait: u64, request: bool, answer_due: bool) -> Result<bool, NoCredit> {
        Err(NoCredit {
            wait,
            request,
            answer_due,
        })
    }

    #[test]
    fn credit_is_given_while_the_fleet_has_units_within_the_debt_bound() {
        let lease = Lease::default();
        let ok = || Ok(());
        assert_eq!(
            lease.credit(3, 0, || 0, BOUNDS, ok),
            Ok(true),
            "first: request"
        );
        assert_eq!(lease.credit(1, 0, || 0, BOUNDS, ok), Ok(false), "in flight");
        assert_eq!(
            lease.credit(1, 0, || 0, BOUNDS, ok),
            refused(7, false, true),
            "over the bound: the answer in flight is due"
        );
        lease.forgive(1);
        assert_eq!(lease.debt(), 3);
        assert!(
            lease.credit(1, 0, || 0, BOUNDS, ok).is_ok(),
            "3 + 1 within 4"
        );
        lease.paid(4);
        assert_eq!(lease.debt(), 0);
        lease.finish();
        assert_eq!(
            lease.credit(1, 0, || 0, BOUNDS, || Err(3)),
            refused(7, true, true),
            "the local bucket refuses: the fleet judges (a request, its answer due)"
        );
        assert_eq!(
            lease.credit(9, 0, || 0, BOUNDS, ok),
            Ok(false),
            "no debt: one charge (its request is the one in flight)"
        );
        assert_eq!(lease.debt(), 9);
    }

    /// A lease whose last answer, at tick 10, was short: the fleet's
    /// bucket dry until tick 15.
    fn near_the_limit() -> Lease {
        let lease = Lease::default();
        lease.fill(
            0,
            10,
            20,
            Answered {
                short: true,
                dry_until: 15,
                low_water: 1,
            },
        );
        lease.finish();
        lease
    }

    #[test]
    fn near_the_limit_there_is_no_credit_and_the_wait_is_the_fleets() {
        let lease = near_the_limit();
        let bounds = CreditLimits {
            max_debt: 100,
            min_wait: 1,
        };
        let refused_at = |now| lease.credit(1, now, || now, bounds, || Ok(())).unwrap_err();
        assert_eq!(
            refused_at(12),
            NoCredit {
                wait: nanos(3),
                request: false,
                answer_due: false,
            }
        );
        // The wait is over: ask the fleet, and say an answer is due.
        assert_eq!(
            refused_at(15),
            NoCredit {
                wait: 1,
                request: true,
                answer_due: true,
            }
        );
        assert!(lease.requesting());
        assert!(!lease.is_idle(15));
        assert_eq!(
            refused_at(15),
            NoCredit {
                wait: 1,
                request: false,
                answer_due: true,
            },
            "one request at a time; the answer in flight is due"
        );
        lease.finish();
        assert!(lease.is_idle(15));
    }

    #[test]
    fn before_the_named_tick_nothing_is_asked_however_old_the_answer() {
        let lease = near_the_limit();
        let bounds = CreditLimits {
            max_debt: 100,
            min_wait: 1,
        };
        assert_eq!(lease.near_limit_until(), 15);
        // At tick 14 the answer (tick 10) is old, but other replicas only
        // take units: the bucket holds no batch before tick 15.
        let refused = lease.credit(1, 14, || 14, bounds, || Ok(())).unwrap_err();
        assert_eq!(
            refused,
            NoCredit {
                wait: nanos(1),
                request: false,
                answer_due: false,
            }
        );
        assert!(!lease.requesting());
    }

    #[test]
    fn a_call_preempted_after_reading_the_clock_is_judged_by_a_later_reading() {
        let lease = near_the_limit();
        let bounds = CreditLimits {
            max_debt: 100,
            min_wait: 1,
        };
        // The call read tick 12, then slept past the named tick 15: by the
        // reading after the load the wait is over, so the fleet judges it.
        let refused = lease.credit(1, 12, || 16, bounds, || Ok(())).unwrap_err();
        assert_eq!(
            refused,
            NoCredit {
                wait: 1,
                request: true,
                answer_due: true,
            }
        );
        lease.finish();
        // A reading that is not later than `now` does not move it back.
        let refused = lease.credit(1, 13, || 11, bounds, || Ok(())).unwrap_err();
        assert_eq!(refused.wait, nanos(2));
    }
}
