//! What the crate logs through `tracing`, read by a small subscriber of
//! the tests' own: every event of the crate (target `tonic_hotpath…`, any
//! level, any thread: the backend logs from its background tasks), as one
//! line of text each. It is the process's global subscriber, installed by
//! the first test that reads the log; events of other tests of this
//! binary land in it too, so a test picks its own by its Redis's address.

use std::fmt::{self, Write as _};
use std::sync::{Mutex, Once};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Starts recording (once per process).
pub fn record() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        tracing::subscriber::set_global_default(Recorder).expect("no other global subscriber");
    });
}

/// The lines logged so far that contain `needle`.
pub fn lines_with(needle: &str) -> Vec<String> {
    LINES
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .iter()
        .filter(|line| line.contains(needle))
        .cloned()
        .collect()
}

/// Every line logged so far.
pub fn all() -> Vec<String> {
    LINES
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .clone()
}

struct Recorder;

/// An event as `LEVEL field=value …` (the message as `message=…`).
struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
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
        let mut line = Line(event.metadata().level().to_string());
        event.record(&mut line);
        LINES
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(line.0);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
