//! The overrides file (feature `limits-file`) watched on a short interval
//! while a real tonic server on 127.0.0.1 serves: a good file is applied,
//! a bad one keeps the last good limits and reports its error, and the
//! next good one is picked up on the next check.

use std::path::PathBuf;
use std::time::Duration;

use support::limits::{call, client, serve, wait_for};
use tonic::Code;
use tonic_hotpath::limits::{Limits, TenantLimitLayer};

/// A fresh file path in the system's temporary directory.
pub(crate) fn temp_file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tonic-hotpath-limits-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join("overrides.yaml")
}

/// Writes `text` to `path` whole (a rename, as config managers do, so a
/// check never reads half a file).
pub(crate) fn write(path: &PathBuf, text: &str) {
    let staged = path.with_extension("tmp");
    std::fs::write(&staged, text).expect("write overrides");
    std::fs::rename(&staged, path).expect("rename overrides");
}

#[tokio::test]
async fn a_watched_file_applies_good_versions_and_keeps_them_through_bad_ones() {
    let path = temp_file("watch");
    write(&path, "overrides:\n  blocked:\n    max_in_flight: 0\n");
    let layer = TenantLimitLayer::new(Limits::unlimited());
    let handle = layer.handle();
    let watch = handle.watch_file(&path, Duration::from_millis(20));
    let (addr, _gate) = serve(layer).await;
    let client = client(addr).await;

    wait_for("the first file applied", 1, || watch.reloads()).await;
    assert!(watch.last_error().is_none());
    assert_eq!(
        call(&client, Some("blocked"), "hi").await.0,
        Code::ResourceExhausted
    );
    assert_eq!(call(&client, Some("other"), "hi").await.0, Code::Ok);

    // A bad file: the error is reported, the limits stay.
    write(&path, "overrides:\n  blocked:\n    max_in_flight: lots\n");
    wait_for("the bad file reported", true, || {
        watch.last_error().is_some()
    })
    .await;
    let error = watch.last_error().expect("an error").to_string();
    assert!(error.contains("line 3"), "{error}");
    assert!(
        error.contains("max_in_flight must be an integer"),
        "{error}"
    );
    assert_eq!(watch.reloads(), 1);
    assert_eq!(
        call(&client, Some("blocked"), "hi").await.0,
        Code::ResourceExhausted
    );
    assert_eq!(handle.limits_for("blocked").max_in_flight, Some(0));

    // A missing file: reported too, limits kept.
    std::fs::remove_file(&path).expect("remove");
    wait_for("the missing file reported", true, || {
        watch
            .last_error()
            .is_some_and(|error| error.to_string().starts_with("cannot read"))
    })
    .await;
    assert_eq!(
        call(&client, Some("blocked"), "hi").await.0,
        Code::ResourceExhausted
    );

    // The next good file is picked up on the next check.
    write(
        &path,
        "overrides:\n  blocked:\n    max_in_flight: 5\n  other:\n    max_in_flight: 0\n",
    );
    wait_for("the good file applied", 2, || watch.reloads()).await;
    assert!(watch.last_error().is_none());
    assert_eq!(call(&client, Some("blocked"), "hi").await.0, Code::Ok);
    assert_eq!(
        call(&client, Some("other"), "hi").await.0,
        Code::ResourceExhausted
    );

    // Stopped: later versions are not read.
    let checks = watch.checks();
    watch.stop();
    write(&path, "overrides: {}\n");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        call(&client, Some("other"), "hi").await.0,
        Code::ResourceExhausted
    );
    assert!(checks >= 4, "{checks}");
    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
}

#[tokio::test]
async fn load_file_applies_once_or_changes_nothing() {
    let path = temp_file("load");
    let handle = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(3)).handle();
    write(
        &path,
        "overrides:\n  a: {rate: 10}\n  b: {max_in_flight: null}\n",
    );
    assert_eq!(handle.load_file(&path).expect("a good file"), 2);
    let a = handle.limits_for("a");
    assert_eq!(a.max_in_flight, Some(3));
    assert_eq!(
        a.rate.map(|rate| (rate.per_second, rate.burst)),
        Some((10.0, 10))
    );
    assert!(handle.limits_for("b").is_unlimited());

    write(&path, "overrides:\n  a: {rate: 10}\n  a: {rate: 20}\n");
    let error = handle.load_file(&path).expect_err("duplicate keys");
    assert!(error.to_string().contains("line 3"), "{error}");
    assert_eq!(handle.overrides().len(), 2);
    assert!(handle.load_file(path.with_extension("missing")).is_err());
    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
}
