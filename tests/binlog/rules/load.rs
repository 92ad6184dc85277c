//! Many real calls: a full queue (entries dropped, RPCs not held up),
//! nothing lost on a clean stop, rotation under load.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use tokio::sync::oneshot;
use tokio::task::JoinSet;

use super::{Logged, Rig, builder, echo, kinds};
use crate::entries::TempDir;
use tonic_hotpath::binlog::proto::GrpcLogEntry;
use tonic_hotpath::binlog::proto::grpc_log_entry::{EventType, Logger, Payload};
use tonic_hotpath::binlog::{FileSink, Framing, Rotation, Sink, read_log};

const UNARY_KINDS: [&str; 5] = [
    "CLIENT_HEADER",
    "CLIENT_MESSAGE",
    "SERVER_HEADER",
    "SERVER_MESSAGE",
    "SERVER_TRAILER",
];

/// A sink whose first write blocks until the test releases it, after
/// saying it has begun; it counts the writes that returned.
struct BlockingSink {
    entered: Option<oneshot::Sender<()>>,
    release: mpsc::Receiver<()>,
    written: Arc<AtomicU64>,
}

impl Sink for BlockingSink {
    fn write(&mut self, _: &GrpcLogEntry) -> std::io::Result<()> {
        if let Some(entered) = self.entered.take() {
            let _ = entered.send(());
            self.release.recv().expect("the test releases the sink");
        }
        self.written.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

// ---------------------------------------------------------------------
// 6. Full buffers.

/// With room for 256 bytes of entries and the sink stuck on its first, 20 unary
/// calls all complete; their 200 entries are each written or dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_buffers_drop_entries_and_never_hold_up_a_call() {
    let (entered_tx, entered) = oneshot::channel();
    let (release, release_rx) = mpsc::channel();
    let written = Arc::new(AtomicU64::new(0));
    let sink = BlockingSink {
        entered: Some(entered_tx),
        release: release_rx,
        written: Arc::clone(&written),
    };
    let log = builder("*", sink).max_queued_bytes(256).build().unwrap();
    let rig = Rig::start(&log).await;
    let mut client = rig.client();
    client.unary_echo(echo("call 0")).await.unwrap();
    entered.await.expect("the writer took the first entry");
    for n in 1..20 {
        client.unary_echo(echo(&format!("call {n}"))).await.unwrap();
    }
    rig.ended(20).await;
    // Every call is over, and the sink has not returned once.
    assert_eq!(written.load(Ordering::SeqCst), 0);
    let blocked = log.counts();
    assert_eq!(blocked.written, 0);
    assert!(blocked.dropped > 0, "{blocked:?}");

    release.send(()).unwrap();
    drop(client);
    rig.finish().await;
    let counts = log.counts();
    assert_eq!(counts.written + counts.dropped, 20 * (5 + 5), "{counts:?}");
    assert!(counts.dropped > 0, "{counts:?}");
    assert_eq!(counts.failed, 0);
    assert_eq!(counts.written, written.load(Ordering::SeqCst));
}

// ---------------------------------------------------------------------
// 7. A clean stop.

/// A sink that holds its first write until the gate opens (the writer
/// leaves every other entry queued meanwhile), then writes to `inner`.
struct GatedSink<S> {
    gate: Option<mpsc::Receiver<()>>,
    inner: S,
}

impl<S: Sink> Sink for GatedSink<S> {
    fn write(&mut self, entry: &GrpcLogEntry) -> std::io::Result<()> {
        if let Some(gate) = self.gate.take() {
            gate.recv().expect("the test opens the gate");
        }
        self.inner.write(entry)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// 200 calls, 20 at a time, into a file whose writer is held back until
/// the server and client have stopped: the log's shutdown writes every
/// queued entry, and the file holds every entry of every call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_loses_nothing() {
    const CALLS: u64 = 200;
    let dir = TempDir::new("rules-clean-stop");
    let path = dir.path().join("log.bin");
    let (open, gate) = mpsc::channel();
    let sink = GatedSink {
        gate: Some(gate),
        inner: FileSink::create(&path, Framing::Grpc).unwrap(),
    };
    let log = builder("*", sink).build().unwrap();
    let rig = Rig::start(&log).await;
    for batch in 0..CALLS / 20 {
        let mut calls = JoinSet::new();
        for n in batch * 20..(batch + 1) * 20 {
            let mut client = rig.client();
            calls.spawn(async move { client.unary_echo(echo(&format!("call {n}"))).await });
        }
        while let Some(reply) = calls.join_next().await {
            reply.unwrap().unwrap();
        }
    }
    rig.ended(CALLS).await;
    rig.stop().await;
    assert_eq!(log.counts().written, 0, "the writer is held back");
    open.send(()).unwrap();
    log.shutdown().unwrap();

    let entries = read_log(&path, Framing::Grpc).unwrap();
    assert_eq!(entries.len() as u64, CALLS * (5 + 5));
    let counts = log.counts();
    assert_eq!(
        (counts.written, counts.dropped, counts.failed),
        (CALLS * 10, 0, 0)
    );
    let requests = |logger: Logger| -> HashSet<String> {
        entries
            .iter()
            .filter(|e| e.logger == logger as i32)
            .filter_map(request_text)
            .collect()
    };
    let all: HashSet<String> = (0..CALLS).map(|n| format!("call {n}")).collect();
    assert_eq!(requests(Logger::Client), all);
    assert_eq!(requests(Logger::Server), all);
    // Each side's entries grouped by call id: one group per call (ids
    // unique), sequence ids 1..=5 in the order written.
    let (client, server) = Logged(entries).sides();
    for (side, calls) in [("client", client), ("server", server)] {
        assert_eq!(calls.len() as u64, CALLS, "{side}: distinct call ids");
        for call in calls {
            assert_eq!(kinds(&call), UNARY_KINDS, "{side}");
        }
    }
}

/// 16 runtime threads serving and calling, 16 clients with 50 unary
/// calls each, all at once, into a file: every entry of every call is
/// there exactly once, each call's entries in order (sequence ids 1 to 5,
/// in the order written), whichever threads logged them.
#[tokio::test(flavor = "multi_thread", worker_threads = 16)]
async fn sixteen_threads_log_every_entry_once_and_in_order() {
    const CLIENTS: u64 = 16;
    const CALLS: u64 = 50;
    let dir = TempDir::new("rules-sixteen-threads");
    let path = dir.path().join("log.bin");
    let sink = FileSink::create(&path, Framing::Grpc).unwrap();
    let log = builder("*", sink).build().unwrap();
    let rig = Rig::start(&log).await;
    let mut clients = JoinSet::new();
    for client in 0..CLIENTS {
        let mut echo_client = rig.client();
        clients.spawn(async move {
            for n in 0..CALLS {
                let text = format!("call {client}/{n}");
                let reply = echo_client.unary_echo(echo(&text)).await.unwrap();
                assert_eq!(reply.into_inner().message, text);
            }
        });
    }
    while let Some(done) = clients.join_next().await {
        done.unwrap();
    }
    rig.ended(CLIENTS * CALLS).await;
    rig.finish().await;

    let entries = read_log(&path, Framing::Grpc).unwrap();
    let counts = log.counts();
    assert_eq!(
        (counts.written, counts.dropped, counts.failed),
        (CLIENTS * CALLS * 10, 0, 0)
    );
    assert_eq!(entries.len() as u64, CLIENTS * CALLS * 10);
    // `sides` checks each call's sequence ids, in the order written.
    let (client, server) = Logged(entries.clone()).sides();
    for (side, calls) in [("client", client), ("server", server)] {
        assert_eq!(
            calls.len() as u64,
            CLIENTS * CALLS,
            "{side}: distinct call ids"
        );
        for call in calls {
            assert_eq!(kinds(&call), UNARY_KINDS, "{side}");
        }
    }
    let all: HashSet<String> = (0..CLIENTS)
        .flat_map(|client| (0..CALLS).map(move |n| format!("call {client}/{n}")))
        .collect();
    let requests: Vec<String> = entries.iter().filter_map(request_text).collect();
    assert_eq!(
        requests.len() as u64,
        2 * CLIENTS * CALLS,
        "one per side per call"
    );
    assert_eq!(requests.into_iter().collect::<HashSet<_>>(), all);
}

/// The request text of a client message entry.
fn request_text(entry: &GrpcLogEntry) -> Option<String> {
    use prost::Message as _;
    if entry.r#type != EventType::ClientMessage as i32 {
        return None;
    }
    let Some(Payload::Message(message)) = &entry.payload else {
        return None;
    };
    let request = support::EchoRequest::decode(message.data.clone()).unwrap();
    Some(request.message)
}

// ---------------------------------------------------------------------
// 8. Rotation under load.

/// 100 calls into files of 4 KiB, 3 kept: three files, each readable and
/// within its size, holding the newest calls whole, oldest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_under_load_keeps_the_newest_calls() {
    const CALLS: u64 = 100;
    let rotation = Rotation {
        max_file_bytes: 4096,
        max_files: 3,
    };
    let dir = TempDir::new("rules-rotation");
    let path = dir.path().join("log.bin");
    let sink = FileSink::create(&path, Framing::Grpc)
        .unwrap()
        .with_rotation(rotation);
    let log = builder("*", sink).build().unwrap();
    let rig = Rig::start(&log).await;
    let mut client = rig.client();
    for n in 0..CALLS {
        client
            .unary_echo(echo(&format!("call {n:03}")))
            .await
            .unwrap();
        // One call after the other, each written before the next begins:
        // each call's entries before the next's in the files. (Entries of
        // calls logged on different threads within one of the writer's
        // sweeps may be written in either order: only a call's own
        // entries are ordered.)
        rig.ended(n + 1).await;
        log.flush();
        support::wait_until("the call's entries written", || {
            log.counts().written == (n + 1) * 10
        })
        .await;
    }
    drop(client);
    rig.finish().await;
    assert_eq!(log.counts().dropped, 0);

