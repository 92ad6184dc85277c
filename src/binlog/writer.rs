//! The binary log's writer: RPCs hand entries to a bounded queue without
//! ever waiting, and a thread of its own (`grpc-binlog`) writes them to the
//! [`Sink`], flushing on an interval.

use std::fmt;
use std::io;
use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::proto::GrpcLogEntry;
use super::sink::Sink;
use crate::stats::ShardedCounter;

/// How the binary log's writer queues and flushes entries.
///
/// ```
/// use std::time::Duration;
///
/// use tonic_hotpath::binlog::WriterOptions;
///
/// let options = WriterOptions::default()
///     .queue_capacity(1024)
///     .with_flush_interval(Duration::from_millis(200));
/// assert_eq!(options.capacity, 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WriterOptions {
    /// How many entries wait for the writer thread at most; an entry that
    /// finds the queue full is dropped (and counted). Default 8192; 0 is
    /// taken as 1. The queue's slots are allocated up front, under 200
    /// bytes each (1.5 MiB at the default; the entries' strings and bytes
    /// live on the heap, with the entries).
    pub capacity: usize,
    /// How soon written entries are flushed: the sink is flushed this long
    /// after the first entry written since its last flush (and on
    /// shutdown). Default 1 second.
    pub flush_interval: Duration,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            capacity: 8192,
            flush_interval: Duration::from_secs(1),
        }
    }
}

impl WriterOptions {
    /// Sets [`capacity`](Self::capacity).
    #[must_use]
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// Sets [`flush_interval`](Self::flush_interval).
    #[must_use]
    pub fn with_flush_interval(mut self, flush_interval: Duration) -> Self {
        self.flush_interval = flush_interval;
        self
    }
}

/// What became of the entries handed to a binary log: once it is shut
/// down, every entry is counted exactly once.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LogCounts {
    /// Entries the sink wrote.
    pub written: u64,
    /// Entries dropped without reaching the sink: the queue was full, or
    /// the log was shut down.
    pub dropped: u64,
    /// Entries whose write returned an error (or panicked); the entries
    /// after them were still written.
    pub failed: u64,
}

/// What the queue carries to the writer thread.
enum Queued {
    Entry(GrpcLogEntry),
    /// Flush once the entries queued before this are written.
    Flush,
    /// Write what is queued, flush, stop.
    Shutdown,
}

/// Counts and requests the writer thread shares with the handles.
#[derive(Debug, Default)]
struct Progress {
    written: AtomicU64,
    failed: AtomicU64,
    /// A flush was requested while the queue was full (no room for a
    /// `Queued::Flush`).
    flush_requested: AtomicBool,
}

/// The handle of the writer thread: entries go in with
/// [`try_send`](Self::try_send), which never blocks.
pub(crate) struct EntryWriter {
    queue: SyncSender<Queued>,
    /// Set by shutdown: entries are dropped without touching the queue.
    closed: AtomicBool,
    /// Bumped on the RPC path when the queue is full: sharded, so RPCs on
    /// different cores do not contend for it.
    dropped: ShardedCounter,
    progress: Arc<Progress>,
    thread: Mutex<WriterThread>,
    options: WriterOptions,
}

enum WriterThread {
    Running(JoinHandle<Stopped>),
    /// Holds the queue's receiving end: an entry that raced with shutdown
    /// into the queue is counted as dropped here, never lost uncounted.
    Stopped(Option<Receiver<Queued>>),
}

/// What the writer thread hands back when it stops.
struct Stopped {
    queue: Receiver<Queued>,
    first_error: Option<io::Error>,
}

impl EntryWriter {
    /// Starts the writer thread, `grpc-binlog`, which owns `sink`.
    pub(crate) fn spawn(sink: Box<dyn Sink>, options: WriterOptions) -> io::Result<Self> {
        let (queue, receiver) = mpsc::sync_channel(options.capacity.max(1));
        let progress = Arc::new(Progress::default());
        let worker = Worker {
            sink,
            queue: receiver,
            progress: Arc::clone(&progress),
            flush_interval: options.flush_interval,
            unflushed_since: None,
            first_error: None,
        };
        let handle = thread::Builder::new()
            .name("grpc-binlog".to_owned())
            .spawn(move || worker.run())?;
        Ok(Self {
            queue,
            closed: AtomicBool::new(false),
            dropped: ShardedCounter::new(),
            progress,
            thread: Mutex::new(WriterThread::Running(handle)),
            options,
        })
    }

    /// Queues `entry` for the writer thread; never blocks. When the queue
    /// is full, or the writer is shut down, the entry is dropped and
    /// counted.
    pub(crate) fn try_send(&self, entry: GrpcLogEntry) {
        if self.closed.load(Ordering::Acquire) || self.queue.try_send(Queued::Entry(entry)).is_err()
        {
            self.dropped.add(1);
        }
    }

