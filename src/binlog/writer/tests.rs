//! The writer thread: the full queue, shutdown, flushing and failures.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::binlog::{FileSink, Framing, read_log};

fn entry(call_id: u64) -> GrpcLogEntry {
    GrpcLogEntry {
        call_id,
        ..GrpcLogEntry::default()
    }
}

/// Records the call ids it writes (and the writing thread's name); its
/// first write waits for `release` after signalling `entered`, when given.
#[derive(Default)]
struct RecordingSink {
    written: Arc<Mutex<Vec<u64>>>,
    thread_name: Arc<Mutex<Option<String>>>,
    gate: Option<(Sender<()>, Receiver<()>)>,
}

impl Sink for RecordingSink {
    fn write(&mut self, entry: &GrpcLogEntry) -> io::Result<()> {
        if let Some((entered, release)) = self.gate.take() {
            entered.send(()).unwrap();
            release.recv().unwrap();
        }
        *self.thread_name.lock().unwrap() = thread::current().name().map(str::to_owned);
        self.written.lock().unwrap().push(entry.call_id);
        Ok(())
    }
}

/// A directory of its own under the temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "tonic-hotpath-binlog-writer-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `condition` every 5 ms for up to 10 s.
fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        thread::sleep(Duration::from_millis(5));
    }
    condition()
}

fn counts(written: u64, dropped: u64, failed: u64) -> LogCounts {
    LogCounts {
        written,
        dropped,
        failed,
    }
}

#[test]
fn full_queue_drops_and_counts_exactly_without_blocking() {
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let sink = RecordingSink {
        gate: Some((entered_tx, release_rx)),
        ..RecordingSink::default()
    };
    let written = Arc::clone(&sink.written);
    let options = WriterOptions::default().queue_capacity(4);
    let writer = EntryWriter::spawn(Box::new(sink), options).unwrap();

    // Entry 0 is taken off the queue; the sink holds the thread in it.
    writer.try_send(entry(0));
    entered.recv_timeout(Duration::from_secs(10)).unwrap();

    let started = Instant::now();
    for call_id in 1..=100 {
        writer.try_send(entry(call_id));
    }
    writer.flush();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "try_send blocked"
    );
    assert_eq!(writer.counts(), counts(0, 96, 0));

    release.send(()).unwrap();
    writer.shutdown().unwrap();
    assert_eq!(writer.counts(), counts(5, 96, 0));
    assert_eq!(*written.lock().unwrap(), [0, 1, 2, 3, 4]);
}

#[test]
fn shutdown_writes_every_queued_entry() {
    let dir = TempDir::new("shutdown");
    let path = dir.0.join("log.bin");
    let sink = FileSink::create(&path, Framing::Grpc).unwrap();
    let options = WriterOptions::default().queue_capacity(10_000);
    let writer = EntryWriter::spawn(Box::new(sink), options).unwrap();
    for call_id in 0..10_000 {
        writer.try_send(entry(call_id));
    }
    writer.shutdown().unwrap();
    assert_eq!(writer.counts(), counts(10_000, 0, 0));

    let call_ids: Vec<u64> = read_log(&path, Framing::Grpc)
        .unwrap()
        .iter()
        .map(|entry| entry.call_id)
        .collect();
    assert_eq!(call_ids, (0..10_000).collect::<Vec<_>>());

    // Idempotent; later entries are dropped and counted.
    writer.shutdown().unwrap();
    writer.try_send(entry(10_000));
    writer.flush();
    assert_eq!(writer.counts(), counts(10_000, 1, 0));
}

#[test]
fn dropping_the_writer_writes_every_queued_entry() {
    let dir = TempDir::new("drop");
    let path = dir.0.join("log.bin");
    let sink = FileSink::create(&path, Framing::Varint).unwrap();
    let writer = EntryWriter::spawn(Box::new(sink), WriterOptions::default()).unwrap();
    for call_id in 0..1000 {
        writer.try_send(entry(call_id));
    }
    drop(writer);
    assert_eq!(read_log(&path, Framing::Varint).unwrap().len(), 1000);
}

#[test]
fn entries_are_flushed_on_the_interval() {
    let dir = TempDir::new("interval");
    let path = dir.0.join("log.bin");
    let sink = FileSink::create(&path, Framing::Grpc).unwrap();
    let options = WriterOptions::default().with_flush_interval(Duration::from_millis(20));
    let writer = EntryWriter::spawn(Box::new(sink), options).unwrap();
    for call_id in 0..3 {
        writer.try_send(entry(call_id));
    }
    assert!(eventually(
        || read_log(&path, Framing::Grpc).unwrap().len() == 3
    ));

    // And again after an idle spell.
    writer.try_send(entry(3));
    assert!(eventually(
        || read_log(&path, Framing::Grpc).unwrap().len() == 4
    ));
    writer.shutdown().unwrap();
}

