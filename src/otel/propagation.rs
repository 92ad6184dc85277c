//! gRFC A72's `grpc-trace-bin` propagator (OpenCensus's binary span
//! context, byte for byte as grpc-go's `GRPCTraceBinPropagator` writes it),
//! and the header carriers the tracing handler hands to any propagator.

use std::sync::LazyLock;

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::Context;
use opentelemetry::propagation::text_map_propagator::FieldIter;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};

use crate::wire::base64::{base64_decode, base64_encode_no_pad};

/// Moved to [`GrpcTraceBinPropagator::HEADER`].
#[deprecated(note = "use `GrpcTraceBinPropagator::HEADER`")]
pub const GRPC_TRACE_BIN: &str = GrpcTraceBinPropagator::HEADER;

/// The length of the binary form: the version byte, then three
/// (field id, value) pairs.
const BINARY_LEN: usize = 29;

static FIELDS: LazyLock<[String; 1]> =
    LazyLock::new(|| [GrpcTraceBinPropagator::HEADER.to_owned()]);

/// A [`TextMapPropagator`] for gRPC's `grpc-trace-bin` header (gRFC A72),
/// compatible with grpc-go's `GRPCTraceBinPropagator` and with OpenCensus
/// peers.
///
/// The value is OpenCensus's binary span context, 29 bytes: version `0`;
/// field `0` and the 16-byte trace id; field `1` and the 8-byte span id;
/// field `2` and the trace flags byte. Like any `-bin` value it is sent
/// base64-encoded (without padding, as grpc-go and tonic write it; padded
/// values are accepted). A missing, malformed or all-zero value extracts
/// nothing: the context is returned unchanged, never an error or a panic.
/// Trace state is not carried (the format has no field for it).
///
/// ```
/// use std::collections::HashMap;
///
/// use opentelemetry::Context;
/// use opentelemetry::propagation::TextMapPropagator;
/// use opentelemetry::trace::{
///     SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
/// };
/// use tonic_hotpath::otel::GrpcTraceBinPropagator;
///
/// let span = SpanContext::new(
///     TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
///     SpanId::from_hex("00f067aa0ba902b7").unwrap(),
///     TraceFlags::SAMPLED,
///     false,
///     TraceState::default(),
/// );
/// let propagator = GrpcTraceBinPropagator::new();
///
/// // Client: write the header for the span.
/// let mut headers = HashMap::new();
/// let cx = Context::new().with_remote_span_context(span.clone());
/// propagator.inject_context(&cx, &mut headers);
/// assert_eq!(headers["grpc-trace-bin"], "AABL+S81d7NNpqPOkp0ODkc2AQDwZ6oLqQK3AgE");
///
/// // Server: read it back as the remote parent.
/// let remote = propagator.extract(&headers);
/// assert_eq!(remote.span().span_context().trace_id(), span.trace_id());
/// assert!(remote.span().span_context().is_remote());
///
/// // Garbage extracts nothing.
/// let bad = HashMap::from([("grpc-trace-bin".to_owned(), "not base64!".to_owned())]);
/// assert!(!propagator.extract(&bad).has_active_span());
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct GrpcTraceBinPropagator {
    _private: (),
}

impl GrpcTraceBinPropagator {
    /// The header the propagator reads and writes, `grpc-trace-bin` (its
    /// one [`field`](TextMapPropagator::fields)). Its value is binary (a
    /// `-bin` key), so it travels base64-encoded.
    ///
    /// ```
    /// use opentelemetry::propagation::TextMapPropagator;
    /// use tonic_hotpath::otel::GrpcTraceBinPropagator;
    ///
    /// let propagator = GrpcTraceBinPropagator::new();
    /// let fields: Vec<&str> = propagator.fields().collect();
    /// assert_eq!(fields, [GrpcTraceBinPropagator::HEADER]);
    /// ```
    pub const HEADER: &str = "grpc-trace-bin";

    /// The propagator.
    #[must_use]
    pub const fn new() -> Self {
        Self { _private: () }
    }

