//! Watching the overrides file (feature `limits-file`): read once with
//! [`LimitsHandle::load_file`], or re-read on an interval by a Tokio task
//! ([`LimitsHandle::watch_file`]), a bad file keeping the last good
//! overrides. Each failure is logged through `tracing` once.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::file::{LimitsFileError, OverridesError, parse_overrides};
use super::handle::LimitsHandle;

/// A watched overrides file (from [`LimitsHandle::watch_file`]): its task
/// and what its checks did. Dropping it stops the watching.
///
/// A *check* reads the file; it *succeeds* when the file could be read and
/// is a valid overrides file (applied if its content changed, left alone
/// if not) and *fails* otherwise, the last good overrides staying in force.
/// With feature `otel`, `FileWatch::with_metrics` exports the
/// same status as OpenTelemetry metrics.
#[derive(Debug)]
pub struct FileWatch {
    pub(super) task: tokio::task::JoinHandle<()>,
    pub(super) path: PathBuf,
    pub(super) status: Arc<WatchStatus>,
}

/// What the watching task reports; read by [`FileWatch`] and its metrics.
#[derive(Debug, Default)]
pub(super) struct WatchStatus {
    last_error: Mutex<Option<Arc<LimitsFileError>>>,
    /// Checks done (good or bad); incremented last, after the rest of a
    /// check's status is stored.
    pub(super) checks: AtomicU64,
    /// Versions applied.
    pub(super) reloads: AtomicU64,
    /// Failures, each counted once however many checks see it again.
    pub(super) failures: AtomicU64,
    /// Whether the last check failed.
    pub(super) failing: AtomicBool,
    /// When the last check succeeded, in milliseconds since the Unix epoch;
    /// 0 before any did.
    pub(super) last_success_ms: AtomicU64,
}

impl FileWatch {
    /// The watched file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The error of the last check, if it failed (the last good overrides
    /// stay in force); `None` once a check succeeds again.
    pub fn last_error(&self) -> Option<Arc<LimitsFileError>> {
        self.status
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many times the file was read (good or bad).
    pub fn checks(&self) -> u64 {
        self.status.checks.load(Ordering::Acquire)
    }

    /// How many times its overrides were applied (a check applies them
    /// when the file's content changed since the last application).
    pub fn reloads(&self) -> u64 {
        self.status.reloads.load(Ordering::Acquire)
    }

    /// How many times a check found a new failure: a new version of the
    /// file that is not a valid overrides file, or a read error different
    /// from the last one. The same failure seen again by later checks
    /// (the file unchanged, the same read error) is not counted again;
    /// after a good check, any failure counts anew. Each failure counted
    /// here is logged once (see [`LimitsHandle::watch_file`]).
    pub fn failures(&self) -> u64 {
        self.status.failures.load(Ordering::Acquire)
    }

    /// When a check last succeeded (the file read and valid, whether its
    /// content changed or not), to the millisecond; `None` before any did.
    /// While the file is bad it stays at the last good check.
    pub fn last_success(&self) -> Option<SystemTime> {
        match self.status.last_success_ms.load(Ordering::Acquire) {
            0 => None,
            ms => UNIX_EPOCH.checked_add(Duration::from_millis(ms)),
        }
    }

    /// Stops watching (as dropping it does).
    pub fn stop(self) {}
}

impl Drop for FileWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LimitsHandle {
    /// Reads the overrides file at `path` (its format is on
    /// [`parse_overrides`](super::parse_overrides))
    /// and makes its overrides the tenants' overrides, replacing all
    /// others; returns how many there are. On an error nothing changes.
    ///
    /// # Errors
    ///
    /// [`LimitsFileError`] if the file cannot be read or is not a valid
    /// overrides file.
    pub fn load_file(&self, path: impl AsRef<Path>) -> Result<usize, LimitsFileError> {
        let path = path.as_ref();
        let text = std::fs::read(path).map_err(|error| LimitsFileError::read(path, error))?;
        self.apply(path, &text)
    }

    fn apply(&self, path: &Path, text: &[u8]) -> Result<usize, LimitsFileError> {
        let invalid = |error| LimitsFileError::invalid(path, error);
        let text = std::str::from_utf8(text)
            .map_err(|error| invalid(OverridesError::at_line(1, format!("not UTF-8: {error}"))))?;
        let overrides = parse_overrides(text, self.defaults()).map_err(invalid)?;
        let count = overrides.len();
        self.replace_overrides(overrides);
        Ok(count)
    }

