//! The writer: full buffers, shutdown, flushing, failures, and the order
//! of a call's entries across threads.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::binlog::proto::GrpcLogEntry;
use crate::binlog::{FileSink, Framing, read_log};

impl EntryWriter {
    /// Logs `entry` as the next entry of the call at `mark`.
    fn send_in(&self, mark: &mut CallMark, entry: &GrpcLogEntry) {
        let framing = self.framing();
        self.append(mark, |buf| framing.encode_into(entry, buf).map(drop));
    }

    /// Logs `entry` as a call's only entry.
    fn try_send(&self, entry: GrpcLogEntry) {
        self.send_in(&mut CallMark::default(), &entry);
    }
}

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

/// With the sink stuck on its first entry, a thread's buffer fills up to
/// the budget and the entries after it are dropped and counted, without
/// blocking; the entries kept are written in order once the sink moves.
#[test]
fn full_buffers_drop_and_count_exactly_without_blocking() {
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let sink = RecordingSink {
        gate: Some((entered_tx, release_rx)),
        ..RecordingSink::default()
    };
    let written = Arc::clone(&sink.written);
    let options = WriterOptions::default().max_queued_bytes(256);
    let writer = EntryWriter::spawn(Box::new(sink), options).unwrap();

    // Entry 0 is taken; the sink holds the thread in it.
    writer.try_send(entry(0));
    entered.recv_timeout(Duration::from_secs(10)).unwrap();

    let started = Instant::now();
    for call_id in 1..=1000 {
        writer.try_send(entry(call_id));
    }
    writer.flush();
    assert!(started.elapsed() < Duration::from_secs(5), "append blocked");
    let blocked = writer.counts();
    assert_eq!(blocked.written, 0);
    assert!(blocked.dropped > 0, "{blocked:?}");
    // Each entry is 3 or 4 bytes framed: at most 256 bytes queued and 256
    // in this thread's buffer (and the entry that crossed it).
    let kept = 1000 - blocked.dropped;
    assert!((100..=256).contains(&kept), "{blocked:?}");

    release.send(()).unwrap();
    writer.shutdown().unwrap();
    assert_eq!(writer.counts(), counts(kept + 1, 1000 - kept, 0));
    let written = written.lock().unwrap().clone();
    assert_eq!(
        written,
        (0..=kept).collect::<Vec<_>>(),
        "the first ones, in order"
    );
}

