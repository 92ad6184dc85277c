//! Replays the fuzz targets' checked-in corpora (`fuzz/corpus/<target>/`)
//! and the inputs that once failed (`fuzz/regressions/<target>/`) through
//! the same checks the fuzz targets run (`fuzz/checks/`), on stable: a
//! fixed crash cannot come back unnoticed. The fuzzing itself is nightly
//! (`cargo fuzz run <target>`, see `fuzz/README.md`).

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

#[path = "../fuzz/checks/mod.rs"]
mod checks;

/// Every file under `fuzz/<kind>/<target>/`.
fn inputs(kind: &str, target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut inputs: Vec<(String, Vec<u8>)> = entries
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let name = path.display().to_string();
            (name, fs::read(&path).expect("a corpus file"))
        })
        .collect();
    inputs.sort();
    inputs
}

/// Runs `check` over every input, naming each one that fails.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let mut failed = Vec::new();
    let mut count = 0;
    for kind in ["corpus", "regressions"] {
        for (name, input) in inputs(kind, target) {
            count += 1;
            if catch_unwind(AssertUnwindSafe(|| check(&input))).is_err() {
                failed.push(name);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} inputs fail: {failed:#?}",
        failed.len()
    );
    count
}

#[test]
fn every_target_has_a_corpus() {
    for (target, _) in checks::TARGETS {
        assert!(
            !inputs("corpus", target).is_empty(),
            "fuzz/corpus/{target} is empty"
        );
    }
}

macro_rules! replay_tests {
    ($($target:ident),* $(,)?) => {$(
        #[test]
        fn $target() {
            let count = replay(stringify!($target), checks::$target::check);
            println!("{}: {count} inputs replayed", stringify!($target));
        }
    )*};
}

replay_tests!(
    admission,
    binlog_filter,
    binlog_reader,
    channelz,
    decompress,
    frames,
    grpc_headers,
    orca_reports,
    org_ids,
    overrides,
    retry,
    stats_layer,
);

/// Writes the seed inputs (`fuzz/corpus/<target>/seed-*`), made from the
/// inputs the crate's own tests use. Run once when a target is added:
/// `cargo test --all-features --test fuzz_corpus -- --ignored write_seeds`.
#[test]
#[ignore = "writes the seed corpora"]
fn write_seeds() {
    for (target, seeds) in seeds::all() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus")
            .join(target);
        fs::create_dir_all(&dir).unwrap();
        for (index, seed) in seeds.iter().enumerate() {
            fs::write(dir.join(format!("seed-{index:02}")), seed).unwrap();
        }
    }
}

mod seeds {
    use prost::Message;
    use tonic_hotpath::binlog::proto::{GrpcLogEntry, grpc_log_entry};
    use tonic_hotpath::channelz::proto::{
        GetServerSocketsRequest, GetServersRequest, GetTopChannelsRequest,
    };
    use tonic_hotpath::stats::compression::Encoding;

    use super::checks::compression_support::compress;

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    /// One gRPC message: flag, length, bytes.
    fn frame(compressed: bool, bytes: &[u8]) -> Vec<u8> {
        cat(&[
            &[u8::from(compressed)],
            &(bytes.len() as u32).to_be_bytes(),
            bytes,
        ])
    }

