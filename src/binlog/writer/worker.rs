//! The writer thread (`grpc-binlog`): takes the threads' buffers in the
//! order they were handed on, writes each to the [`Sink`] (whole, or
//! entry by entry for a sink that wants entries), flushes on an interval.

use std::io::{self, Cursor};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::buffers::{Batch, Buffers};
use crate::binlog::reader::LogReader;
use crate::binlog::sink::Sink;

/// While entries come, the writer sweeps the threads' buffers this often.
const SWEEP_INTERVAL: Duration = Duration::from_millis(1);

/// Counts and requests the writer thread shares with the handles.
#[derive(Debug, Default)]
pub(super) struct Progress {
    pub(super) written: AtomicU64,
    pub(super) failed: AtomicU64,
    /// Flush once what was logged so far is written.
    pub(super) flush_requested: AtomicBool,
    /// Write everything, flush, stop.
    pub(super) stop: AtomicBool,
}

/// The writer thread's state.
pub(super) struct Worker {
    pub(super) sink: Box<dyn Sink>,
    /// Whether the sink takes whole framed buffers.
    pub(super) framed: bool,
    pub(super) buffers: Arc<Buffers>,
    pub(super) progress: Arc<Progress>,
    pub(super) flush_interval: Duration,
    /// When the first entry since the last flush was written.
    pub(super) unflushed_since: Option<Instant>,
    pub(super) first_error: Option<io::Error>,
}

impl Worker {
    /// Runs until asked to stop; returns the first error of a write or
    /// flush.
    pub(super) fn run(mut self) -> Option<io::Error> {
        self.buffers.set_writer(thread::current());
        loop {
            let stop = self.progress.stop.load(Ordering::Acquire);
            let flush = self.progress.flush_requested.swap(false, Ordering::AcqRel);
            let handed = self.buffers.sweep(stop || flush);
            let wrote = self.write_queued();
            if stop {
                break;
            }
            if flush || self.flush_due().is_some_and(|due| Instant::now() >= due) {
                self.flush();
            }
            if handed || wrote {
                self.wait(Some(SWEEP_INTERVAL));
                continue;
            }
            if self.buffers.going_idle() {
                continue;
            }
            let until_flush = self
                .flush_due()
                .map(|due| due.saturating_duration_since(Instant::now()));
            self.wait(until_flush);
        }
        self.flush();
        self.first_error
    }

    /// Waits for a wake-up (an entry, a full buffer, a request) or for
    /// `timeout`, whichever comes first.
    fn wait(&self, timeout: Option<Duration>) {
        let requested = self.progress.stop.load(Ordering::Acquire)
            || self.progress.flush_requested.load(Ordering::Acquire);
        match (requested, timeout) {
            (true, _) => {}
            (false, Some(timeout)) => thread::park_timeout(timeout),
            (false, None) => thread::park(),
        }
    }

    /// Writes every queued buffer, oldest first; whether there was any.
    fn write_queued(&mut self) -> bool {
        let mut wrote = false;
        while let Some(batch) = self.buffers.pop() {
            let len = batch.bytes.len();
            self.write(batch);
            self.buffers.written(len);
            wrote = true;
        }
        wrote
    }

    fn write(&mut self, batch: Batch) {
        if self.framed {
            let sink = &mut self.sink;
            let counter = match catch_sink_panic(|| sink.write_framed(&batch.bytes)) {
                Ok(()) => &self.progress.written,
                Err(error) => {
                    self.first_error.get_or_insert(error);
                    &self.progress.failed
                }
            };
            counter.fetch_add(batch.entries, Ordering::Release);
        } else {
            self.write_each(&batch);
        }
        self.unflushed_since.get_or_insert_with(Instant::now);
    }

    /// Decodes each entry of `batch` for a sink that takes entries.
    fn write_each(&mut self, batch: &Batch) {
        let framing = self.buffers.framing();
        let entries = LogReader::new(Cursor::new(batch.bytes.as_slice()), framing)
            .with_max_entry_len(usize::MAX);
        let mut seen = 0;
        for entry in entries {
            seen += 1;
            let sink = &mut self.sink;
            let counter = match entry.and_then(|entry| catch_sink_panic(|| sink.write(&entry))) {
                Ok(()) => &self.progress.written,
                Err(error) => {
                    self.first_error.get_or_insert(error);
                    &self.progress.failed
                }
            };
            counter.fetch_add(1, Ordering::Release);
        }
        // Only a bug could leave entries unread: they are counted.
        let unread = batch.entries.saturating_sub(seen);
        self.progress.failed.fetch_add(unread, Ordering::Release);
    }

    /// When the unflushed entries are to be flushed (`None`: nothing to
    /// flush, or an interval too long to reach).
    fn flush_due(&self) -> Option<Instant> {
        self.unflushed_since?.checked_add(self.flush_interval)
    }

    /// Flushes the sink if anything was written since the last flush.
    fn flush(&mut self) {
        if self.unflushed_since.take().is_none() {
            return;
        }
        let sink = &mut self.sink;
        if let Err(error) = catch_sink_panic(|| sink.flush()) {
            self.first_error.get_or_insert(error);
        }
    }
}

/// Runs a sink call; a panic in the sink becomes an error, and the writer
/// carries on with the next entry.
fn catch_sink_panic(call: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    panic::catch_unwind(AssertUnwindSafe(call))
        .unwrap_or_else(|_| Err(io::Error::other("the binary log sink panicked")))
}
