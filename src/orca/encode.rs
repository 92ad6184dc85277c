//! A call's report encoded straight from its recorder's values over the
//! process's (gRFC A51: the call's win), into gRPC's base64 trailer value:
//! the bytes prost writes for the merged `OrcaLoadReport`, without building
//! it (no copy of either side's maps) and with one allocation, the value.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::iter::Peekable;

use bytes::Bytes;
use http::HeaderValue;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use super::BackendMetrics;
use crate::wire::base64::base64_encode_no_pad;

/// Field numbers of `xds.data.orca.v3.OrcaLoadReport`.
mod field {
    pub(super) const CPU_UTILIZATION: u32 = 1;
    pub(super) const MEM_UTILIZATION: u32 = 2;
    pub(super) const REQUEST_COST: u32 = 4;
    pub(super) const UTILIZATION: u32 = 5;
    pub(super) const RPS_FRACTIONAL: u32 = 6;
    pub(super) const EPS: u32 = 7;
    pub(super) const NAMED_METRICS: u32 = 8;
    pub(super) const APPLICATION_UTILIZATION: u32 = 9;
}

thread_local! {
    /// The encoded report before base64, reused by the thread's calls.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Scratch buffers above this are not kept (a huge report is rare).
const KEPT_SCRATCH: usize = 16 * 1024;

/// The `endpoint-load-metrics-bin` value of `call` over `process` (or
/// `call` alone): byte for byte `base64(merged.to_report().encode_to_vec())`.
pub(crate) fn grpc_binary_value(
    process: Option<&BackendMetrics>,
    call: &BackendMetrics,
) -> HeaderValue {
    let encoded = SCRATCH.try_with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        scratch.clear();
        encode_merged(process, call, &mut scratch);
        let value = base64_encode_no_pad(&scratch);
        if scratch.capacity() > KEPT_SCRATCH {
            *scratch = Vec::new();
        }
        value
    });
    // A thread being torn down has no scratch: encode into a fresh one.
    let encoded = encoded.unwrap_or_else(|_| {
        let mut fresh = Vec::new();
        encode_merged(process, call, &mut fresh);
        base64_encode_no_pad(&fresh)
    });
    HeaderValue::from_maybe_shared(Bytes::from(encoded)).expect("base64 is a valid header value")
}

/// Appends the encoded report of `call` over `process` to `out`.
pub(crate) fn encode_merged(
    process: Option<&BackendMetrics>,
    call: &BackendMetrics,
    out: &mut Vec<u8>,
) {
    let empty = BackendMetrics::default();
    let process = process.unwrap_or(&empty);
    let scalar = |pick: fn(&BackendMetrics) -> Option<f64>| pick(call).or(pick(process));
    double(out, field::CPU_UTILIZATION, scalar(|m| m.cpu_utilization));
    double(out, field::MEM_UTILIZATION, scalar(|m| m.mem_utilization));
    map(
        out,
        field::REQUEST_COST,
        &process.request_cost,
        &call.request_cost,
    );
    map(
        out,
        field::UTILIZATION,
        &process.utilization,
        &call.utilization,
    );
    double(out, field::RPS_FRACTIONAL, scalar(|m| m.qps));
    double(out, field::EPS, scalar(|m| m.eps));
    map(
        out,
        field::NAMED_METRICS,
        &process.named_metrics,
        &call.named_metrics,
    );
    double(
        out,
        field::APPLICATION_UTILIZATION,
        scalar(|m| m.application_utilization),
    );
}

