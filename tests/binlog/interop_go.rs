//! The crate's binary log against grpc-go's, entry by entry: the program in
//! `interop/binlog-go` runs its script of calls between a grpc-go client
//! and server with grpc-go's binary logging on, [`Script`] runs the same
//! calls between a tonic client and server with the crate's [`BinaryLog`],
//! under each filter of the README; both logs are decoded by the Go
//! program (so the crate's file is proven readable by grpc-go's types) and
//! compared as grpc-go's own end-to-end test compares: timestamps, call
//! ids and ports ignored, metadata sorted by key. What still differs is
//! listed in [`KNOWN_DIFFERENCES`], each with its reason, and the test
//! fails on any other difference.
//!
//! Needs `go` on PATH; without it the test prints why and passes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::go_interop;
use crate::script::Script;
use tonic_hotpath::binlog::{BinaryLog, FileSink, Filter, Framing};

/// The filters of the README, each run once on each side.
const FILTERS: [&str; 3] = [
    "*",
    "*{h:64;m:8}",
    "hotpath.echo.Echo/*,-hotpath.echo.Echo/UnaryEcho",
];

/// What differs between the two logs, once the rules of
/// [`known_differences`] are applied to grpc-go's entries, and why.
const KNOWN_DIFFERENCES: [(&str, &str); 5] = [
    (
        "date header",
        "hyper's HTTP/2 server adds a `date` header to every response, so a client of a \
         tonic server logs it among the server's headers (or trailers, for a trailers-only \
         answer), as a grpc-go client of a tonic server would: `date` is not one of gRPC's \
         omissions; a grpc-go server sends none",
    ),
    (
        "status messages",
        "grpc-go's own status texts (\"context canceled\", \"context deadline exceeded\", \
         \"unknown method Nope for service ...\") are its library's words: tonic's server \
         answers a passed deadline with \"Timeout expired\" and an unknown method with no \
         message, and a server that sees its client reset the stream ends with no message; \
         the codes agree",
    ),
    (
        "bidi server interleaving",
        "on a bidirectional stream the server's entries in each direction come in the same \
         order, but how the two directions interleave is each library's: tonic sends the \
         response headers as soon as the handler returns its response stream (grpc-go: with \
         the first response), and its encoder writes the responses it has ready together, \
         after reading the requests that arrived together (grpc-go: one write per message)",
    ),
    (
        "unknown method client message",
        "a client's CLIENT_MESSAGE to an unknown method races the server's trailers-only answer \
         in grpc-go (absent in ~5% of its runs); it is left out of that call's comparison",
    ),
    (
        "deadline server code",
        "grpc-go's server ends a passed deadline with CANCELLED or, rarely, DEADLINE_EXCEEDED; \
         either is accepted",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_matches_grpc_gos_entry_by_entry() {
    let Some(go) = go_interop::go_program("binlog-go") else {
        return;
    };
    let dir = temp_dir("interop");
    for (i, filter) in FILTERS.iter().enumerate() {
        let go_log = dir.join(format!("go-{i}.binlog"));
        let go_port = run_go(&go, &go_log, filter);
        let rust_log = dir.join(format!("rust-{i}.binlog"));
        let rust_port = run_rust(&rust_log, filter, Framing::Grpc).await;
        let go_calls = calls(&decode(&go, &go_log, "grpc"), go_port);
        let rust_calls = calls(&decode(&go, &rust_log, "grpc"), rust_port);
        let go_calls = known_differences(go_calls);
        let rust_calls = known_differences(rust_calls);
        assert_eq!(
            go_calls.keys().collect::<Vec<_>>(),
            rust_calls.keys().collect::<Vec<_>>(),
            "filter {filter}: the calls logged"
        );
        for (call, go_entries) in &go_calls {
            assert_eq!(
                &rust_calls[call], go_entries,
                "filter {filter}, {call}: crate (left) against grpc-go (right); \
                 differences already accepted: {KNOWN_DIFFERENCES:?}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// grpc-java's varint framing: the same log, decoded by the Go program,
/// reads the same as in grpc-go's framing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_varint_framed_log_reads_the_same_in_go() {
    let Some(go) = go_interop::go_program("binlog-go") else {
        return;
    };
    let dir = temp_dir("varint");
    let grpc = dir.join("grpc.binlog");
    let varint = dir.join("varint.binlog");
    let grpc_port = run_rust(&grpc, "*", Framing::Grpc).await;
    let varint_port = run_rust(&varint, "*", Framing::Varint).await;
    // The two runs differ only in their `date` headers.
    let grpc_calls = known_differences(calls(&decode(&go, &grpc, "grpc"), grpc_port));
    let varint_calls = known_differences(calls(&decode(&go, &varint, "varint"), varint_port));
    assert_eq!(
        grpc_calls.len(),
        13,
        "7 calls, the unknown method's on the client only"
    );
    assert_eq!(varint_calls, grpc_calls);
    std::fs::remove_dir_all(&dir).ok();
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("binlog-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs grpc-go's script under `filter` into `log`; its server's port.
fn run_go(go: &Path, log: &Path, filter: &str) -> u16 {
    let output = Command::new(go)
        .arg("run")
        .arg(log)
        .env("GRPC_BINARY_LOG_FILTER", filter)
        .output()
        .expect("run binlog-go");
    assert!(
        output.status.success(),
        "binlog-go run failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line: Value = serde_json::from_slice(&output.stdout).expect("binlog-go's address line");
    port_of(line["server_address"].as_str().unwrap())
}

/// Runs the script with tonic and the crate's log under `filter`, into
/// `path`; the server's port.
async fn run_rust(path: &Path, filter: &str, framing: Framing) -> u16 {
    let filter = Filter::parse(filter).expect("a valid filter");
    let log = BinaryLog::new(filter, FileSink::create(path, framing).unwrap()).unwrap();
    let mut script = Script::start(&log).await;
    script.run().await;
    log.shutdown().expect("the log is written");
    assert_eq!(log.counts().dropped, 0);
    script.addr.port()
}

/// The entries of `log`, decoded by the Go program.
fn decode(go: &Path, log: &Path, framing: &str) -> Vec<Value> {
    let output = Command::new(go)
        .arg("decode")
        .arg(log)
        .arg(framing)
        .output()
        .expect("run binlog-go decode");
    assert!(
        output.status.success(),
        "binlog-go decode {} failed:\n{}",
        log.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The log's entries grouped by call and side, in the order the calls
/// were made, each entry as one comparable line: keyed by `"<n> <method>
/// <logger>"` (the n-th call logged by the client; a server's entries go
/// with the client call they answer).
fn calls(entries: &[Value], server_port: u16) -> BTreeMap<String, Vec<String>> {
    let mut order: Vec<(u64, String)> = Vec::new();
    let mut groups: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    let mut client_calls = 0;
    let mut method_of_call: BTreeMap<u64, String> = BTreeMap::new();
    for entry in entries {
        assert!(entry["timestamp"].is_string(), "{entry}");
        let call_id: u64 = entry["call_id"].as_str().unwrap().parse().unwrap();
        if !groups.contains_key(&call_id) {
            let logger = entry["logger"].as_str().unwrap();
            let method = entry["client_header"]["method_name"]
                .as_str()
                .unwrap_or("?")
                .to_owned();
            if logger == "LOGGER_CLIENT" {
                client_calls += 1;
            }
            method_of_call.insert(call_id, method.clone());
            let side = logger.trim_start_matches("LOGGER_").to_lowercase();
            order.push((call_id, format!("{client_calls:02} {method} {side}")));
        }
        groups.entry(call_id).or_default().push(entry);
    }
    order
        .into_iter()
        .map(|(call_id, key)| {
            let mut group = groups.remove(&call_id).unwrap();
            group.sort_by_key(|entry| sequence(entry));
            let lines = group.iter().map(|e| line(e, server_port)).collect();
            (key, lines)
        })
        .collect()
}

fn sequence(entry: &Value) -> u64 {
    entry["sequence_id_within_call"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn port_of(address: &str) -> u16 {
    address.rsplit(':').next().unwrap().parse().unwrap()
}

/// One entry as a line, without what the comparison ignores: timestamp,
/// call id, the client's port; the server's address and the authority
/// are checked against the server's port and written `server-addr`.
fn line(entry: &Value, server_port: u16) -> String {
    let mut out = format!(
        "seq={} {} {}",
        sequence(entry),
        text(&entry["logger"]),
        text(&entry["type"]).trim_start_matches("EVENT_TYPE_")
    );
    let peer = &entry["peer"];
    if !peer.is_null() {
        let port = peer["ip_port"].as_u64().unwrap_or(0);
        let who = if port == u64::from(server_port) {
            "server-addr"
        } else {
            "client-port"
        };
        out += &format!(
            " peer={}:{}:{who}",
            text(&peer["type"]),
            text(&peer["address"])
        );
    }
    if let Some(header) = entry.get("client_header") {
        let authority = text(&header["authority"]);
        assert_eq!(authority, format!("127.0.0.1:{server_port}"), "{entry}");
        let timeout = match header.get("timeout") {
            None => "-".to_owned(),
            Some(timeout) => {
                let seconds: f64 = text(timeout).trim_end_matches('s').parse().unwrap();
                assert!(seconds > 0.0 && seconds <= 0.1, "{entry}");
                "set".to_owned()
            }
        };
        out += &format!(
            " method={} authority=server-addr timeout={timeout} md={}",
            text(&header["method_name"]),
            metadata(&header["metadata"])
        );
    }
    if let Some(header) = entry.get("server_header") {
        out += &format!(" md={}", metadata(&header["metadata"]));
    }
    if let Some(message) = entry.get("message") {
        out += &format!(
            " length={} data={}",
            message["length"].as_u64().unwrap_or(0),
            text(&message["data"])
        );
    }
    if let Some(trailer) = entry.get("trailer") {
        out += &format!(
            " md={} status={} message={:?} details={}",
            metadata(&trailer["metadata"]),
            trailer["status_code"].as_u64().unwrap_or(0),
            text(&trailer["status_message"]),
            text(&trailer["status_details"])
        );
    }
    if entry["payload_truncated"].as_bool() == Some(true) {
        out += " TRUNCATED";
    }
    out
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// Metadata as sorted `key=value` (values base64, as protojson prints
/// bytes); `unset` when the message is absent (grpc-go always sets it).
fn metadata(metadata: &Value) -> String {
    if metadata.is_null() {
        return "unset".to_owned();
    }
    let mut entries: Vec<String> = metadata["entry"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| format!("{}={}", text(&e["key"]), text(&e["value"])))
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    format!("[{}]", entries.join(","))
}

/// Applies [`KNOWN_DIFFERENCES`] to one log's calls (both logs get the
/// same treatment, so an entry that matches already is unchanged).
fn known_differences(calls: BTreeMap<String, Vec<String>>) -> BTreeMap<String, Vec<String>> {
    calls
        .into_iter()
        .map(|(key, lines)| {
            let server = key.ends_with(" server");
            let lines = if key.contains("/Nope ") {
                // "unknown method client message": compared without its
                // message and sequence ids.
                lines
                    .into_iter()
                    .filter(|line| !line.contains(" CLIENT_MESSAGE"))
                    .map(|line| line.split_once(' ').unwrap().1.to_owned())
                    .collect()
            } else if server && key.contains("/BidirectionalStreamingEcho ") {
                bidi_interleaving_ignored(lines)
            } else {
                lines
            };
            let lines = lines
                .into_iter()
                .map(|line| status_message_cleared(without_date(line), server))
                .collect();
            (key, lines)
        })
        .collect()
}

/// "date header": `date` left out of the metadata.
fn without_date(line: String) -> String {
    let Some(start) = line.find("date=") else {
        return line;
    };
    let end = line[start..]
        .find([',', ']'])
        .map_or(line.len(), |end| start + end);
    let (before, after) = (&line[..start], &line[end..]);
    let after = after.strip_prefix(',').unwrap_or(after);
    format!("{before}{after}")
}

/// "bidi server interleaving": the client's entries (its header,
/// messages and half-close), then the server's, each in order, without
/// sequence ids.
fn bidi_interleaving_ignored(lines: Vec<String>) -> Vec<String> {
    let bodies = lines
        .iter()
        .map(|line| line.split_once(' ').unwrap().1.to_owned());
    let (from_client, from_server): (Vec<String>, Vec<String>) =
        bodies.partition(|body| body.contains(" CLIENT_"));
    from_client.into_iter().chain(from_server).collect()
}

/// "status messages" and "deadline server code": the status message of
/// a call that did not end with its handler's own status is left out,
/// and a server's CANCELLED or DEADLINE_EXCEEDED is one code.
fn status_message_cleared(line: String, server: bool) -> String {
    let Some((head, status)) = line.split_once(" status=") else {
        return line;
    };
    let (code, rest) = status.split_once(' ').unwrap();
    let library_text = matches!((server, code), (true, "1" | "4") | (false, "4" | "12"));
    if !library_text {
        return line;
    }
    let code = if server { "1|4" } else { code };
    let details = rest.rsplit_once(" details=").map(|(_, d)| d).unwrap_or("");
    format!("{head} status={code} message=(library's) details={details}")
}
