//! The error every fallible metadata operation returns.

use std::error::Error;
use std::fmt;

/// Why a key, a value or an append was refused.
///
/// When an operation returns this error nothing was appended: the handle it
/// was called on is unchanged (handles are immutable anyway). The error names
/// the offending key but never echoes a value, because metadata values often
/// carry credentials.
///
/// ```
/// use tonic_hotpath::metadata::{MetadataError, OutgoingMetadata};
///
/// let md = OutgoingMetadata::new();
/// let err = md.append("x-Trace ID", "1").unwrap_err();
/// assert!(matches!(err, MetadataError::InvalidKeyByte { byte: b' ', index: 7, .. }));
/// assert_eq!(
///     md.append("content-type", "text/plain").unwrap_err(),
///     MetadataError::ReservedKey { key: "content-type".into() }
/// );
/// let small = OutgoingMetadata::with_limit(40);
/// assert!(matches!(
///     small.append("x-a", "12345678").unwrap_err(),
///     MetadataError::SizeLimitExceeded { limit: 40, size: 43 }
/// ));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetadataError {
    /// The key is the empty string.
    EmptyKey,
    /// The key holds a byte outside gRPC's key charset `0-9 a-z - _ .`
    /// (upper-case ASCII letters are accepted and lowered).
    InvalidKeyByte {
        /// The key as given (lossily decoded if it is not UTF-8).
        key: String,
        /// The offending byte.
        byte: u8,
        /// Its index in the key.
        index: usize,
    },
    /// The key is longer than an HTTP header name may be.
    KeyTooLong {
        /// Length of the key in bytes.
        len: usize,
        /// The largest accepted length.
        max: usize,
    },
    /// The key is a header the gRPC transport manages itself (`te`,
    /// `content-type`, `user-agent`, `grpc-timeout`, `grpc-status`, ...:
    /// grpc-go's `isReservedHeader` set and tonic's); user metadata may not
    /// set it.
    ReservedKey {
        /// The (lower-cased) key.
        key: String,
    },
    /// A key ending in `-bin` was given an ASCII value; use a binary append.
    BinaryKeyWithAsciiValue {
        /// The (lower-cased) key.
        key: String,
    },
    /// A binary value was given a key that does not end in `-bin`.
    AsciiKeyWithBinaryValue {
        /// The (lower-cased) key.
        key: String,
    },
    /// An ASCII value holds a byte outside printable ASCII (`0x20..=0x7E`).
    InvalidValueByte {
        /// The key the value was meant for.
        key: String,
        /// The offending byte.
        byte: u8,
        /// Its index in the value.
        index: usize,
    },
    /// The append would take the chain past its size limit. Size is counted
    /// like HTTP/2's header-list size: name + value + 32 bytes per entry.
    SizeLimitExceeded {
        /// The configured limit in bytes.
        limit: usize,
        /// The size the chain would have had.
        size: usize,
    },
    /// The headers a chain is being written into cannot take that many
    /// more entries (an `http::HeaderMap` holds at most about 24 000).
    HeadersFull {
        /// Entries the headers already held.
        existing: usize,
        /// Entries the chain would have added.
        adding: usize,
    },
    /// The chain would hold more than
    /// [`OutgoingMetadata::MAX_ENTRIES`](super::OutgoingMetadata::MAX_ENTRIES) entries.
    TooManyEntries {
        /// The most entries allowed.
        limit: usize,
        /// The number of entries there would have been.
        len: usize,
    },
    /// A `-bin` value read back with
    /// [`get_bin`](super::OutgoingMetadata::get_bin) is not valid base64
    /// (it came from a base map built from raw headers).
    InvalidBinaryValue {
        /// The key the value is stored under.
        key: String,
    },
}

