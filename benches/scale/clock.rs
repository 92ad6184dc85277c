//! What a thread spent: its CPU time (`CLOCK_THREAD_CPUTIME_ID`), wall
//! time, and context switches (`getrusage(RUSAGE_THREAD)`: voluntary ones
//! are the thread blocking, on a lock or a futex; involuntary ones are the
//! scheduler taking the core away). CPU time rather than wall time is the
//! per-RPC figure: a thread that spins or blocks on a shared lock pays in
//! either, but CPU time does not count the time a thread sat preempted on
//! a machine shared with other work.
//!
//! CPU clocks on Unix; the switches on Linux only (`RUSAGE_THREAD`),
//! elsewhere they read 0. Other systems build the bench but cannot run it.

use std::time::{Duration, Instant};

/// A thread's clocks at one instant; [`elapsed`](Self::elapsed) gives what
/// the thread spent since.
#[derive(Debug, Clone, Copy)]
pub struct ThreadClock {
    cpu: Duration,
    wall: Instant,
    switches: Switches,
}

/// What the calling thread spent between a [`ThreadClock::now`] and
/// [`ThreadClock::elapsed`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Spent {
    pub cpu: Duration,
    pub wall: Duration,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Switches {
    voluntary: u64,
    involuntary: u64,
}

impl ThreadClock {
    /// The calling thread's clocks now.
    pub fn now() -> Self {
        let switches = thread_switches();
        let cpu = thread_cpu();
        Self {
            cpu,
            wall: Instant::now(),
            switches,
        }
    }

    /// What the calling thread (the one that took `self`) spent since.
    pub fn elapsed(&self) -> Spent {
        let wall = self.wall.elapsed();
        let cpu = thread_cpu();
        let switches = thread_switches();
        Spent {
            cpu: cpu.saturating_sub(self.cpu),
            wall,
            voluntary_switches: switches.voluntary - self.switches.voluntary,
            involuntary_switches: switches.involuntary - self.switches.involuntary,
        }
    }
}

/// CPU time of the whole process (every thread, user and system).
pub fn process_cpu() -> Duration {
    cpu_time(Clock::Process)
}

fn thread_cpu() -> Duration {
    cpu_time(Clock::Thread)
}

enum Clock {
    Thread,
    Process,
}

#[cfg(unix)]
fn cpu_time(clock: Clock) -> Duration {
    let clock = match clock {
        Clock::Thread => libc::CLOCK_THREAD_CPUTIME_ID,
        Clock::Process => libc::CLOCK_PROCESS_CPUTIME_ID,
    };
    cpu_clock(clock)
}

#[cfg(not(unix))]
fn cpu_time(_: Clock) -> Duration {
    unimplemented!("the scale bench reads CPU clocks through clock_gettime (Unix only)")
}

#[cfg(unix)]
fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the call's duration;
    // both clock ids are defined on every platform libc exposes them on.
    let rc = unsafe { libc::clock_gettime(clock, &mut now) };
    assert_eq!(rc, 0, "clock_gettime: {}", std::io::Error::last_os_error());
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

#[cfg(target_os = "linux")]
fn thread_switches() -> Switches {
    // SAFETY: `rusage` is plain old data; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call's duration;
    // RUSAGE_THREAD asks for the calling thread's counters (Linux ≥ 2.6.26).
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    Switches {
        voluntary: usage.ru_nvcsw as u64,
        involuntary: usage.ru_nivcsw as u64,
    }
}

#[cfg(not(target_os = "linux"))]
fn thread_switches() -> Switches {
    Switches::default()
}
