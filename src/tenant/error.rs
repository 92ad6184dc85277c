//! Error values for org-id injection (the errors of reading one are
//! `crate::wire`'s, re-exported by this module's parent).

use std::fmt;

use tonic::Status;

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
