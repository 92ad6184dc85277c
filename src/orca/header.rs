//! Where a report rides in a response: the forms a server writes
//! ([`ReportFormat`]) and the reading of a call's trailers
//! ([`load_report_from`], grpc-go's `ToLoadReport`), and Envoy's
//! `endpoint-load-metrics` ([`parse_endpoint_load_metrics`]).

use http::{HeaderMap, HeaderName, HeaderValue};
use prost::Message;

use super::envoy;
use super::proto::xds::data::orca::v3::OrcaLoadReport;
use crate::wire::base64::{base64_decode, base64_encode_no_pad};
use crate::wire::headers::{NotOne, single_value};

/// Moved to [`ReportFormat::GRPC_TRAILER`].
#[deprecated(note = "use `ReportFormat::GRPC_TRAILER`")]
pub const GRPC_TRAILER: HeaderName = ReportFormat::GRPC_TRAILER;

/// Moved to [`ReportFormat::ENVOY_HEADER`].
#[deprecated(note = "use `ReportFormat::ENVOY_HEADER`")]
pub const ENVOY_HEADER: HeaderName = ReportFormat::ENVOY_HEADER;

/// How a server writes a call's report (the `orca` server layer's
/// `format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReportFormat {
    /// gRPC's form: `endpoint-load-metrics-bin`, the encoded
    /// `OrcaLoadReport` (base64 without padding on the wire). Read by
    /// grpc-go, grpc-java, C-core and grpc-js, by Envoy, and by this
    /// crate's client side.
    #[default]
    GrpcBinary,
    /// Envoy's binary form: `endpoint-load-metrics: BIN <base64>`, the
    /// encoded report in padded standard base64, as Envoy's
    /// `Base64::decode` wants it. An empty report (which encodes to no
    /// bytes, and which Envoy refuses) is written as an explicit zero
    /// `cpu_utilization`: the same report.
    EnvoyBinary,
    /// Envoy's native HTTP form: `endpoint-load-metrics: TEXT
    /// cpu_utilization:0.5,eps:2.0,named_metrics.hits:3.0`. It carries
    /// `cpu_utilization`, `mem_utilization`, `application_utilization`,
    /// `rps_fractional` and `eps` (those set: not zero), and the named
    /// metrics; Envoy has no `TEXT` key for the named utilizations, the
    /// request costs or the deprecated `rps`, which are left out. Left out
    /// too, as Envoy would refuse the whole header for them: a
    /// non-finite value, and a named metric whose name is empty or not
    /// printable ASCII without spaces, `,` and `:`. A report with nothing
    /// to write is written as `TEXT cpu_utilization:0`.
    EnvoyText,
    /// Envoy's JSON form: `endpoint-load-metrics: JSON {...}`, the
    /// report's proto3 JSON with the proto field names
    /// (`{"cpu_utilization":0.5,"named_metrics":{"hits":3.0}}`): every
    /// field, names escaped to ASCII, and NaN and infinities as proto3
    /// JSON's strings (which Envoy's protobuf parser reads).
    EnvoyJson,
}

impl ReportFormat {
    /// gRPC's trailer for a per-call report (grpc-go's
    /// `internal.TrailerMetadataKey`), written by
    /// [`GrpcBinary`](Self::GrpcBinary) and read by [`load_report_from`]:
    /// the binary `OrcaLoadReport`, base64 on the wire as every `-bin`
    /// value.
    ///
    /// ```
    /// use tonic_hotpath::orca::{OrcaLoadReport, ReportFormat};
    ///
    /// let (name, _) = ReportFormat::GrpcBinary.header(&OrcaLoadReport::default());
    /// assert_eq!(name, ReportFormat::GRPC_TRAILER);
    /// ```
    pub const GRPC_TRAILER: HeaderName = HeaderName::from_static("endpoint-load-metrics-bin");

    /// Envoy's header for a report (`endpoint-load-metrics`), written by
    /// the three `Envoy*` forms, its value prefixed by its form: `BIN `,
    /// `TEXT ` or `JSON `.
    pub const ENVOY_HEADER: HeaderName = HeaderName::from_static("endpoint-load-metrics");

    /// The header (name and value) that carries `report` in this form.
    pub fn header(self, report: &OrcaLoadReport) -> (HeaderName, HeaderValue) {
        match self {
            ReportFormat::GrpcBinary => (Self::GRPC_TRAILER, grpc_binary_value(report)),
            ReportFormat::EnvoyBinary => (Self::ENVOY_HEADER, envoy::bin_value(report)),
            ReportFormat::EnvoyText => (Self::ENVOY_HEADER, envoy::text_value(report)),
            ReportFormat::EnvoyJson => (Self::ENVOY_HEADER, envoy::json_value(report)),
        }
    }
}