    /// Asks the writer thread to flush the sink once the entries queued
    /// so far are written; does not wait for it.
    pub(crate) fn flush(&self) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        if let Err(mpsc::TrySendError::Full(_)) = self.queue.try_send(Queued::Flush) {
            // The thread sees the request once it has emptied the queue.
            self.progress.flush_requested.store(true, Ordering::Release);
        }
    }

    /// Stops the writer: the entries already queued are written, the sink
    /// is flushed and the thread joined; entries sent from now on are
    /// dropped and counted. Blocks until then. Returns the first error a
    /// write or flush returned since the writer started (entries that
    /// failed are counted in [`LogCounts::failed`]); a second call returns
    /// `Ok(())`.
    pub(crate) fn shutdown(&self) -> io::Result<()> {
        let mut thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner);
        self.closed.store(true, Ordering::Release);
        let handle = match mem::replace(&mut *thread, WriterThread::Stopped(None)) {
            WriterThread::Running(handle) => handle,
            WriterThread::Stopped(parked) => {
                if let Some(parked) = &parked {
                    self.drop_stragglers(parked);
                }
                *thread = WriterThread::Stopped(parked);
                return Ok(());
            }
        };
        // Behind every queued entry; waits for room while the queue is
        // full. An error means the thread is gone, which `join` reports.
        let _ = self.queue.send(Queued::Shutdown);
        let stopped = handle
            .join()
            .map_err(|_| io::Error::other("the binary log writer thread panicked"))?;
        self.drop_stragglers(&stopped.queue);
        *thread = WriterThread::Stopped(Some(stopped.queue));
        stopped.first_error.map_or(Ok(()), Err)
    }

    /// The entries written, dropped and failed so far.
    pub(crate) fn counts(&self) -> LogCounts {
        let thread = match self.thread.try_lock() {
            Ok(thread) => Some(thread),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            // A shutdown in progress: it counts the stragglers itself.
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(thread) = thread
            && let WriterThread::Stopped(Some(parked)) = &*thread
        {
            self.drop_stragglers(parked);
        }
        LogCounts {
            written: self.progress.written.load(Ordering::Acquire),
            dropped: self.dropped.get(),
            failed: self.progress.failed.load(Ordering::Acquire),
        }
    }

    /// Counts as dropped the entries that passed the `closed` check before
    /// shutdown and reached the queue after the thread's last look.
    fn drop_stragglers(&self, parked: &Receiver<Queued>) {
        for queued in parked.try_iter() {
            if let Queued::Entry(_) = queued {
                self.dropped.add(1);
            }
        }
    }
}

impl Drop for EntryWriter {
    /// As [`shutdown`](Self::shutdown): no queued entry is lost.
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl fmt::Debug for EntryWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryWriter")
            .field("options", &self.options)
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

/// The writer thread's state.
struct Worker {
    sink: Box<dyn Sink>,
    queue: Receiver<Queued>,
    progress: Arc<Progress>,
    flush_interval: Duration,
    /// When the first entry since the last flush was written.
    unflushed_since: Option<Instant>,
    first_error: Option<io::Error>,
}

impl Worker {
    fn run(mut self) -> Stopped {
        let mut flush_when_empty = false;
        loop {
            let queued = match self.queue.try_recv() {
                Ok(queued) => queued,
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {
                    // A request seen before the queue is read empty again
                    // covers the entries queued before it.
                    if self.progress.flush_requested.swap(false, Ordering::Acquire) {
                        flush_when_empty = true;
                        continue;
                    }
                    if mem::take(&mut flush_when_empty) {
                        self.flush();
                    }
                    match self.wait() {
                        Some(queued) => queued,
                        None => break,
                    }
                }
            };
            match queued {
                Queued::Entry(entry) => self.write(&entry),
                Queued::Flush => self.flush(),
                Queued::Shutdown => {
                    // Entries that raced with shutdown into the queue.
                    while let Ok(queued) = self.queue.try_recv() {
                        if let Queued::Entry(entry) = queued {
                            self.write(&entry);
                        }
                    }
                    break;
                }
            }
            if self.flush_due().is_some_and(|due| Instant::now() >= due) {
                self.flush();
            }
        }
        self.flush();
        Stopped {
            queue: self.queue,
            first_error: self.first_error,
        }
    }

    /// The next item, waiting no longer than the next flush; `None` once
    /// every handle is gone.
    fn wait(&mut self) -> Option<Queued> {
        loop {
            let Some(due) = self.flush_due() else {
                return self.queue.recv().ok();
            };
            match self
                .queue
                .recv_timeout(due.saturating_duration_since(Instant::now()))
            {
                Ok(queued) => return Some(queued),
                Err(RecvTimeoutError::Timeout) => self.flush(),
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// When the unflushed entries are to be flushed (`None`: nothing to
    /// flush, or an interval too long to reach).
    fn flush_due(&self) -> Option<Instant> {
        self.unflushed_since?.checked_add(self.flush_interval)
    }

    fn write(&mut self, entry: &GrpcLogEntry) {
        let sink = &mut self.sink;
        match catch_sink_panic(|| sink.write(entry)) {
            Ok(()) => self.progress.written.fetch_add(1, Ordering::Release),
            Err(error) => {
                self.first_error.get_or_insert(error);
                self.progress.failed.fetch_add(1, Ordering::Release)
            }
        };
        self.unflushed_since.get_or_insert_with(Instant::now);
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

#[cfg(test)]
mod tests;