impl fmt::Display for MetadataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyKey => f.write_str("metadata key is empty"),
            Self::InvalidKeyByte { key, byte, index } => write!(
                f,
                "metadata key {key:?} has byte 0x{byte:02x} at index {index}; \
                 allowed are 0-9 a-z - _ . (A-Z is lowered)"
            ),
            Self::KeyTooLong { len, max } => {
                write!(f, "metadata key is {len} bytes long; at most {max} allowed")
            }
            Self::ReservedKey { key } => write!(
                f,
                "metadata key {key:?} is reserved: the gRPC transport sets this header itself"
            ),
            Self::BinaryKeyWithAsciiValue { key } => write!(
                f,
                "metadata key {key:?} ends in -bin and needs a binary value (use append_bin)"
            ),
            Self::AsciiKeyWithBinaryValue { key } => write!(
                f,
                "metadata key {key:?} does not end in -bin, so it cannot carry a binary value"
            ),
            Self::InvalidValueByte { key, byte, index } => write!(
                f,
                "metadata value for key {key:?} has byte 0x{byte:02x} at index {index}; \
                 ASCII values must be printable ASCII 0x20-0x7e"
            ),
            Self::SizeLimitExceeded { limit, size } => write!(
                f,
                "outgoing metadata would grow to {size} bytes, over its limit of {limit} bytes \
                 (name + value + 32 per entry)"
            ),
            Self::HeadersFull { existing, adding } => write!(
                f,
                "request headers already hold {existing} entries and cannot take the \
                 {adding} entries of the outgoing metadata"
            ),
            Self::TooManyEntries { limit, len } => write!(
                f,
                "outgoing metadata would hold {len} entries, over its limit of {limit} entries"
            ),
            Self::InvalidBinaryValue { key } => write!(
                f,
                "metadata value for key {key:?} is not valid base64, so it cannot be decoded"
            ),
        }
    }
}

impl Error for MetadataError {}

/// Why [`OutgoingMetadataLayer`](super::OutgoingMetadataLayer) refused to
/// send a request: its outgoing metadata chain disagrees with a header that
/// a layer above had set and [claimed](super::ClaimedHeaders).
///
/// The request is not sent; the caller gets `INVALID_ARGUMENT` with this
/// error as the status's source. The message names the header and both
/// values (a value marked sensitive with `HeaderValue::set_sensitive`, or
/// any value of a header whose claimed value is, shows as `<sensitive>`).
///
/// ```
/// use tonic_hotpath::metadata::ClaimedHeaderError;
///
/// let conflict = ClaimedHeaderError::DifferentValue {
///     header: "x-scope-orgid".into(),
///     claimed: "acme".into(),
///     outgoing: "other".into(),
/// };
/// assert_eq!(
///     conflict.to_string(),
///     "outgoing metadata sets x-scope-orgid to 'other', but a layer above set it to 'acme'; \
///      the request was not sent"
/// );
/// let status = tonic::Status::from(conflict.clone());
/// assert_eq!(status.code(), tonic::Code::InvalidArgument);
/// let source = std::error::Error::source(&status).unwrap();
/// assert_eq!(source.downcast_ref::<ClaimedHeaderError>(), Some(&conflict));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimedHeaderError {
    /// The chain carries one value for the claimed header, a different one.
    DifferentValue {
        /// The header's name.
        header: String,
        /// The value the layer above set and claimed.
        claimed: String,
        /// The value the chain carries.
        outgoing: String,
    },
    /// The chain carries several values for the claimed header (one of
    /// them may be the claimed value).
    SeveralValues {
        /// The header's name.
        header: String,
        /// The value the layer above set and claimed.
        claimed: String,
        /// How many values the chain carries for it.
        count: usize,
    },
}

impl ClaimedHeaderError {
    /// The name of the claimed header.
    pub fn header(&self) -> &str {
        match self {
            Self::DifferentValue { header, .. } | Self::SeveralValues { header, .. } => header,
        }
    }

    /// The value the layer above set and claimed.
    pub fn claimed(&self) -> &str {
        match self {
            Self::DifferentValue { claimed, .. } | Self::SeveralValues { claimed, .. } => claimed,
        }
    }
}

impl fmt::Display for ClaimedHeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DifferentValue {
                header,
                claimed,
                outgoing,
            } => write!(
                f,
                "outgoing metadata sets {header} to '{outgoing}', but a layer above set it to \
                 '{claimed}'; the request was not sent"
            ),
            Self::SeveralValues {
                header,
                claimed,
                count,
            } => write!(
                f,
                "outgoing metadata sets {header} {count} times, but a layer above set it once, \
                 to '{claimed}'; the request was not sent"
            ),
        }
    }
}

impl Error for ClaimedHeaderError {}

impl From<ClaimedHeaderError> for tonic::Status {
    /// `INVALID_ARGUMENT` with the conflict's message and the conflict as
    /// source.
    fn from(conflict: ClaimedHeaderError) -> Self {
        let mut status = tonic::Status::invalid_argument(conflict.to_string());
        status.set_source(std::sync::Arc::new(conflict));
        status
    }
}