#[test]
fn flush_requests_are_served_without_waiting_for_the_interval() {
    let dir = TempDir::new("flush");
    let path = dir.0.join("log.bin");
    let sink = FileSink::create(&path, Framing::Grpc).unwrap();
    let options = WriterOptions::default().with_flush_interval(Duration::from_secs(3600));
    let writer = EntryWriter::spawn(Box::new(sink), options).unwrap();
    for call_id in 0..3 {
        writer.try_send(entry(call_id));
    }
    writer.flush();
    assert!(eventually(
        || read_log(&path, Framing::Grpc).unwrap().len() == 3
    ));
    writer.shutdown().unwrap();
}

#[test]
fn a_flush_requested_on_a_full_queue_is_served_once_it_empties() {
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let flushes = Arc::new(AtomicU64::new(0));

    /// Holds its first write until released; counts flushes.
    struct GatedSink {
        gate: Option<(Sender<()>, Receiver<()>)>,
        flushes: Arc<AtomicU64>,
    }
    impl Sink for GatedSink {
        fn write(&mut self, _: &GrpcLogEntry) -> io::Result<()> {
            if let Some((entered, release)) = self.gate.take() {
                entered.send(()).unwrap();
                release.recv().unwrap();
            }
            Ok(())
        }
        fn flush(&mut self) -> io::Result<()> {
            self.flushes.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    let sink = GatedSink {
        gate: Some((entered_tx, release_rx)),
        flushes: Arc::clone(&flushes),
    };
    let options = WriterOptions::default()
        .queue_capacity(2)
        .with_flush_interval(Duration::from_secs(3600));
    let writer = EntryWriter::spawn(Box::new(sink), options).unwrap();
    writer.try_send(entry(0));
    entered.recv_timeout(Duration::from_secs(10)).unwrap();
    writer.try_send(entry(1));
    writer.try_send(entry(2));
    writer.flush(); // No room for the request in the queue.
    release.send(()).unwrap();
    assert!(eventually(|| flushes.load(Ordering::SeqCst) == 1));
    assert_eq!(writer.counts(), counts(3, 0, 0));
    writer.shutdown().unwrap();
}

#[test]
fn write_errors_are_counted_and_the_writer_goes_on() {
    /// Fails every other write.
    struct FlakySink(u64);
    impl Sink for FlakySink {
        fn write(&mut self, _: &GrpcLogEntry) -> io::Result<()> {
            self.0 += 1;
            if self.0.is_multiple_of(2) {
                Err(io::Error::other(format!("write {} failed", self.0)))
            } else {
                Ok(())
            }
        }
    }

    let options = WriterOptions::default().queue_capacity(100);
    let writer = EntryWriter::spawn(Box::new(FlakySink(0)), options).unwrap();
    for call_id in 0..10 {
        writer.try_send(entry(call_id));
    }
    let error = writer.shutdown().unwrap_err();
    assert_eq!(error.to_string(), "write 2 failed");
    assert_eq!(writer.counts(), counts(5, 0, 5));
    // The error was reported once.
    writer.shutdown().unwrap();
}

#[test]
fn a_panicking_sink_fails_its_entries_only() {
    /// Panics on odd call ids.
    struct PanickySink(Arc<Mutex<Vec<u64>>>);
    impl Sink for PanickySink {
        fn write(&mut self, entry: &GrpcLogEntry) -> io::Result<()> {
            assert!(entry.call_id.is_multiple_of(2), "odd call id");
            self.0.lock().unwrap().push(entry.call_id);
            Ok(())
        }
    }

    let written = Arc::new(Mutex::new(Vec::new()));
    let sink = PanickySink(Arc::clone(&written));
    let options = WriterOptions::default().queue_capacity(100);
    let writer = EntryWriter::spawn(Box::new(sink), options).unwrap();
    for call_id in 0..6 {
        writer.try_send(entry(call_id));
    }
    assert!(writer.shutdown().is_err());
    assert_eq!(writer.counts(), counts(3, 0, 3));
    assert_eq!(*written.lock().unwrap(), [0, 2, 4]);
}

#[test]
fn the_sink_runs_on_the_grpc_binlog_thread() {
    let sink = RecordingSink::default();
    let thread_name = Arc::clone(&sink.thread_name);
    let writer = EntryWriter::spawn(Box::new(sink), WriterOptions::default()).unwrap();
    writer.try_send(entry(1));
    writer.shutdown().unwrap();
    assert_eq!(thread_name.lock().unwrap().as_deref(), Some("grpc-binlog"));
}

#[test]
fn concurrent_senders_and_shutdown_account_for_every_entry() {
    let writer = Arc::new(
        EntryWriter::spawn(
            Box::new(RecordingSink::default()),
            WriterOptions::default().queue_capacity(64),
        )
        .unwrap(),
    );
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let writer = Arc::clone(&writer);
            thread::spawn(move || (0..5000).for_each(|call_id| writer.try_send(entry(call_id))))
        })
        .collect();
    thread::sleep(Duration::from_millis(1));
    writer.shutdown().unwrap();
    for sender in senders {
        sender.join().unwrap();
    }
    let counts = writer.counts();
    assert_eq!(counts.written + counts.dropped, 20_000, "{counts:?}");
    assert_eq!(counts.failed, 0);
}
