//! The tenant part's errors: reading an org id ([`InvalidOrgIdError`] for
//! Cortex's rules, [`OrgIdError`] for the header as a whole) and injecting
//! one ([`InjectError`]). The rules themselves are wire facts
//! (`crate::wire::org_id`); its findings become these public errors here.

use std::fmt;

use tonic::{Code, Status};

use crate::wire::org_id::{Fault, MAX_ORG_ID_LEN};

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

impl InvalidOrgIdError {
    /// The wire's finding, as this public type says it (variant for
    /// variant). A function, not a `From` impl: the wire's type stays out
    /// of the public API.
    #[inline]
    pub(crate) fn from_fault(fault: Fault) -> Self {
        match fault {
            Fault::Character { byte, position } => Self::Character { byte, position },
            Fault::TooLong { len } => Self::TooLong { len },
            Fault::DotSegment => Self::DotSegment,
            Fault::Empty { position } => Self::Empty { position },
            Fault::Reserved { name } => Self::Reserved { name },
        }
    }
}

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

impl OrgIdError {
    /// [`InvalidOrgIdError::from_fault`], as the header's error.
    #[inline]
    pub(crate) fn from_fault(fault: Fault) -> Self {
        Self::Invalid(InvalidOrgIdError::from_fault(fault))
    }
}

impl From<OrgIdError> for Status {
    /// `UNAUTHENTICATED` for a missing id, `INVALID_ARGUMENT` otherwise, with
    /// the error's message.
    fn from(error: OrgIdError) -> Self {
        Status::new(error.code(), error.to_string())
    }
}

/// Why an org id could not be put into outgoing metadata (Cortex's
/// `InjectIntoGRPCRequest` errors).
///
/// ```
/// use tonic::Request;
/// use tonic_hotpath::tenant::{InjectError, InjectOrgId, OrgId};
///
/// let mut request = Request::new(());
/// request.inject_org_id(&OrgId::new("team-a")?)?;
/// request.inject_org_id(&OrgId::new("team-a")?)?; // the same id again: fine
/// let err = request.inject_org_id(&OrgId::new("team-b")?).unwrap_err();
/// assert!(matches!(err, InjectError::DifferentOrgIdPresent { .. }));
/// assert_eq!(tonic::Status::from(err).code(), tonic::Code::InvalidArgument);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InjectError {
    /// The metadata already carries a different org id
    /// (Cortex `ErrDifferentOrgIDPresent`).
    DifferentOrgIdPresent {
        /// The id already present (lossily decoded if not valid text).
        present: String,
        /// The id that was to be injected.
        injected: String,
    },
    /// The metadata already carries several org ids (Cortex `ErrTooManyOrgIDs`).
    TooManyHeaders {
        /// How many values the header has.
        count: usize,
    },
    /// The outgoing metadata chain refused the org id (e.g. its size limit).
    Metadata(crate::metadata::MetadataError),
}

impl fmt::Display for InjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DifferentOrgIdPresent { present, injected } => write!(
                f,
                "cannot inject org id '{injected}': a different org id '{present}' is already present"
            ),
            Self::TooManyHeaders { count } => write!(
                f,
                "cannot inject org id: {count} x-scope-orgid headers are already present"
            ),
            Self::Metadata(error) => write!(f, "cannot inject org id: {error}"),
        }
    }
}

impl std::error::Error for InjectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Metadata(error) => Some(error),
            _ => None,
        }
    }
}

impl From<InjectError> for Status {
    /// `INVALID_ARGUMENT` with the error's message and the error as source.
    fn from(error: InjectError) -> Self {
        let mut status = Status::invalid_argument(error.to_string());
        status.set_source(std::sync::Arc::new(error));
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wire_fault_is_the_same_public_error() {
        let cases = [
            (
                Fault::Character {
                    byte: b'/',
                    position: 4,
                },
                InvalidOrgIdError::Character {
                    byte: b'/',
                    position: 4,
                },
                "org id has unsupported character '/' at byte 4",
            ),
            (
                Fault::TooLong { len: 151 },
                InvalidOrgIdError::TooLong { len: 151 },
                "org id is 151 bytes long, the limit is 150",
            ),
            (
                Fault::DotSegment,
                InvalidOrgIdError::DotSegment,
                "org id is '.' or '..'",
            ),
            (
                Fault::Empty { position: 2 },
                InvalidOrgIdError::Empty { position: 2 },
                "org id is empty at byte 2",
            ),
            (
                Fault::Reserved {
                    name: "__markers__",
                },
                InvalidOrgIdError::Reserved {
                    name: "__markers__",
                },
                "org id '__markers__' is reserved",
            ),
        ];
        for (fault, public, message) in cases {
            assert_eq!(InvalidOrgIdError::from_fault(fault), public);
            assert_eq!(OrgIdError::from_fault(fault), OrgIdError::Invalid(public));
            assert_eq!(public.to_string(), message);
        }
    }
}
