//! The binary log's writer: RPCs encode their entries into their own
//! thread's buffer without ever waiting ([`buffers`]), and a thread of the
//! log's own (`grpc-binlog`, [`worker`]) writes the buffers to the
//! [`Sink`], flushing on an interval.

use std::fmt;
use std::io;
use std::mem;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::sink::{Framing, Sink};
use buffers::Buffers;
pub(crate) use buffers::CallMark;
use worker::{Progress, Worker};

mod buffers;
mod worker;

/// How the binary log's writer queues and flushes entries.
///
/// ```
/// use std::time::Duration;
///
/// use tonic_hotpath::binlog::WriterOptions;
///
/// let options = WriterOptions::default()
///     .max_queued_bytes(1 << 20)
///     .with_flush_interval(Duration::from_millis(200));
/// assert_eq!(options.max_queued_bytes, 1 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WriterOptions {
    /// How many bytes of encoded entries wait for the writer thread at
    /// most, in the buffers handed to it. Default 8 MiB.
    ///
    /// Each thread that logs encodes its entries into a buffer of its own
    /// and hands it on at 64 KiB (or half its share, below); while the
    /// writer has no room, the thread's buffer grows to 128 KiB (or this
    /// budget, if smaller), and past that an entry is dropped (and
    /// counted). So the memory the log holds is at most this budget plus
    /// 128 KiB per thread, and one entry more per thread (a queue with
    /// nothing in it takes a buffer of any size).
    pub max_queued_bytes: usize,
    /// How soon written entries are flushed: the sink is flushed this long
    /// after the first entry written since its last flush (and on
    /// shutdown). Default 1 second.
    pub flush_interval: Duration,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            max_queued_bytes: 8 << 20,
            flush_interval: Duration::from_secs(1),
        }
    }
}

impl WriterOptions {
    /// Sets [`max_queued_bytes`](Self::max_queued_bytes).
    #[must_use]
    pub fn max_queued_bytes(mut self, bytes: usize) -> Self {
        self.max_queued_bytes = bytes;
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
    /// Entries dropped without reaching the sink: their thread's buffer
    /// was full (see [`WriterOptions::max_queued_bytes`]), or the log was
    /// shut down.
    pub dropped: u64,
    /// Entries whose write returned an error (or panicked), every entry
    /// of a batch whose [`Sink::write_framed`] did, and entries too long
    /// for the sink's framing; the entries after them were still written.
    pub failed: u64,
}

/// The handle of the writer thread: entries go in with
/// [`append`](Self::append), which never blocks.
pub(crate) struct EntryWriter {
    buffers: Arc<Buffers>,
    progress: Arc<Progress>,
    thread: Mutex<WriterThread>,
    options: WriterOptions,
}

enum WriterThread {
    Running(JoinHandle<Option<io::Error>>),
    Stopped,
}

impl EntryWriter {
    /// Starts the writer thread, `grpc-binlog`, which owns `sink`.
    pub(crate) fn spawn(sink: Box<dyn Sink>, options: WriterOptions) -> io::Result<Self> {
        let framed = sink.framing();
        let buffers = Arc::new(Buffers::new(
            framed.unwrap_or(Framing::Varint),
            options.max_queued_bytes,
        ));
        let progress = Arc::new(Progress::default());
        let worker = Worker {
            sink,
            framed: framed.is_some(),
            buffers: Arc::clone(&buffers),
            progress: Arc::clone(&progress),
            flush_interval: options.flush_interval,
            unflushed_since: None,
            first_error: None,
        };
        let handle = thread::Builder::new()
            .name("grpc-binlog".to_owned())
            .spawn(move || worker.run())?;
        Ok(Self {
            buffers,
            progress,
            thread: Mutex::new(WriterThread::Running(handle)),
            options,
        })
    }

    /// The framing the entries are encoded in: the sink's, or varint for
    /// a sink that takes entries one by one.
    pub(crate) fn framing(&self) -> Framing {
        self.buffers.framing()
    }

    /// Appends one framed entry, written by `encode`, to this thread's
    /// buffer; never blocks. `mark` is the call's: its entries stay in
    /// order. When the buffer is full, or the writer is shut down, the
    /// entry is dropped and counted; an entry `encode` cannot frame is
    /// counted as failed.
    pub(crate) fn append(
        &self,
        mark: &mut CallMark,
        encode: impl FnOnce(&mut Vec<u8>) -> io::Result<()>,
    ) {
        self.buffers.append(mark, encode);
    }

    /// Asks the writer thread to flush the sink once the entries logged
    /// so far are written; does not wait for it.
    pub(crate) fn flush(&self) {
        self.progress.flush_requested.store(true, Ordering::Release);
        self.buffers.wake_writer();
    }

    /// Stops the writer: the entries already logged are written, the sink
    /// is flushed and the thread joined; entries logged from now on are
    /// dropped and counted. Blocks until then. Returns the first error a
    /// write or flush returned since the writer started (entries that
    /// failed are counted in [`LogCounts::failed`]); a second call returns
    /// `Ok(())`.
    pub(crate) fn shutdown(&self) -> io::Result<()> {
        let mut thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner);
        self.buffers.closed.store(true, Ordering::Release);
        let WriterThread::Running(handle) = mem::replace(&mut *thread, WriterThread::Stopped)
        else {
            self.buffers.drop_all();
            return Ok(());
        };
        self.progress.stop.store(true, Ordering::Release);
        self.buffers.wake_writer();
        let first_error = handle
            .join()
            .map_err(|_| io::Error::other("the binary log writer thread panicked"))?;
        // Entries that passed the `closed` check before it was set and
        // reached a buffer after the thread's last sweep.
        self.buffers.drop_all();
        first_error.map_or(Ok(()), Err)
    }

    /// The entries written, dropped and failed so far.
    pub(crate) fn counts(&self) -> LogCounts {
        if let Ok(thread) = self.thread.try_lock()
            && let WriterThread::Stopped = &*thread
        {
            self.buffers.drop_all();
        }
        LogCounts {
            written: self.progress.written.load(Ordering::Acquire),
            dropped: self.buffers.dropped.get(),
            failed: self.progress.failed.load(Ordering::Acquire) + self.buffers.unframed.get(),
        }
    }
}

impl Drop for EntryWriter {
    /// As [`shutdown`](Self::shutdown): no entry logged is lost.
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl fmt::Debug for EntryWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryWriter")
            .field("options", &self.options)
            .field("closed", &self.buffers.closed.load(Ordering::Relaxed))
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
