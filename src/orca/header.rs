//! Where a report rides in a response: the forms a server writes
//! ([`ReportFormat`]) and the reading of a call's trailers
//! ([`load_report_from`], grpc-go's `ToLoadReport`).

use http::{HeaderMap, HeaderName, HeaderValue};
use prost::Message;

use super::proto::xds::data::orca::v3::OrcaLoadReport;
use crate::wire::base64::{base64_decode, base64_encode_no_pad};
use crate::wire::headers::{NotOne, single_value};

/// gRPC's trailer for a per-call report (grpc-go's
/// `internal.TrailerMetadataKey`): the binary `OrcaLoadReport`, base64 on
/// the wire as every `-bin` value.
pub const GRPC_TRAILER: HeaderName = HeaderName::from_static("endpoint-load-metrics-bin");

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
}

impl ReportFormat {
    /// The header (name and value) that carries `report` in this form.
    pub fn header(self, report: &OrcaLoadReport) -> (HeaderName, HeaderValue) {
        match self {
            ReportFormat::GrpcBinary => (GRPC_TRAILER, grpc_binary_value(report)),
        }
    }
}

/// `report` encoded and base64'd, as `endpoint-load-metrics-bin` carries it.
pub(crate) fn grpc_binary_value(report: &OrcaLoadReport) -> HeaderValue {
    let encoded = base64_encode_no_pad(&report.encode_to_vec());
    HeaderValue::from_maybe_shared(bytes::Bytes::from(encoded))
        .expect("base64 is a valid header value")
}

/// Why a call's trailers hold no usable report ([`load_report_from`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct LoadReportError {
    kind: LoadReportErrorKind,
}

/// What was wrong with `endpoint-load-metrics-bin`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadReportErrorKind {
    /// More than one value (grpc-go: "multiple orca load reports found").
    Several(usize),
    /// The value is not base64.
    Base64,
    /// The bytes are not an `OrcaLoadReport`.
    Decode,
}

impl LoadReportError {
    /// What was wrong.
    pub fn kind(&self) -> &LoadReportErrorKind {
        &self.kind
    }
}

impl std::fmt::Display for LoadReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            LoadReportErrorKind::Several(count) => write!(
                f,
                "{count} values of endpoint-load-metrics-bin: multiple orca load reports"
            ),
            LoadReportErrorKind::Base64 => f.write_str("endpoint-load-metrics-bin is not base64"),
            LoadReportErrorKind::Decode => {
                f.write_str("endpoint-load-metrics-bin is not an OrcaLoadReport")
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
    let value = match single_value(headers, &GRPC_TRAILER) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn trailers(values: &[&[u8]]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert("grpc-status", HeaderValue::from_static("0"));
        for value in values {
            map.append(GRPC_TRAILER, HeaderValue::from_bytes(value).unwrap());
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
        while padded.len() % 4 != 0 {
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