/// A `double` field, left out at its default (0, and -0 as prost does).
fn double(out: &mut Vec<u8>, tag: u32, value: Option<f64>) {
    let value = value.unwrap_or(0.0);
    if value != 0.0 {
        encode_key(tag, WireType::SixtyFourBit, out);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

/// A `map<string, double>` field: one entry per name of either map, in name
/// order, `call`'s value where both have the name; as prost writes map
/// entries (a key or value at its default left out of the entry).
fn map(out: &mut Vec<u8>, tag: u32, process: &BTreeMap<String, f64>, call: &BTreeMap<String, f64>) {
    for (name, value) in Merged::new(process, call) {
        let key_len = if name.is_empty() {
            0
        } else {
            1 + encoded_len_varint(name.len() as u64) + name.len()
        };
        let value_len = if value != 0.0 { 9 } else { 0 };
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint((key_len + value_len) as u64, out);
        if key_len > 0 {
            encode_key(1, WireType::LengthDelimited, out);
            encode_varint(name.len() as u64, out);
            out.extend_from_slice(name.as_bytes());
        }
        if value_len > 0 {
            encode_key(2, WireType::SixtyFourBit, out);
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}

/// Two sorted maps as one, in name order, the second's value winning.
struct Merged<'a> {
    process: Peekable<std::collections::btree_map::Iter<'a, String, f64>>,
    call: Peekable<std::collections::btree_map::Iter<'a, String, f64>>,
}

impl<'a> Merged<'a> {
    fn new(process: &'a BTreeMap<String, f64>, call: &'a BTreeMap<String, f64>) -> Self {
        Self {
            process: process.iter().peekable(),
            call: call.iter().peekable(),
        }
    }
}

impl<'a> Iterator for Merged<'a> {
    type Item = (&'a str, f64);

    fn next(&mut self) -> Option<Self::Item> {
        let next = match (self.process.peek(), self.call.peek()) {
            (None, None) => return None,
            (Some(_), None) => self.process.next(),
            (None, Some(_)) => self.call.next(),
            (Some((p, _)), Some((c, _))) => match p.cmp(c) {
                std::cmp::Ordering::Less => self.process.next(),
                std::cmp::Ordering::Greater => self.call.next(),
                std::cmp::Ordering::Equal => {
                    self.process.next();
                    self.call.next()
                }
            },
        };
        next.map(|(name, value)| (name.as_str(), *value))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use prost::Message;

    use super::*;
    use crate::wire::base64::base64_decode;

    /// What prost writes for the merged report.
    fn prost_bytes(process: Option<&BackendMetrics>, call: &BackendMetrics) -> Vec<u8> {
        let mut merged = process.cloned().unwrap_or_default();
        merged.merge(call);
        merged.to_report().encode_to_vec()
    }

    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(f64::NAN),
            Just(1.0),
            any::<f64>(),
            0.0..1.0f64,
        ]
    }

    fn names() -> impl Strategy<Value = BTreeMap<String, f64>> {
        proptest::collection::btree_map("[a-c]{0,2}|[a-z0-9_.]{0,140}", value(), 0..5)
    }

    fn metrics() -> impl Strategy<Value = BackendMetrics> {
        let scalar = || proptest::option::of(value());
        (
            (scalar(), scalar(), scalar(), scalar(), scalar()),
            (names(), names(), names()),
        )
            .prop_map(
                |((cpu, mem, app, qps, eps), (utilization, request_cost, named))| BackendMetrics {
                    cpu_utilization: cpu,
                    mem_utilization: mem,
                    application_utilization: app,
                    qps,
                    eps,
                    utilization,
                    request_cost,
                    named_metrics: named,
                },
            )
    }

    proptest! {
        #[test]
        fn encodes_as_prost_does(process in proptest::option::of(metrics()), call in metrics()) {
            let mut direct = Vec::new();
            encode_merged(process.as_ref(), &call, &mut direct);
            prop_assert_eq!(&direct, &prost_bytes(process.as_ref(), &call));
            let value = grpc_binary_value(process.as_ref(), &call);
            prop_assert_eq!(base64_decode(value.as_bytes()).unwrap(), direct);
        }
    }

    #[test]
    fn the_calls_value_wins_per_name() {
        let mut process = BackendMetrics::default();
        process.utilization.insert("a".into(), 0.1);
        process.utilization.insert("b".into(), 0.2);
        let mut call = BackendMetrics::default();
        call.utilization.insert("b".into(), 0.9);
        call.utilization.insert("c".into(), 0.3);
        let merged: Vec<_> = Merged::new(&process.utilization, &call.utilization).collect();
        assert_eq!(merged, [("a", 0.1), ("b", 0.9), ("c", 0.3)]);
    }
}