    /// The 29-byte binary form of `span_context`, or `None` for an invalid
    /// (all-zero) one, which grpc-go does not send either.
    ///
    /// ```
    /// use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    /// use tonic_hotpath::otel::GrpcTraceBinPropagator;
    ///
    /// let span = SpanContext::new(
    ///     TraceId::from(1),
    ///     SpanId::from(2),
    ///     TraceFlags::SAMPLED,
    ///     false,
    ///     TraceState::default(),
    /// );
    /// let bytes = GrpcTraceBinPropagator::to_bytes(&span).unwrap();
    /// assert_eq!(bytes[..2], [0, 0]);
    /// let back = GrpcTraceBinPropagator::from_bytes(&bytes).unwrap();
    /// assert_eq!(back.span_id(), SpanId::from(2));
    /// assert!(GrpcTraceBinPropagator::to_bytes(&SpanContext::empty_context()).is_none());
    /// ```
    #[must_use]
    pub fn to_bytes(span_context: &SpanContext) -> Option<[u8; BINARY_LEN]> {
        if !span_context.is_valid() {
            return None;
        }
        let mut bytes = [0; BINARY_LEN];
        // bytes[0]: version 0; bytes[1]: field 0, the trace id.
        bytes[2..18].copy_from_slice(&span_context.trace_id().to_bytes());
        bytes[18] = 1;
        bytes[19..27].copy_from_slice(&span_context.span_id().to_bytes());
        bytes[27] = 2;
        bytes[28] = span_context.trace_flags().to_u8();
        Some(bytes)
    }

    /// The remote span context in `bytes`, or `None` unless they are
    /// exactly the 29-byte form with version 0 and fields 0, 1, 2 in order
    /// (as grpc-go requires) and valid (non-zero) trace and span ids.
    #[must_use]
    pub fn from_bytes(bytes: &[u8]) -> Option<SpanContext> {
        let bytes: &[u8; BINARY_LEN] = bytes.try_into().ok()?;
        if bytes[0] != 0 || bytes[1] != 0 || bytes[18] != 1 || bytes[27] != 2 {
            return None;
        }
        let mut trace_id = [0; 16];
        trace_id.copy_from_slice(&bytes[2..18]);
        let mut span_id = [0; 8];
        span_id.copy_from_slice(&bytes[19..27]);
        let span_context = SpanContext::new(
            TraceId::from_bytes(trace_id),
            SpanId::from_bytes(span_id),
            TraceFlags::new(bytes[28]),
            true,
            TraceState::default(),
        );
        span_context.is_valid().then_some(span_context)
    }
}

impl TextMapPropagator for GrpcTraceBinPropagator {
    fn inject_context(&self, cx: &Context, injector: &mut dyn Injector) {
        if let Some(bytes) = Self::to_bytes(cx.span().span_context()) {
            // Base64 output is ASCII: the conversion cannot fail.
            let value = String::from_utf8(base64_encode_no_pad(&bytes)).unwrap_or_default();
            injector.set(GrpcTraceBinPropagator::HEADER, value);
        }
    }

    fn extract_with_context(&self, cx: &Context, extractor: &dyn Extractor) -> Context {
        extractor
            .get(GrpcTraceBinPropagator::HEADER)
            .and_then(|value| base64_decode(value.trim().as_bytes()))
            .and_then(|bytes| Self::from_bytes(&bytes))
            .map_or_else(|| cx.clone(), |remote| cx.with_remote_span_context(remote))
    }

    fn fields(&self) -> FieldIter<'_> {
        FieldIter::new(&*FIELDS)
    }
}

