//! `FileWatch::with_metrics` (features `otel` and `limits-file`): a real
//! watched overrides file's reload status read back from the OpenTelemetry
//! SDK's in-memory exporter through a good version, bad ones (the last
//! good limits and their time kept, each failure counted once), a
//! recovery, and the watch's end.
use crate::tenant_limits_file::{temp_file, write};

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::otel::{Point, Sdk};
use tonic_hotpath::limits::{FileWatch, Limits, TenantLimitLayer};

/// The four instruments' values for one file (`None`: no data point).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Status {
    successful: Option<f64>,
    success_time: Option<f64>,
    reloads: Option<u64>,
    failures: Option<u64>,
}

fn status(sdk: &Sdk, path: &Path) -> Status {
    let path = path.to_str().expect("a UTF-8 path");
    let attrs = [(FileWatch::PATH_KEY, path)];
    let gauge = |name| match sdk.point(name, &attrs) {
        Some(Point::Gauge(value)) => Some(value),
        None => None,
        other => panic!("{name}: not a gauge: {other:?}"),
    };
    let counter = |name| match sdk.point(name, &attrs) {
        Some(Point::Counter(n)) => Some(n),
        None => None,
        other => panic!("{name}: not a counter: {other:?}"),
    };
    Status {
        successful: gauge(FileWatch::METRIC_LAST_RELOAD_SUCCESSFUL),
        success_time: gauge(FileWatch::METRIC_LAST_RELOAD_SUCCESS_TIMESTAMP),
        reloads: counter(FileWatch::METRIC_RELOADS),
        failures: counter(FileWatch::METRIC_RELOAD_FAILURES),
    }
}

/// Polls the exported status (every 5 ms, at most [`support::PATIENCE`])
/// until `done`.
async fn wait_status(what: &str, sdk: &Sdk, path: &Path, done: impl Fn(&Status) -> bool) -> Status {
    let deadline = support::deadline();
    while Instant::now() < deadline {
        let now = status(sdk, path);
        if done(&now) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}: {:?}", status(sdk, path));
}

/// Polls until the watch made `more` checks after now.
async fn more_checks(watch: &FileWatch, more: u64) {
    let want = watch.checks() + more;
    let deadline = support::deadline();
    while Instant::now() < deadline {
        if watch.checks() >= want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {more} more checks");
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

#[tokio::test]
async fn reload_metrics_follow_good_bad_and_recovered_versions() {
    let sdk = Sdk::new();
    let path = temp_file("otel");
    write(&path, "overrides:\n  a:\n    max_in_flight: 1\n");
    let handle = TenantLimitLayer::new(Limits::unlimited()).handle();
    let started = unix_now();
    let watch = handle
        .watch_file(&path, Duration::from_millis(10))
        .with_metrics(sdk.provider());

    // A good version: applied, successful, its time now.
    let good = wait_status("the first version", &sdk, &path, |s| {
        s.reloads == Some(1) && s.successful == Some(1.0) && s.success_time.is_some()
    })
    .await;
    assert_eq!(good.failures, Some(0));
    let good_time = good.success_time.expect("a success time");
    assert!(
        started - 0.001 <= good_time && good_time <= unix_now(),
        "{good_time}"
    );
    // Later good checks move the time on, without counting reloads.
    let later = wait_status("a later good check", &sdk, &path, |s| {
        s.success_time > Some(good_time)
    })
    .await;
    assert_eq!((later.successful, later.reloads), (Some(1.0), Some(1)));

    // A bad version: 0, one failure, the time of the last good check kept
    // however many checks see it, and the good limits kept.
    write(&path, "overrides:\n  a:\n    max_in_flight: many\n");
    let bad = wait_status("the bad version", &sdk, &path, |s| {
        s.successful == Some(0.0) && s.failures == Some(1)
    })
    .await;
    assert_eq!((bad.reloads, bad.failures), (Some(1), Some(1)));
    let kept_time = bad.success_time.expect("the last good check's time");
    assert!(kept_time >= later.success_time.expect("a time"));
    more_checks(&watch, 5).await;
    assert_eq!(status(&sdk, &path), bad);
    assert_eq!(handle.limits_for("a").max_in_flight, Some(1));
    assert_eq!(watch.failures(), 1);

    // Another bad version, then a missing file: a failure each.
    write(&path, "overrides:\n  a: [1, 2]\n");
    wait_status("the second bad version", &sdk, &path, |s| {
        s.failures == Some(2)
    })
    .await;
    std::fs::remove_file(&path).expect("remove");
    wait_status("the missing file", &sdk, &path, |s| s.failures == Some(3)).await;
    more_checks(&watch, 5).await;
    let missing = status(&sdk, &path);
    assert_eq!(
        missing,
        Status {
            successful: Some(0.0),
            success_time: Some(kept_time),
            reloads: Some(1),
            failures: Some(3),
        }
    );

    // Recovery: the next good version applied, successful, time moved on.
    write(&path, "overrides:\n  a:\n    max_in_flight: 7\n");
    let recovered = wait_status("the recovery", &sdk, &path, |s| s.successful == Some(1.0)).await;
    assert_eq!((recovered.reloads, recovered.failures), (Some(2), Some(3)));
    assert!(recovered.success_time > Some(kept_time), "{recovered:?}");
    assert_eq!(handle.limits_for("a").max_in_flight, Some(7));
    assert!(watch.last_error().is_none());

    // The exported instruments: units and scope.
    let exported = sdk.export();
    let units: Vec<&str> = [
        FileWatch::METRIC_LAST_RELOAD_SUCCESSFUL,
        FileWatch::METRIC_LAST_RELOAD_SUCCESS_TIMESTAMP,
        FileWatch::METRIC_RELOADS,
        FileWatch::METRIC_RELOAD_FAILURES,
    ]
    .iter()
    .map(|name| exported[*name].unit.as_str())
    .collect();
    assert_eq!(units, ["", "s", "{reload}", "{failure}"]);
    assert_eq!(exported[FileWatch::METRIC_RELOADS].scope.0, "tonic-hotpath");

    // Stopped: the watch's series are no longer reported.
    watch.stop();
    wait_status("the stopped watch's series gone", &sdk, &path, |s| {
        *s == Status {
            successful: None,
            success_time: None,
            reloads: None,
            failures: None,
        }
    })
    .await;
    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
}

#[tokio::test]
async fn a_file_bad_from_the_start_has_no_success_time() {
    let sdk = Sdk::new();
    let path = temp_file("otel-bad-first");
    write(&path, "overrides: [\n");
    let handle = TenantLimitLayer::new(Limits::unlimited()).handle();
    let _watch = handle
        .watch_file(&path, Duration::from_millis(10))
        .with_metrics(sdk.provider());
    let bad = wait_status("the first check", &sdk, &path, |s| s.successful.is_some()).await;
    assert_eq!(
        bad,
        Status {
            successful: Some(0.0),
            success_time: None,
            reloads: Some(0),
            failures: Some(1),
        }
    );
    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
}