    /// Watches the overrides file at `path`: reads it now and every
    /// `interval` on a Tokio task, applying it (as
    /// [`load_file`](Self::load_file)) whenever its content changed. A bad
    /// file keeps the last good overrides; its error is in
    /// [`FileWatch::last_error`] until a good file replaces it. Each check
    /// also runs an eviction sweep ([`evict_idle`](Self::evict_idle)).
    ///
    /// The file then owns the overrides: an application replaces those set
    /// through [`set_override`](Self::set_override) as well.
    ///
    /// # Logs
    ///
    /// Through [`tracing`](https://docs.rs/tracing) (nothing is written
    /// unless the application installs a subscriber), target
    /// `tonic_hotpath::limits::watch`, with the field `path`:
    ///
    /// - `WARN`, with the field `error`, for each failure
    ///   [`FileWatch::failures`] counts: once for a bad version of the
    ///   file or a read error, not again while later checks see the same
    ///   one, again for a different one;
    /// - `INFO` when a check succeeds after a failure (with the field
    ///   `overrides`, their number, if it applied a new version);
    /// - `DEBUG` for each other version applied (with `overrides`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tonic_hotpath::limits::{Limits, TenantLimitLayer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let path = std::env::temp_dir().join(format!("overrides-doc-{}.yaml", std::process::id()));
    /// std::fs::write(&path, "overrides:\n  team-a:\n    max_in_flight: 10\n").unwrap();
    /// let layer = TenantLimitLayer::new(Limits::unlimited());
    /// let watch = layer.handle().watch_file(&path, Duration::from_secs(10));
    /// for _ in 0..1000 {
    ///     if watch.checks() > 0 {
    ///         break;
    ///     }
    ///     tokio::time::sleep(Duration::from_millis(5)).await;
    /// }
    /// assert_eq!(watch.reloads(), 1);
    /// assert!(watch.last_error().is_none() && watch.last_success().is_some());
    /// assert_eq!(layer.handle().limits_for("team-a").max_in_flight, Some(10));
    /// # std::fs::remove_file(&path).unwrap();
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (it spawns the task).
    pub fn watch_file(&self, path: impl Into<PathBuf>, interval: Duration) -> FileWatch {
        let path = path.into();
        let status = Arc::new(WatchStatus::default());
        let checker = Checker {
            handle: self.clone(),
            path: path.clone(),
            status: Arc::clone(&status),
            applied: None,
            failed: None,
        };
        let task = tokio::spawn(watch(checker, interval));
        FileWatch { task, path, status }
    }
}

/// The watching task: one check per tick.
async fn watch(mut checker: Checker, interval: Duration) {
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let read_path = checker.path.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read(read_path))
            .await
            .unwrap_or_else(|join| Err(io::Error::other(join)));
        checker.check(read);
        checker.handle.evict_idle();
    }
}

/// The failure a check found last, to know the same one when it comes
/// again.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// This content is not a valid overrides file.
    Invalid(Vec<u8>),
    /// The file could not be read (the error's message).
    Read(String),
}

/// The watching task's state.
struct Checker {
    handle: LimitsHandle,
    path: PathBuf,
    status: Arc<WatchStatus>,
    /// The content last applied: an unchanged file is not applied again.
    applied: Option<Vec<u8>>,
    /// The failure of the last check, if it failed: a bad file unchanged
    /// is not parsed (nor counted, nor logged) again.
    failed: Option<Failure>,
}

/// What a check found, before it is reported.
enum Outcome {
    /// The content applied before.
    Unchanged,
    /// A new version, applied: its number of overrides.
    Applied(usize),
    /// The failure of the last check, again.
    SameFailure,
    /// A new failure.
    Failed(Failure, LimitsFileError),
}

impl Checker {
    /// One check of the file (`read`: its content), reported in the
    /// watch's status and logged.
    fn check(&mut self, read: io::Result<Vec<u8>>) {
        let outcome = match read {
            Ok(text) if self.applied.as_deref() == Some(&text[..]) => Outcome::Unchanged,
            Ok(text) if matches!(&self.failed, Some(Failure::Invalid(bad)) if *bad == text) => {
                Outcome::SameFailure
            }
            Ok(text) => match self.handle.apply(&self.path, &text) {
                Ok(count) => {
                    self.applied = Some(text);
                    Outcome::Applied(count)
                }
                Err(error) => Outcome::Failed(Failure::Invalid(text), error),
            },
            Err(error) => {
                let error = LimitsFileError::read(&self.path, error);
                let failure = Failure::Read(error.to_string());
                if self.failed.as_ref() == Some(&failure) {
                    Outcome::SameFailure
                } else {
                    Outcome::Failed(failure, error)
                }
            }
        };
        self.report(outcome);
    }

    /// Stores a check's outcome in the status (the counters and the error
    /// first, the `failing` flag, then `checks` last) and logs it.
    fn report(&mut self, outcome: Outcome) {
        let status = &*self.status;
        let path = self.path.display();
        let set_error = |error: Option<Arc<LimitsFileError>>| {
            *status
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = error;
        };
        match outcome {
            Outcome::Unchanged | Outcome::Applied(_) => {
                let recovered = self.failed.take().is_some();
                set_error(None);
                status.last_success_ms.store(now_ms(), Ordering::Release);
                if let Outcome::Applied(_) = outcome {
                    status.reloads.fetch_add(1, Ordering::AcqRel);
                }
                status.failing.store(false, Ordering::Release);
                match (outcome, recovered) {
                    (Outcome::Applied(overrides), true) => {
                        tracing::info!(%path, overrides, "{GOOD_AGAIN}, applied");
                    }
                    (Outcome::Applied(overrides), false) => {
                        tracing::debug!(%path, overrides, "{APPLIED}");
                    }
                    (_, true) => {
                        tracing::info!(%path, "{GOOD_AGAIN}, unchanged from the overrides in force");
                    }
                    (_, false) => {}
                }
            }
            Outcome::SameFailure => {}
            Outcome::Failed(failure, error) => {
                tracing::warn!(%path, %error, "{NOT_APPLIED}");
                self.failed = Some(failure);
                set_error(Some(Arc::new(error)));
                status.failures.fetch_add(1, Ordering::AcqRel);
                status.failing.store(true, Ordering::Release);
            }
        }
        status.checks.fetch_add(1, Ordering::AcqRel);
    }
}

/// The log's messages.
const APPLIED: &str = "tenant limits: overrides file applied";
const GOOD_AGAIN: &str = "tenant limits: overrides file good again";
const NOT_APPLIED: &str =
    "tenant limits: overrides file not applied, the last good overrides stay in force";

/// Now, in milliseconds since the Unix epoch (at least 1: 0 means never).
fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX).max(1)
}
