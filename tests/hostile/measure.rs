//! What the scenarios share: taking turns, the process's live bytes once
//! it is quiet, a handler that asks the layer for the work that makes it
//! decode or hold message bytes, and figures in KiB.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tonic::Code;
use tonic_hotpath::stats::{RpcEvent, StatsHandler};

pub use support::alloc_count::{live_bytes, peak_bytes, reset_peak};

/// Holds the process to one scenario at a time: the counts are
/// process-wide, so two scenarios side by side would mix their figures.
/// Taken by the synchronous test function, before its runtime starts.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    // A scenario that failed leaves nothing behind that the next needs.
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The runtime every scenario runs on: two worker threads, as many as this
/// machine's cores, so "per thread" bounds count two threads.
pub const WORKERS: usize = 2;

/// A multi-thread runtime of [`WORKERS`] workers, I/O and timers on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The bytes live once the process is quiet: sampled every 25 ms until
/// three samples in a row lie within 4 KiB of each other (at most 10 s;
/// then the last sample).
pub async fn settled() -> usize {
    const STEADY: usize = 4 * 1024;
    let mut samples = [live_bytes(); 3];
    for round in 0..400 {
        tokio::time::sleep(Duration::from_millis(25)).await;
        samples[round % 3] = live_bytes();
        let (low, high) = (
            samples.iter().min().copied().unwrap_or_default(),
            samples.iter().max().copied().unwrap_or_default(),
        );
        if round >= 2 && high - low <= STEADY {
            break;
        }
    }
    live_bytes()
}

/// `bytes` in KiB, for the printed figures.
pub fn kib(bytes: impl TryInto<i64>) -> f64 {
    bytes.try_into().unwrap_or(i64::MAX) as f64 / 1024.0
}

/// `after - before` as a signed byte count.
pub fn delta(after: usize, before: usize) -> i64 {
    after as i64 - before as i64
}

/// A handler that asks the layer for every piece of work that makes it
/// decode or keep message bytes: the uncompressed sizes of compressed
/// messages (a second decompression, beside tonic's), and, with `DATA`,
/// each message's bytes (as a binary logger asks). It tallies the status
/// code of each RPC's `End`.
#[derive(Debug, Default)]
pub struct Demanding<const DATA: bool> {
    ends: [AtomicUsize; 17],
}

impl<const DATA: bool> Demanding<DATA> {
    /// How many RPCs ended with `code`.
    pub fn ended(&self, code: Code) -> usize {
        self.ends[code as usize].load(Ordering::Relaxed)
    }

    /// How many RPCs ended, whatever their code.
    pub fn ended_total(&self) -> usize {
        self.ends.iter().map(|n| n.load(Ordering::Relaxed)).sum()
    }
}

impl<const DATA: bool> StatsHandler for Demanding<DATA> {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;
    const UNCOMPRESSED_SIZES: bool = true;
    const MESSAGE_DATA: bool = DATA;

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::End(end) = event {
            self.ends[end.code as usize].fetch_add(1, Ordering::Relaxed);
        }
    }
}
