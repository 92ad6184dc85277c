//! `FileSink`: buffering, rotation (file count and sizes capped, the
//! newest entries kept, in order), and errors.

use std::fs;
use std::path::Path;

use tonic_hotpath::binlog::proto::GrpcLogEntry;
use tonic_hotpath::binlog::{FileSink, Framing, Rotation, Sink, read_log};

use crate::entries::{TempDir, numbered};

/// The call ids of every file of a rotated log, oldest file first.
fn call_ids_per_file(rotation: &Rotation, path: &Path, framing: Framing) -> Vec<Vec<u64>> {
    rotation
        .files_oldest_first(path)
        .iter()
        .map(|file| {
            let entries = read_log(file, framing).unwrap();
            entries.iter().map(|entry| entry.call_id).collect()
        })
        .collect()
}

/// An entry of `size` bytes framed with `framing` (or one or two more,
/// where a length's varint grows), told apart by `call_id`.
fn sized(call_id: u64, size: usize, framing: Framing) -> GrpcLogEntry {
    let mut entry = numbered(call_id);
    while framing.framed_len(&entry) < size {
        let peer = entry.peer.get_or_insert_with(Default::default);
        peer.address.push('a');
    }
    entry
}

#[test]
fn rotation_caps_file_count_and_size_and_keeps_the_newest_in_order() {
    let dir = TempDir::new("rotation");
    for framing in [Framing::Grpc, Framing::Varint] {
        let path = dir.path().join(format!("{framing:?}.bin"));
        let rotation = Rotation {
            max_file_bytes: 1000,
            max_files: 4,
        };
        let mut sink = FileSink::create(&path, framing)
            .unwrap()
            .with_rotation(rotation);
        // Sizes vary: 20 to 119 bytes.
        for call_id in 0..2000 {
            let size = 20 + (call_id as usize * 37) % 100;
            sink.write(&sized(call_id, size, framing)).unwrap();
        }
        drop(sink);

        assert_eq!(rotation.files_oldest_first(&path).len(), 4);
        assert!(!Rotation::rotated_path(&path, 4).exists());
        for file in rotation.files_oldest_first(&path) {
            let len = fs::metadata(&file).unwrap().len();
            assert!(len <= 1000, "{} is {len} bytes", file.display());
        }
        // The rotated files are full: the next entry would not have fit.
        for file in &rotation.files_oldest_first(&path)[..3] {
            assert!(fs::metadata(file).unwrap().len() > 1000 - 130);
        }
        let call_ids: Vec<u64> = call_ids_per_file(&rotation, &path, framing)
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(call_ids.last(), Some(&1999));
        let first = call_ids[0];
        assert_eq!(call_ids, (first..2000).collect::<Vec<_>>(), "{framing:?}");
    }
}

#[test]
fn an_entry_larger_than_a_file_is_alone_in_its_file() {
    let dir = TempDir::new("oversized");
    let path = dir.path().join("log.bin");
    let framing = Framing::Grpc;
    let rotation = Rotation {
        max_file_bytes: 100,
        max_files: 10,
    };
    let mut sink = FileSink::create(&path, framing)
        .unwrap()
        .with_rotation(rotation);
    sink.write(&sized(1, 40, framing)).unwrap();
    sink.write(&sized(2, 500, framing)).unwrap();
    sink.write(&sized(3, 40, framing)).unwrap();
    sink.write(&sized(4, 40, framing)).unwrap();
    sink.write(&sized(5, 500, framing)).unwrap();
    sink.flush().unwrap();
    assert_eq!(
        call_ids_per_file(&rotation, &path, framing),
        [vec![1], vec![2], vec![3, 4], vec![5]]
    );
    assert!(fs::metadata(&path).unwrap().len() >= 500);
}

#[test]
fn one_file_rotation_empties_the_file() {
    let dir = TempDir::new("one-file");
    let path = dir.path().join("log.bin");
    let rotation = Rotation {
        max_file_bytes: 30,
        max_files: 1,
    };
    let mut sink = FileSink::create(&path, Framing::Grpc)
        .unwrap()
        .with_rotation(rotation);
    for call_id in 0..100 {
        sink.write(&numbered(call_id)).unwrap();
    }
    drop(sink);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    let call_ids = &call_ids_per_file(&rotation, &path, Framing::Grpc)[0];
    assert_eq!(call_ids.last(), Some(&99));
    assert!(call_ids.len() <= 5);
}

#[test]
fn an_earlier_runs_rotated_files_shift_along() {
    let dir = TempDir::new("earlier-run");
    let path = dir.path().join("log.bin");
    let rotation = Rotation {
        max_file_bytes: 6,
        max_files: 3,
    };
    // Each 6-byte entry fills a file.
    let mut sink = FileSink::create(&path, Framing::Grpc)
        .unwrap()
        .with_rotation(rotation);
    sink.write(&numbered(1)).unwrap();
    sink.write(&numbered(2)).unwrap();
    drop(sink);
    let mut sink = FileSink::create(&path, Framing::Grpc)
        .unwrap()
        .with_rotation(rotation);
    sink.write(&numbered(3)).unwrap();
    sink.write(&numbered(4)).unwrap();
    drop(sink);
    // Run 1's file at `path` was truncated by run 2's `create`.
    assert_eq!(
        call_ids_per_file(&rotation, &path, Framing::Grpc),
        [vec![1], vec![3], vec![4]]
    );
}

#[test]
fn entries_reach_the_file_on_flush_not_before() {
    let dir = TempDir::new("flush");
    let path = dir.path().join("log.bin");
    let mut sink = FileSink::create(&path, Framing::Varint).unwrap();
    sink.write(&numbered(1)).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().len(), 0);
    sink.flush().unwrap();
    assert_eq!(read_log(&path, Framing::Varint).unwrap(), [numbered(1)]);
    // Large runs are written in chunks without a flush.
    for call_id in 0..100_000 {
        sink.write(&numbered(call_id)).unwrap();
    }
    assert!(fs::metadata(&path).unwrap().len() > 100_000);
}

#[test]
fn a_missing_directory_is_an_error() {
    let dir = TempDir::new("missing");
    let path = dir.path().join("no-such-dir").join("log.bin");
    let error = FileSink::create(&path, Framing::Grpc).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_failed_rotation_is_an_error_and_the_next_write_tries_again() {
    let dir = TempDir::new("failed-rotation");
    let path = dir.path().join("log.bin");
    let rotation = Rotation {
        max_file_bytes: 6,
        max_files: 2,
    };
    let mut sink = FileSink::create(&path, Framing::Grpc)
        .unwrap()
        .with_rotation(rotation);
    sink.write(&numbered(1)).unwrap();
    // A directory where `log.bin.1` goes: renaming the file onto it fails.
    fs::create_dir(Rotation::rotated_path(&path, 1)).unwrap();
    fs::write(Rotation::rotated_path(&path, 1).join("keep"), b"x").unwrap();
    assert!(sink.write(&numbered(2)).is_err());
    fs::remove_dir_all(Rotation::rotated_path(&path, 1)).unwrap();
    sink.write(&numbered(3)).unwrap();
    drop(sink);
    assert_eq!(
        call_ids_per_file(&rotation, &path, Framing::Grpc),
        [vec![1], vec![3]]
    );
}
