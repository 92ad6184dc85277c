//! A watched overrides file's log (feature `limits-file`), read by a small
//! `tracing` subscriber of the test's own: a failure is logged at `WARN`
//! once however many checks see it, a different one again, a recovery at
//! `INFO`, other versions applied at `DEBUG`.
use crate::tenant_limits_file::{temp_file, write};

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use tonic_hotpath::limits::{FileWatch, Limits, TenantLimitLayer};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One event: its level and fields (`message` included), as text.
#[derive(Debug, Clone)]
struct Logged {
    level: Level,
    fields: BTreeMap<String, String>,
}

/// The events recorded on this thread, while a test records them.
type Events = Arc<Mutex<Vec<Logged>>>;

thread_local! {
    static RECORDING: RefCell<Option<Events>> = const { RefCell::new(None) };
}

/// Records the crate's events (target `tonic_hotpath…`) into the
/// recording of the thread they happen on; no spans. It is the process's
/// global subscriber: a subscriber set for one thread only
/// (`set_default`) misses the events of a callsite first reached on
/// another thread (tracing caches the interest that thread's subscriber,
/// none, gave), and the other tests of this binary reach them.
struct Recorder;

/// Records this thread's events until the recording is dropped.
struct Recording(Events);

impl Recording {
    fn start() -> Self {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            tracing::subscriber::set_global_default(Recorder).expect("no other global subscriber");
        });
        let events = Events::default();
        RECORDING.with(|recording| *recording.borrow_mut() = Some(Arc::clone(&events)));
        Self(events)
    }

    fn events(&self) -> Vec<Logged> {
        self.0.lock().expect("events").clone()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        RECORDING.with(|recording| recording.borrow_mut().take());
    }
}

/// An event's fields as text.
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("tonic_hotpath")
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let Some(events) = RECORDING.with(|recording| recording.borrow().clone()) else {
            return;
        };
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        let logged = Logged {
            level: *event.metadata().level(),
            fields: fields.0,
        };
        events.lock().expect("events").push(logged);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Polls (every 5 ms, at most [`support::PATIENCE`]) until `done`.
async fn until(what: &str, done: impl Fn() -> bool) {
    support::wait_until(what, done).await;
}

/// Polls until the watch made `more` checks after now.
async fn more_checks(watch: &FileWatch, more: u64) {
    let want = watch.checks() + more;
    until("more checks", || watch.checks() >= want).await;
}

/// The events as `(level, message, error or overrides)`.
fn summary(recording: &Recording) -> Vec<(Level, String, String)> {
    recording
        .events()
        .into_iter()
        .map(|logged| {
            let field = |key: &str| logged.fields.get(key).cloned().unwrap_or_default();
            let detail = match logged.level {
                Level::WARN => field("error"),
                _ => field("overrides"),
            };
            (logged.level, field("message"), detail)
        })
        .collect()
}

// The test's runtime runs on this thread only (`current_thread`), so this
// thread's recording has the watching task's events and no other test's.
#[tokio::test(flavor = "current_thread")]
async fn a_failure_is_logged_once_a_different_one_again_and_the_recovery_at_info() {
    let recording = Recording::start();
    let path = temp_file("log");
    let shown = path.display().to_string();
    write(&path, "overrides:\n  a:\n    max_in_flight: 1\n");
    let handle = TenantLimitLayer::new(Limits::unlimited()).handle();
    let watch = handle.watch_file(&path, Duration::from_millis(10));
    until("the first version", || watch.reloads() == 1).await;
    more_checks(&watch, 3).await;

    // A bad version, seen by many checks: one warning.
    write(&path, "overrides:\n  a:\n    max_in_flight: many\n");
    until("the bad version", || watch.failures() == 1).await;
    more_checks(&watch, 5).await;
    // A different bad version: a second one.
    write(&path, "overrides:\n  a: [1]\n");
    until("the second bad version", || watch.failures() == 2).await;
    more_checks(&watch, 5).await;
    // The file gone: a third.
    std::fs::remove_file(&path).expect("remove");
    until("the missing file", || watch.failures() == 3).await;
    more_checks(&watch, 5).await;
    // A good version again: applied, at INFO.
    write(
        &path,
        "overrides:\n  a: {max_in_flight: 2}\n  b: {rate: 5}\n",
    );
    until("the recovery", || watch.reloads() == 2).await;
    more_checks(&watch, 3).await;
    // A bad version, then the good one back as it was: INFO, unchanged.
    write(&path, "overrides:\n  a: {max_in_flight: -1}\n");
    until("the third bad version", || watch.failures() == 4).await;
    write(
        &path,
        "overrides:\n  a: {max_in_flight: 2}\n  b: {rate: 5}\n",
    );
    until("the rollback", || watch.last_error().is_none()).await;
    more_checks(&watch, 3).await;
    drop(watch);

    let events = summary(&recording);
    let messages: Vec<(Level, &str)> = events
        .iter()
        .map(|(level, message, _)| (*level, message.as_str()))
        .collect();
    let applied = "tenant limits: overrides file applied";
    let failed = "tenant limits: overrides file not applied, the last good overrides stay in force";
    let good_again = "tenant limits: overrides file good again, applied";
    let unchanged =
        "tenant limits: overrides file good again, unchanged from the overrides in force";
    assert_eq!(
        messages,
        [
            (Level::DEBUG, applied),
            (Level::WARN, failed),
            (Level::WARN, failed),
            (Level::WARN, failed),
            (Level::INFO, good_again),
            (Level::WARN, failed),
            (Level::INFO, unchanged),
        ],
        "{events:#?}"
    );
    let details: Vec<&str> = events
        .iter()
        .map(|(_, _, detail)| detail.as_str())
        .collect();
    assert_eq!(details[0], "1");
    assert!(details[1].contains("line 3") && details[1].contains("max_in_flight"));
    assert!(details[2].contains("line 2"), "{}", details[2]);
    assert!(details[3].starts_with("cannot read"), "{}", details[3]);
    assert_eq!(details[4], "2");
    for logged in recording.events() {
        assert_eq!(logged.fields["path"], shown);
    }
    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
}
