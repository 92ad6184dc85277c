//! The errors of an org id read off the wire: [`InvalidOrgIdError`] (Cortex's
//! rules) and [`OrgIdError`] (the header as a whole). Public as
//! `tonic_hotpath::tenant::{InvalidOrgIdError, OrgIdError}`.

use std::fmt;

use tonic::{Code, Status};

use super::org_id::MAX_ORG_ID_LEN;

/// Why a value is not a valid org id (Cortex's tenant rules).
///
/// ```
/// use tonic_hotpath::tenant::{InvalidOrgIdError, OrgId};
///
/// let err = OrgId::new("team a").unwrap_err();
/// assert_eq!(err, InvalidOrgIdError::Character { byte: b' ', position: 4 });
/// assert_eq!(err.to_string(), "org id has unsupported character ' ' at byte 4");
/// assert_eq!(OrgId::new("..").unwrap_err(), InvalidOrgIdError::DotSegment);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidOrgIdError {
    /// A byte outside `a-z A-Z 0-9 ! - _ . * ' ( )`.
    Character {
        /// The offending byte (may be non-ASCII: header values allow `obs-text`).
        byte: u8,
        /// Its byte offset in the header value.
        position: usize,
    },
    /// The id is longer than [`OrgId::MAX_LEN`](crate::tenant::OrgId::MAX_LEN) bytes.
    TooLong {
        /// The id's length in bytes.
        len: usize,
    },
    /// The id is `.` or `..`.
    DotSegment,
    /// The id is empty (an empty header value, or an empty member of `a||b`).
    Empty {
        /// Byte offset in the header value where the empty id sits.
        position: usize,
    },
    /// The id is a name Cortex reserves for its storage layout.
    Reserved {
        /// The reserved name.
        name: &'static str,
    },
}

impl fmt::Display for InvalidOrgIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Character { byte, position } => write!(
                f,
                "org id has unsupported character '{}' at byte {position}",
                byte.escape_ascii()
            ),
            Self::TooLong { len } => write!(
                f,
                "org id is {len} bytes long, the limit is {MAX_ORG_ID_LEN}"
            ),
            Self::DotSegment => f.write_str("org id is '.' or '..'"),
            Self::Empty { position } => write!(f, "org id is empty at byte {position}"),
            Self::Reserved { name } => write!(f, "org id '{name}' is reserved"),
        }
    }
}

impl std::error::Error for InvalidOrgIdError {}

/// Why an org id could not be taken from a request's `x-scope-orgid` header.
///
/// Converts into the `tonic::Status` a server answers with:
///
/// ```
/// use tonic::Code;
/// use tonic::metadata::MetadataMap;
/// use tonic_hotpath::tenant::{self, InvalidOrgIdError, OrgIdError};
///
/// let missing = tenant::extract(&MetadataMap::new()).unwrap_err();
/// assert_eq!(missing, OrgIdError::Missing);
/// assert_eq!(tonic::Status::from(missing).code(), Code::Unauthenticated);
///
/// let mut metadata = MetadataMap::new();
/// metadata.insert("x-scope-orgid", "team/a".parse().unwrap());
/// let invalid = tenant::extract(&metadata).unwrap_err();
/// assert_eq!(
///     invalid,
///     OrgIdError::Invalid(InvalidOrgIdError::Character { byte: b'/', position: 4 })
/// );
/// assert_eq!(invalid.code(), Code::InvalidArgument);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OrgIdError {
    /// No `x-scope-orgid` header. Maps to `UNAUTHENTICATED`.
    Missing,
    /// Several `x-scope-orgid` headers; exactly one is allowed.
    /// Maps to `INVALID_ARGUMENT`.
    TooManyHeaders {
        /// How many values the header has.
        count: usize,
    },
    /// One header naming several tenants (`a|b`) where a single tenant is
    /// required. Maps to `INVALID_ARGUMENT`.
    MultipleTenants {
        /// Byte offset of the first `|`.
        position: usize,
    },
    /// The header value breaks a tenant rule. Maps to `INVALID_ARGUMENT`.
    Invalid(InvalidOrgIdError),
}

impl OrgIdError {
    /// The gRPC code a server answers this error with.
    pub fn code(&self) -> Code {
        match self {
            Self::Missing => Code::Unauthenticated,
            _ => Code::InvalidArgument,
        }
    }
}

impl fmt::Display for OrgIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => f.write_str("no org id: the x-scope-orgid header is missing"),
            Self::TooManyHeaders { count } => {
                write!(f, "{count} x-scope-orgid headers, exactly one is allowed")
            }
            Self::MultipleTenants { position } => write!(
                f,
                "org id names several tenants ('|' at byte {position}), one is required"
            ),
            Self::Invalid(invalid) => invalid.fmt(f),
        }
    }
}

impl std::error::Error for OrgIdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Invalid(invalid) => Some(invalid),
            _ => None,
        }
    }
}

impl From<InvalidOrgIdError> for OrgIdError {
    fn from(invalid: InvalidOrgIdError) -> Self {
        Self::Invalid(invalid)
    }
}

impl From<OrgIdError> for Status {
    /// `UNAUTHENTICATED` for a missing id, `INVALID_ARGUMENT` otherwise, with
    /// the error's message.
    fn from(error: OrgIdError) -> Self {
        Status::new(error.code(), error.to_string())
    }
}