/// Writes a propagator's fields into request headers. A field whose name or
/// value is not a valid header is left out (an [`Injector`] has no way to
/// report it).
pub(crate) struct HeaderInjector<'a>(pub(crate) &'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::try_from(value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Reads a propagator's fields from request headers (a value that is not
/// visible ASCII reads as absent).
pub(crate) struct HeaderExtractor<'a>(pub(crate) &'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// What grpc-go v1.85.0's `toBinary` (`stats/opentelemetry`) writes for
    /// trace id 4bf92f3577b34da6a3ce929d0e0e4736, span id 00f067aa0ba902b7,
    /// sampled (checked against the Go program in `interop/otel-go`).
    const GO_BYTES: [u8; BINARY_LEN] = [
        0, 0, 0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e,
        0x47, 0x36, 1, 0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7, 2, 1,
    ];

    fn span() -> SpanContext {
        SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        )
    }

    fn extract(value: &str) -> Context {
        let carrier =
            HashMap::from([(GrpcTraceBinPropagator::HEADER.to_owned(), value.to_owned())]);
        GrpcTraceBinPropagator::new().extract(&carrier)
    }

    #[test]
    fn binary_form_matches_grpc_go() {
        assert_eq!(GrpcTraceBinPropagator::to_bytes(&span()), Some(GO_BYTES));
        let parsed = GrpcTraceBinPropagator::from_bytes(&GO_BYTES).unwrap();
        assert_eq!(parsed.trace_id(), span().trace_id());
        assert_eq!(parsed.span_id(), span().span_id());
        assert_eq!(parsed.trace_flags(), TraceFlags::SAMPLED);
        assert!(parsed.is_remote());
    }

    #[test]
    fn header_value_is_unpadded_base64_and_round_trips() {
        let mut carrier = HashMap::new();
        let cx = Context::new().with_remote_span_context(span());
        GrpcTraceBinPropagator::new().inject_context(&cx, &mut carrier);
        let value = &carrier[GrpcTraceBinPropagator::HEADER];
        assert_eq!(value, "AABL+S81d7NNpqPOkp0ODkc2AQDwZ6oLqQK3AgE");
        assert_eq!(
            base64_decode(value.as_bytes()).as_deref(),
            Some(&GO_BYTES[..])
        );
        let remote = extract(value);
        assert_eq!(remote.span().span_context().span_id(), span().span_id());
        // Padded base64 (as some peers write it) reads the same.
        let padded = extract("AABL+S81d7NNpqPOkp0ODkc2AQDwZ6oLqQK3AgE=");
        assert_eq!(padded.span().span_context().span_id(), span().span_id());
    }

    #[test]
    fn unsampled_flags_travel() {
        let mut unsampled = GO_BYTES;
        unsampled[28] = 0;
        let parsed = GrpcTraceBinPropagator::from_bytes(&unsampled).unwrap();
        assert!(!parsed.is_sampled());
    }

    #[test]
    fn nothing_is_injected_without_a_valid_span() {
        let mut carrier = HashMap::new();
        GrpcTraceBinPropagator::new().inject_context(&Context::new(), &mut carrier);
        assert!(carrier.is_empty());
    }

    #[test]
    fn malformed_input_extracts_nothing() {
        let mut cases: Vec<Vec<u8>> = vec![
            Vec::new(),
            GO_BYTES[..28].to_vec(),
            [&GO_BYTES[..], &[0]].concat(),
        ];
        for (index, wrong) in [(0, 1), (1, 1), (18, 0), (27, 1)] {
            let mut bytes = GO_BYTES;
            bytes[index] = wrong;
            cases.push(bytes.to_vec());
        }
        // All-zero trace id, then all-zero span id.
        let mut zero_trace = GO_BYTES;
        zero_trace[2..18].fill(0);
        cases.push(zero_trace.to_vec());
        let mut zero_span = GO_BYTES;
        zero_span[19..27].fill(0);
        cases.push(zero_span.to_vec());
        for bytes in cases {
            assert!(
                GrpcTraceBinPropagator::from_bytes(&bytes).is_none(),
                "{bytes:?}"
            );
            let value = String::from_utf8(base64_encode_no_pad(&bytes)).unwrap();
            assert!(!extract(&value).has_active_span(), "{value}");
        }
        for value in [
            "",
            "!!!!",
            "AAB",
            "AABL+S81d7NNpqPOkp0ODkc2AQDwZ6oLqQK3Ag\u{e9}",
        ] {
            assert!(!extract(value).has_active_span(), "{value:?}");
        }
        // No header at all.
        let none = GrpcTraceBinPropagator::new().extract(&HashMap::<String, String>::new());
        assert!(!none.has_active_span());
    }

    #[test]
    fn fields_name_the_header() {
        let propagator = GrpcTraceBinPropagator::new();
        assert_eq!(
            propagator.fields().collect::<Vec<_>>(),
            [GrpcTraceBinPropagator::HEADER]
        );
    }

    #[test]
    fn header_carriers_skip_invalid_fields() {
        let mut headers = HeaderMap::new();
        let mut injector = HeaderInjector(&mut headers);
        injector.set("traceparent", "00-ab-cd-01".to_owned());
        injector.set("bad header", "x".to_owned());
        injector.set("x-bad-value", "line\nbreak".to_owned());
        assert_eq!(headers.len(), 1);
        let extractor = HeaderExtractor(&headers);
        assert_eq!(extractor.get("traceparent"), Some("00-ab-cd-01"));
        assert_eq!(extractor.keys(), ["traceparent"]);
    }
}