/// `report` encoded and base64'd, as `endpoint-load-metrics-bin` carries it.
pub(crate) fn grpc_binary_value(report: &OrcaLoadReport) -> HeaderValue {
    let encoded = base64_encode_no_pad(&report.encode_to_vec());
    HeaderValue::from_maybe_shared(bytes::Bytes::from(encoded))
        .expect("base64 is a valid header value")
}

/// Why a call's trailers hold no usable report ([`load_report_from`]), or
/// an `endpoint-load-metrics` value no report
/// ([`parse_endpoint_load_metrics`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct LoadReportError {
    kind: LoadReportErrorKind,
}

/// What was wrong with `endpoint-load-metrics-bin`, or with an
/// `endpoint-load-metrics` value (as Envoy's `orca_parser.cc` refuses it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadReportErrorKind {
    /// More than one value (grpc-go: "multiple orca load reports found").
    Several(usize),
    /// The value is not base64.
    Base64,
    /// The bytes are not an `OrcaLoadReport`.
    Decode,
    /// An `endpoint-load-metrics` value starting with none of `BIN `,
    /// `TEXT `, `JSON ` ("unsupported ORCA header format").
    UnsupportedFormat,
    /// A `TEXT` metric with no name, or `named_metrics.` with nothing after
    /// it.
    EmptyMetricName,
    /// A `TEXT` metric (named) with no value.
    EmptyMetricValue(String),
    /// A `TEXT` metric (named) whose value is not a number.
    BadNumber(String),
    /// A `TEXT` metric (named) whose value is NaN or infinite.
    NonFinite(String),
    /// A `TEXT` metric name Envoy does not know (named).
    UnknownMetric(String),
    /// A `TEXT` metric named twice (named).
    DuplicateMetric(String),
    /// A `TEXT` named metric whose name is not UTF-8.
    NotUtf8,
    /// A `JSON` value protobuf's JSON parser refuses (why).
    Json(&'static str),
}

impl LoadReportError {
    /// What was wrong.
    pub fn kind(&self) -> &LoadReportErrorKind {
        &self.kind
    }
}

impl std::fmt::Display for LoadReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            LoadReportErrorKind::Several(count) => write!(
                f,
                "{count} values of endpoint-load-metrics-bin: multiple orca load reports"
            ),
            LoadReportErrorKind::Base64 => f.write_str("endpoint-load-metrics-bin is not base64"),
            LoadReportErrorKind::Decode => {
                f.write_str("endpoint-load-metrics-bin is not an OrcaLoadReport")
            }
            LoadReportErrorKind::UnsupportedFormat => f.write_str("unsupported ORCA header format"),
            LoadReportErrorKind::EmptyMetricName => {
                f.write_str("endpoint-load-metrics: empty metric name")
            }
            LoadReportErrorKind::EmptyMetricValue(name) => {
                write!(f, "endpoint-load-metrics: metric {name:?} has no value")
            }
            LoadReportErrorKind::BadNumber(name) => {
                write!(f, "endpoint-load-metrics: metric {name:?} is not a number")
            }
            LoadReportErrorKind::NonFinite(name) => {
                write!(
                    f,
                    "endpoint-load-metrics: metric {name:?} is NaN or infinite"
                )
            }
            LoadReportErrorKind::UnknownMetric(name) => {
                write!(f, "endpoint-load-metrics: unsupported metric name {name:?}")
            }
            LoadReportErrorKind::DuplicateMetric(name) => {
                write!(
                    f,
                    "endpoint-load-metrics contains duplicate metric {name:?}"
                )
            }
            LoadReportErrorKind::NotUtf8 => {
                f.write_str("endpoint-load-metrics: a named metric's name is not UTF-8")
            }
            LoadReportErrorKind::Json(why) => {
                write!(f, "endpoint-load-metrics: invalid JSON: {why}")
            }
        }
    }
}

impl std::error::Error for LoadReportError {}

/// The report in a call's trailers (or a trailers-only response's headers),
/// with grpc-go's `ToLoadReport` rules: no `endpoint-load-metrics-bin` is
/// `Ok(None)`; more than one value, or one that does not decode, is an
/// error (never a panic).
///
/// ```
/// use http::HeaderMap;
/// use tonic_hotpath::orca::{load_report_from, OrcaLoadReport, ReportFormat};
///
/// let report = OrcaLoadReport { cpu_utilization: 0.5, ..Default::default() };
/// let (name, value) = ReportFormat::GrpcBinary.header(&report);
/// let mut trailers = HeaderMap::new();
/// trailers.insert(name, value);
/// assert_eq!(load_report_from(&trailers).unwrap(), Some(report));
///
/// trailers.append("endpoint-load-metrics-bin", "AA".parse().unwrap());
/// assert!(load_report_from(&trailers).is_err());
/// ```
pub fn load_report_from(headers: &HeaderMap) -> Result<Option<OrcaLoadReport>, LoadReportError> {
    let value = match single_value(headers, &ReportFormat::GRPC_TRAILER) {
        Ok(value) => value,
        Err(NotOne::Missing) => return Ok(None),
        Err(NotOne::Several(count)) => {
            return Err(LoadReportError {
                kind: LoadReportErrorKind::Several(count),
            });
        }
    };
    let bytes = base64_decode(value.as_bytes()).ok_or(LoadReportError {
        kind: LoadReportErrorKind::Base64,
    })?;
    OrcaLoadReport::decode(bytes.as_slice())
        .map(Some)
        .map_err(|_| LoadReportError {
            kind: LoadReportErrorKind::Decode,
        })
}