    let mut on_disk: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|file| file.unwrap().file_name().into_string().unwrap())
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, ["log.bin", "log.bin.1", "log.bin.2"]);
    let files = rotation.files_oldest_first(&path);
    assert_eq!(files.len(), 3);
    let mut entries = Vec::new();
    for file in &files {
        let len = std::fs::metadata(file).unwrap().len();
        assert!(len <= rotation.max_file_bytes, "{}: {len}", file.display());
        let read = read_log(file, Framing::Grpc)
            .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        assert!(!read.is_empty(), "{}", file.display());
        entries.extend(read);
    }

    // Which call each entry belongs to, by its request (both sides log
    // it); the oldest call kept may have lost its first entries.
    let mut call_of: Vec<(u64, u64)> = Vec::new(); // (call id, n)
    for entry in &entries {
        if let Some(text) = request_text(entry) {
            let n: u64 = text.strip_prefix("call ").unwrap().parse().unwrap();
            call_of.push((entry.call_id, n));
        }
    }
    let n_of = |entry: &GrpcLogEntry| {
        call_of
            .iter()
            .find(|(id, _)| *id == entry.call_id)
            .map(|&(_, n)| n)
    };
    let order: Vec<u64> = entries.iter().filter_map(n_of).collect();
    assert!(order.is_sorted(), "calls oldest first: {order:?}");
    let first = order[0];
    assert!(first > 0, "the oldest calls were rotated away");
    assert_eq!(*order.last().unwrap(), CALLS - 1, "the newest call kept");
    // The calls after the oldest kept one are whole on both sides.
    for n in first + 1..CALLS {
        for logger in [Logger::Client, Logger::Server] {
            let call: Vec<&GrpcLogEntry> = entries
                .iter()
                .filter(|e| e.logger == logger as i32 && n_of(e) == Some(n))
                .collect();
            let sequences: Vec<u64> = call.iter().map(|e| e.sequence_id_within_call).collect();
            assert_eq!(sequences, [1, 2, 3, 4, 5], "call {n}, {logger:?}");
        }
    }
    assert!(CALLS - first >= 5, "at least 5 calls kept, from {first}");
}