#[test]
fn shutdown_writes_every_queued_entry() {
    let dir = TempDir::new("shutdown");
    let path = dir.0.join("log.bin");
    let sink = FileSink::create(&path, Framing::Grpc).unwrap();
    let writer = EntryWriter::spawn(Box::new(sink), WriterOptions::default()).unwrap();
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
fn a_flush_requested_while_the_sink_blocks_is_served_once_it_returns() {
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
    let options = WriterOptions::default().with_flush_interval(Duration::from_secs(3600));
    let writer = EntryWriter::spawn(Box::new(sink), options).unwrap();
    writer.try_send(entry(0));
    entered.recv_timeout(Duration::from_secs(10)).unwrap();
    writer.try_send(entry(1));
    writer.try_send(entry(2));
    writer.flush(); // While the sink blocks.
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

    let writer = EntryWriter::spawn(Box::new(FlakySink(0)), WriterOptions::default()).unwrap();
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
    let writer = EntryWriter::spawn(Box::new(sink), WriterOptions::default()).unwrap();
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
            WriterOptions::default().max_queued_bytes(64),
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

/// A framed sink that fails every other buffer: each failed buffer's
/// entries are counted as failed, the others' as written.
#[test]
fn a_failed_buffer_fails_each_of_its_entries() {
    struct FlakyFramed {
        calls: u64,
        entries: Arc<Mutex<(u64, u64)>>,
    }
    impl Sink for FlakyFramed {
        fn write(&mut self, _: &GrpcLogEntry) -> io::Result<()> {
            unreachable!("a framed sink is given buffers")
        }
        fn framing(&self) -> Option<Framing> {
            Some(Framing::Grpc)
        }
        fn write_framed(&mut self, entries: &[u8]) -> io::Result<()> {
            let count = read_log_bytes(entries).len() as u64;
            self.calls += 1;
            let mut tally = self.entries.lock().unwrap();
            if self.calls.is_multiple_of(2) {
                tally.1 += count;
                return Err(io::Error::other("buffer failed"));
            }
            tally.0 += count;
            Ok(())
        }
    }

    let tally = Arc::new(Mutex::new((0, 0)));
    let sink = FlakyFramed {
        calls: 0,
        entries: Arc::clone(&tally),
    };
    let writer = EntryWriter::spawn(Box::new(sink), WriterOptions::default()).unwrap();
    for round in 0..20 {
        for call_id in 0..10 {
            writer.try_send(entry(round * 10 + call_id));
        }
        writer.flush();
        thread::sleep(Duration::from_millis(2));
    }
    let error = writer.shutdown().unwrap_err();
    assert_eq!(error.to_string(), "buffer failed");
    let (written, failed) = *tally.lock().unwrap();
    assert!(failed > 0, "some buffers failed");
    assert_eq!(writer.counts(), counts(written, 0, failed));
    assert_eq!(written + failed, 200);
}

fn read_log_bytes(bytes: &[u8]) -> Vec<GrpcLogEntry> {
    crate::binlog::LogReader::new(io::Cursor::new(bytes), Framing::Grpc)
        .collect::<io::Result<_>>()
        .unwrap()
}

/// One call's entries, logged from thread after thread (as a call's task
/// moves between a runtime's workers), reach the sink in order, for 8
/// calls at once over 4 threads: the buffer holding a call's earlier
/// entries is handed on before the call's next entry goes elsewhere.
#[test]
fn a_calls_entries_stay_in_order_across_threads() {
    const THREADS: usize = 4;
    const CALLS: u64 = 8;
    const STEPS: u64 = 2000;
    for framed in [true, false] {
        let dir = TempDir::new(&format!("order-{framed}"));
        let path = dir.0.join("log.bin");
        let sink: Box<dyn Sink> = match framed {
            true => Box::new(FileSink::create(&path, Framing::Grpc).unwrap()),
            false => Box::new(RecordingSink::default()),
        };
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink: Box<dyn Sink> = match framed {
            true => sink,
            false => Box::new(SequenceSink(Arc::clone(&written))),
        };
        let writer = Arc::new(EntryWriter::spawn(sink, WriterOptions::default()).unwrap());

        // A call is a token: (call id, next sequence, its mark), passed
        // from thread to thread after each entry.
        type Token = (u64, u64, CallMark);
        let (senders, receivers): (Vec<Sender<Token>>, Vec<Receiver<Token>>) =
            (0..THREADS).map(|_| mpsc::channel()).unzip();
        let (done_tx, done) = mpsc::channel();
        let threads: Vec<_> = receivers
            .into_iter()
            .enumerate()
            .map(|(index, receiver)| {
                let senders = senders.clone();
                let writer = Arc::clone(&writer);
                let done = done_tx.clone();
                thread::spawn(move || {
                    // A call id of u64::MAX stops the thread (each holds
                    // senders to the others: the channels stay open).
                    while let Ok((call_id, sequence, mut mark)) = receiver.recv() {
                        if call_id == u64::MAX {
                            break;
                        }
                        let entry = GrpcLogEntry {
                            call_id,
                            sequence_id_within_call: sequence,
                            ..GrpcLogEntry::default()
                        };
                        writer.send_in(&mut mark, &entry);
                        if sequence == STEPS {
                            done.send(()).unwrap();
                            continue;
                        }
                        let next = (index + 1 + call_id as usize) % THREADS;
                        let _ = senders[next].send((call_id, sequence + 1, mark));
                    }
                })
            })
            .collect();
        for call_id in 0..CALLS {
            senders[call_id as usize % THREADS]
                .send((call_id, 1, CallMark::default()))
                .unwrap();
        }
        for _ in 0..CALLS {
            done.recv_timeout(Duration::from_secs(60)).unwrap();
        }
        for sender in &senders {
            sender.send((u64::MAX, 0, CallMark::default())).unwrap();
        }
        for thread in threads {
            thread.join().unwrap();
        }
        writer.shutdown().unwrap();
        assert_eq!(writer.counts(), counts(CALLS * STEPS, 0, 0));

        let entries: Vec<(u64, u64)> = match framed {
            true => read_log(&path, Framing::Grpc)
                .unwrap()
                .iter()
                .map(|entry| (entry.call_id, entry.sequence_id_within_call))
                .collect(),
            false => written.lock().unwrap().clone(),
        };
        for call_id in 0..CALLS {
            let sequences: Vec<u64> = entries
                .iter()
                .filter(|(id, _)| *id == call_id)
                .map(|&(_, sequence)| sequence)
                .collect();
            assert!(
                sequences == (1..=STEPS).collect::<Vec<_>>(),
                "framed {framed}, call {call_id}: {} entries, first out of order at {:?}",
                sequences.len(),
                sequences.windows(2).position(|pair| pair[1] != pair[0] + 1)
            );
        }
    }
}

/// Records (call id, sequence) of each entry.
struct SequenceSink(Arc<Mutex<Vec<(u64, u64)>>>);

impl Sink for SequenceSink {
    fn write(&mut self, entry: &GrpcLogEntry) -> io::Result<()> {
        let pair = (entry.call_id, entry.sequence_id_within_call);
        self.0.lock().unwrap().push(pair);
        Ok(())
    }
}

/// A thread that logs and exits leaves its buffer to the writer, which
/// writes it without a flush or a shutdown.
#[test]
fn a_thread_that_exits_hands_its_entries_over() {
    let sink = RecordingSink::default();
    let written = Arc::clone(&sink.written);
    let writer = Arc::new(EntryWriter::spawn(Box::new(sink), WriterOptions::default()).unwrap());
    let logging = Arc::clone(&writer);
    thread::spawn(move || {
        for call_id in 0..100 {
            logging.try_send(entry(call_id));
        }
    })
    .join()
    .unwrap();
    assert!(eventually(|| written.lock().unwrap().len() == 100));
    assert_eq!(*written.lock().unwrap(), (0..100).collect::<Vec<_>>());
    assert_eq!(writer.counts(), counts(100, 0, 0));
    writer.shutdown().unwrap();
}