/// A report from an `endpoint-load-metrics` value, with the rules of
/// Envoy's `parseOrcaLoadReportHeaders` (`source/common/orca/orca_parser.cc`):
///
/// - `BIN <base64>`: padded standard base64 (Envoy's `Base64::decode`) of
///   a non-empty encoded report;
/// - `TEXT name:value,...`: comma-separated, each token trimmed and empty
///   ones skipped, split at its first `:`; the names
///   `cpu_utilization`, `mem_utilization`, `application_utilization`,
///   `rps_fractional`, `eps` and `named_metrics.<name>`; a value is what
///   absl's `SimpleAtod` reads (surrounding spaces, a leading `+`,
///   exponents), finite, of any sign; an unknown name, a name twice, an
///   empty name or value is an error;
/// - `JSON {...}`: proto3 JSON of the report as protobuf's parser reads it
///   (either field name, numbers or numeric strings, `null` for unset; an
///   unknown field, a field or map key twice, or anything after the object
///   is an error);
/// - anything else is [`LoadReportErrorKind::UnsupportedFormat`].
///
/// It reads the value as given: an HTTP stack strips a value's
/// surrounding whitespace, which is why the encoders never end one with a
/// space. Never panics, whatever the bytes.
///
/// ```
/// use tonic_hotpath::orca::{parse_endpoint_load_metrics, OrcaLoadReport, ReportFormat};
/// use http::HeaderValue;
///
/// let value = HeaderValue::from_static("TEXT cpu_utilization:0.7, named_metrics.foo:123");
/// let report = parse_endpoint_load_metrics(&value).unwrap();
/// assert_eq!(report.cpu_utilization, 0.7);
/// assert_eq!(report.named_metrics["foo"], 123.0);
///
/// let (name, value) = ReportFormat::EnvoyJson.header(&report);
/// assert_eq!(name, "endpoint-load-metrics");
/// assert_eq!(parse_endpoint_load_metrics(&value).unwrap(), report);
///
/// assert!(parse_endpoint_load_metrics(&HeaderValue::from_static("TEXT cpu:1")).is_err());
/// ```
pub fn parse_endpoint_load_metrics(value: &HeaderValue) -> Result<OrcaLoadReport, LoadReportError> {
    envoy::parse(value.as_bytes()).map_err(|kind| LoadReportError { kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trailers(values: &[&[u8]]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert("grpc-status", HeaderValue::from_static("0"));
        for value in values {
            map.append(
                ReportFormat::GRPC_TRAILER,
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn reads_grpc_go_rules() {
        assert!(load_report_from(&trailers(&[])).unwrap().is_none());
        let report = OrcaLoadReport {
            cpu_utilization: 0.821,
            ..OrcaLoadReport::default()
        };
        let value = grpc_binary_value(&report);
        // Padded or not, as tonic reads `-bin` values.
        let mut padded = value.as_bytes().to_vec();
        while !padded.len().is_multiple_of(4) {
            padded.push(b'=');
        }
        for form in [value.as_bytes(), padded.as_slice()] {
            assert_eq!(
                load_report_from(&trailers(&[form])).unwrap(),
                Some(report.clone())
            );
        }
        let both = load_report_from(&trailers(&[value.as_bytes(), value.as_bytes()]));
        assert_eq!(both.unwrap_err().kind(), &LoadReportErrorKind::Several(2));
        let junk = load_report_from(&trailers(&[b"not base64!"]));
        assert_eq!(junk.unwrap_err().kind(), &LoadReportErrorKind::Base64);
        // A field 1 of wire type 7 (no such type).
        let bad = base64_encode_no_pad(&[0x0f, 0x00]);
        let bad = load_report_from(&trailers(&[&bad]));
        assert_eq!(bad.unwrap_err().kind(), &LoadReportErrorKind::Decode);
        // An empty value is an empty report, as proto.Unmarshal reads it.
        assert_eq!(
            load_report_from(&trailers(&[b""])).unwrap(),
            Some(OrcaLoadReport::default())
        );
    }
}