    pub fn all() -> Vec<(&'static str, Vec<Vec<u8>>)> {
        let hello = frame(false, b"\x0a\x05hello");
        let two = cat(&[&hello, &frame(false, b""), &frame(true, b"xyz")]);
        let frames = vec![
            cat(&[&[3], &[0xff], &hello]),
            cat(&[&[3, 1, 0xff], &two]),
            cat(&[&[2, 5, 3, 0, 7, 0xff], &two]),
            cat(&[&[1, 0xff], &frame(false, b"0123456789")]),
            cat(&[&[3, 0xff], &hello[..7]]),
            cat(&[&[3, 0xff], &[2, 0, 0, 0, 0]]),
        ];
        let mut decompress = Vec::new();
        let big = b"the quick brown fox ".repeat(600);
        let zeros = vec![0u8; 100_000];
        for (index, encoding) in [Encoding::Gzip, Encoding::Deflate, Encoding::Zstd]
            .iter()
            .enumerate()
        {
            let e = index as u8;
            for data in [&b""[..], b"hello", &big, &zeros] {
                let compressed = compress(*encoding, data);
                decompress.push(cat(&[&[e, 3, 0xff], &compressed]));
                decompress.push(cat(&[&[e, 0, 100, 7, 1, 0xff], &compressed]));
                decompress.push(cat(&[
                    &[e, 1, 0x10, 0x00, 0xff],
                    &compressed[..compressed.len() / 2],
                ]));
            }
        }
        let grpc_headers = vec![
            b"\x005S".to_vec(),
            b"\x0020m".to_vec(),
            b"\x00123456789S".to_vec(),
            b"\x0199999999H".to_vec(),
            b"\x01hello%20world%E2%9C%93 %zz %".to_vec(),
            b"\x02gzip\x00\x00gzip, deflate\x00\x00 zstd \x00".to_vec(),
            b"\x02identity\x00".to_vec(),
            b"\x02br\x00\x00gzip,br\x00".to_vec(),
            b"\x03\x00\x40\x05aGVsbG8=\x00\x06AAECAw\x00\x09x-b\x00\x07CAUSAmhp\x00\x0ate\x00"
                .to_vec(),
            b"\x03\x00\x08\x09v\x00\x05!!\x00".to_vec(),
            b"\x04application/grpc+proto".to_vec(),
            b"\x04application/GRPC;charset=utf-8".to_vec(),
            b"\x04application/grpc-web".to_vec(),
        ];
        let org_ids = vec![
            b"\x00\x00team-a\x00".to_vec(),
            b"\x01\x00team-b|team-a|team-b\x00".to_vec(),
            b"\x02\x00team a\x00".to_vec(),
            b"\x03\x00a||b\x00".to_vec(),
            b"\x00\x00..\x00".to_vec(),
            b"\x02\x00__markers__\x00".to_vec(),
            b"\x00\x00x\x00\x00y\x00".to_vec(),
            b"\x00\x01v\x00\x02application/grpc\x00".to_vec(),
            cat(&[b"\x01\x00", &b"a".repeat(151), b"\x00"]),
        ];
        let channelz = vec![
            cat(&[
                &[0],
                &GetTopChannelsRequest {
                    start_channel_id: 0,
                    max_results: 2,
                }
                .encode_to_vec(),
            ]),
            cat(&[
                &[1],
                &GetServersRequest {
                    start_server_id: 1,
                    max_results: -1,
                }
                .encode_to_vec(),
            ]),
            cat(&[
                &[2],
                &GetServerSocketsRequest {
                    server_id: 1,
                    start_socket_id: 0,
                    max_results: 0,
                }
                .encode_to_vec(),
            ]),
            cat(&[
                &[3],
                &tonic_hotpath::channelz::proto::GetServerRequest { server_id: 1 }.encode_to_vec(),
            ]),
            cat(&[
                &[4],
                &tonic_hotpath::channelz::proto::GetChannelRequest {
                    channel_id: i64::MAX,
                }
                .encode_to_vec(),
            ]),
            vec![5, 8, 3],
            vec![
                6, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1,
            ],
        ];
        let overrides = vec![
            b"overrides:\n  team-a:\n    rate: 10\n".to_vec(),
            b"overrides:\n  team-a:\n    max_in_flight: 8\n    rate: 100\n    burst: 200\n    work_rate: 10000\n    work_burst: 50000\n  \"007\":\n    rate: 5\n  team-c: null\n".to_vec(),
            b"overrides:\n  team-a:\n    burts: 3\n".to_vec(),
            b"multi_kv_config: {}\noverrides:\n  t:\n    work_burst: 1\n".to_vec(),
            b"overrides: [1, 2]\n---\nx: 1\n".to_vec(),
            b"overrides:\n  t:\n    rate: 1e300\n    burst: 4294967295\n    max_in_flight: -1\n".to_vec(),
        ];
        let binlog_filter = vec![
            b"*".to_vec(),
            b"*{h:64;m:8}\n/a.B/C".to_vec(),
            b"hotpath.echo.Echo/*,-hotpath.echo.Echo/UnaryEcho\n/hotpath.echo.Echo/UnaryEcho\n/hotpath.echo.Echo/X".to_vec(),
            b"*{h:1;m:2},pkg.Svc/*{m},pkg.Svc/Get".to_vec(),
            b"pkg.Svc/Get,pkg.Svc/Get{h}".to_vec(),
            b"*/Method".to_vec(),
            b"-s/m{h}".to_vec(),
            b"s/m{h:18446744073709551616}".to_vec(),
        ];
        let entry = GrpcLogEntry {
            call_id: 7,
            sequence_id_within_call: 1,
            r#type: 1,
            payload: Some(grpc_log_entry::Payload::Message(
                tonic_hotpath::binlog::proto::Message {
                    length: 5,
                    data: b"hello".to_vec().into(),
                },
            )),
            ..GrpcLogEntry::default()
        }
        .encode_to_vec();
        let mut varint = Vec::new();
        prost::encode_length_delimiter(entry.len(), &mut varint).unwrap();
        let grpc_framed = cat(&[&(entry.len() as u32).to_be_bytes(), &entry]);
        let varint_framed = cat(&[&varint, &entry]);
        let binlog_reader = vec![
            cat(&[&[6], &grpc_framed, &grpc_framed]),
            cat(&[&[7], &varint_framed, &varint_framed]),
            cat(&[&[6], &grpc_framed[..grpc_framed.len() - 1]]),
            vec![6, 0x7f, 0xff, 0xff, 0xff, 1, 2],
            vec![
                7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
            ],
            cat(&[&[2], &grpc_framed]),
        ];
        let gzip_hello = frame(true, &compress(Encoding::Gzip, b"\x0a\x05hello"));
        let stats_layer = vec![
            cat(&[
                &[0],
                b"\x00gzip\x00\x012S\x00",
                &[0xfe, 0xfe, 0x01, 0xff],
                &hello,
                &[0xfd],
                &[0xfe],
                b"\x03\x00\x00",
                &[0xfe, 0xff],
                &hello,
                &[0xfd],
            ]),
            cat(&[
                &[1],
                b"\x02gzip\x00",
                &[0xfe, 0xfe, 0xff],
                &hello,
                &[0xfd],
                b"\x01gzip\x00",
                &[0xfe],
                b"\x03\x00\x00",
                &[0xfe, 0xff],
                &gzip_hello,
                &[0xfd],
            ]),
            cat(&[
                &[1],
                &[0xfe, 0xfe, 0xff],
                &two,
                &[0xfd],
                b"\x03\x0013\x00\x04bad%20thing\x00",
                &[0xfe, 0xfe, 0xff, 0xfd],
            ]),
            cat(&[
                &[0],
                b"\x01gzip\x00",
                &[0xfe, 0xfe, 0x03, 0xff],
                &gzip_hello,
                &[0xfd],
                &[0xfe],
                b"\x03\x000\x00",
                &[0xfe, 0xff],
                &two,
                &[0xfd],
            ]),
            cat(&[
                &[0],
                &[0xfe, 0xfe, 0xff],
                &[0, 0, 0x10, 0, 0, 1, 2, 3],
                &[0xfd],
                &[0xfe, 0xfe, 0xff, 0xfd],
            ]),
        ];
        let report = tonic_hotpath::orca::OrcaLoadReport {
            cpu_utilization: 0.821,
            mem_utilization: 0.5847,
            rps_fractional: 100.0,
            request_cost: [("cost".to_owned(), 3456.32)].into(),
            utilization: [("util".to_owned(), 0.30499)].into(),
            ..Default::default()
        };
        let with = |choice: u8, header: (http::HeaderName, http::HeaderValue)| {
            cat(&[&[choice], header.1.as_bytes()])
        };
        let orca_reports = vec![
            with(
                0,
                tonic_hotpath::orca::ReportFormat::GrpcBinary.header(&report),
            ),
            with(
                2,
                tonic_hotpath::orca::ReportFormat::GrpcBinary.header(&report),
            ),
            with(
                1,
                tonic_hotpath::orca::ReportFormat::EnvoyBinary.header(&report),
            ),
            with(
                1,
                tonic_hotpath::orca::ReportFormat::EnvoyText.header(&report),
            ),
            with(
                1,
                tonic_hotpath::orca::ReportFormat::EnvoyJson.header(&report),
            ),
            cat(&[&[1], b"TEXT cpu_utilization:0.3, named_metrics.x:-1e300"]),
            cat(&[
                &[1],
                br#"JSON {"rpsFractional": "NaN", "namedMetrics": {"a": null}}"#,
            ]),
            cat(&[&[0], b"not base64!"]),
        ];
        vec![
            ("binlog_filter", binlog_filter),
            ("binlog_reader", binlog_reader),
            ("channelz", channelz),
            ("decompress", decompress),
            ("frames", frames),
            ("grpc_headers", grpc_headers),
            ("orca_reports", orca_reports),
            ("org_ids", org_ids),
            ("overrides", overrides),
            ("stats_layer", stats_layer),
        ]
    }
}
