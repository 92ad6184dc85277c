//! Watching the overrides file (feature `limits-file`): read once with
//! [`LimitsHandle::load_file`], or re-read on an interval by a Tokio task
//! ([`LimitsHandle::watch_file`]), a bad file keeping the last good
//! overrides.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::file::{LimitsFileError, OverridesError, parse_overrides};
use super::handle::LimitsHandle;

/// A watched overrides file (from [`LimitsHandle::watch_file`]): its task
/// and what its reloads did. Dropping it stops the watching.
#[derive(Debug)]
pub struct FileWatch {
    task: tokio::task::JoinHandle<()>,
    status: Arc<WatchStatus>,
}

#[derive(Debug, Default)]
struct WatchStatus {
    last_error: Mutex<Option<Arc<LimitsFileError>>>,
    checks: AtomicU64,
    reloads: AtomicU64,
}

impl FileWatch {
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
    /// # Panics
    ///
    /// Outside a Tokio runtime (it spawns the task).
    pub fn watch_file(&self, path: impl Into<PathBuf>, interval: Duration) -> FileWatch {
        let status = Arc::new(WatchStatus::default());
        let task = tokio::spawn(watch(
            self.clone(),
            path.into(),
            interval,
            Arc::clone(&status),
        ));
        FileWatch { task, status }
    }
}

/// The watching task: one check per tick.
async fn watch(handle: LimitsHandle, path: PathBuf, interval: Duration, status: Arc<WatchStatus>) {
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The content last applied: an unchanged file is not applied again.
    let mut applied: Option<Vec<u8>> = None;
    loop {
        ticker.tick().await;
        let read_path = path.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read(read_path))
            .await
            .unwrap_or_else(|join| Err(io::Error::other(join)));
        let outcome = match read {
            Ok(text) if applied.as_deref() == Some(&text[..]) => Ok(()),
            Ok(text) => handle.apply(&path, &text).map(|_| {
                applied = Some(text);
                status.reloads.fetch_add(1, Ordering::AcqRel);
            }),
            Err(error) => Err(LimitsFileError::read(&path, error)),
        };
        *status
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = outcome.err().map(Arc::new);
        status.checks.fetch_add(1, Ordering::AcqRel);
        handle.evict_idle();
    }
}
