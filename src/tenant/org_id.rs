//! `OrgId`: an owned, validated org id that is cheap to clone; and
//! [`validate_org_id`], the borrowed check.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use http::HeaderValue;

use super::error::InvalidOrgIdError;
use crate::wire::org_id::{ascii_str, check_org_id};

/// Ids up to this many bytes are stored inline: making or cloning them
/// allocates nothing. A UUID (36 bytes) fits.
pub(crate) const INLINE_CAPACITY: usize = 38;

/// Validates a single org id and returns it as `&str`.
///
/// The rule pass proves every byte is ASCII, so the conversion to `&str`
/// that follows cannot fail; it runs std's word-at-a-time ASCII fast path
/// (this crate has no `unsafe` outside `arena` to skip it).
///
/// ```
/// use tonic_hotpath::tenant::validate_org_id;
///
/// assert_eq!(validate_org_id(b"team-a").unwrap(), "team-a");
/// let err = validate_org_id(b"team a").unwrap_err();
/// assert_eq!(err.to_string(), "org id has unsupported character ' ' at byte 4");
/// ```
pub fn validate_org_id(id: &[u8]) -> Result<&str, InvalidOrgIdError> {
    check_org_id(id, 0)
        .and_then(|()| ascii_str(id, 0))
        .map_err(InvalidOrgIdError::from_fault)
}

/// An owned, validated org id (tenant id).
///
/// Ids up to [`OrgId::INLINE_CAPACITY`] bytes live inline (no allocation to make or
/// clone); longer ones share one `Arc<str>`. Comparison, ordering and
/// hashing are those of the id's text, so a `HashSet<OrgId>` can be queried
/// with a `&str`.
///
/// ```
/// use tonic_hotpath::tenant::OrgId;
///
/// let id = OrgId::new("team-a")?;
/// assert_eq!(id.as_str(), "team-a");
/// assert_eq!(id.to_string(), "team-a");
/// assert!(OrgId::new("team a").is_err());
/// # Ok::<(), tonic_hotpath::tenant::InvalidOrgIdError>(())
/// ```
#[derive(Clone)]
pub struct OrgId {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Inline {
        len: u8,
        bytes: [u8; INLINE_CAPACITY],
    },
    Shared(Arc<str>),
}

impl OrgId {
    /// Validates `id` and makes an owned copy of it.
    pub fn new(id: &str) -> Result<Self, InvalidOrgIdError> {
        Self::from_bytes(id.as_bytes())
    }

    /// Validates `id` (for example a header value's bytes) and makes an owned
    /// copy of it.
    pub fn from_bytes(id: &[u8]) -> Result<Self, InvalidOrgIdError> {
        check_org_id(id, 0).map_err(InvalidOrgIdError::from_fault)?;
        Ok(Self::from_checked(id))
    }

    /// Makes an owned copy of an id that passed validation.
    #[inline(always)]
    pub(crate) fn from_checked(id: &[u8]) -> Self {
        let repr = match u8::try_from(id.len()) {
            Ok(len) if id.len() <= INLINE_CAPACITY => Repr::Inline {
                len,
                bytes: inline_copy(id),
            },
            // Validated bytes are ASCII, so the lossy conversion copies them
            // unchanged.
            _ => Repr::Shared(Arc::from(String::from_utf8_lossy(id))),
        };
        Self { repr }
    }

    /// The id's text.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.repr {
            // Always valid: the bytes passed the ASCII-only tenant rules.
            Repr::Inline { len, bytes } => {
                ascii_str(&bytes[..usize::from(*len)], 0).unwrap_or_default()
            }
            Repr::Shared(text) => text,
        }
    }

    /// The id's bytes (ASCII).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.repr {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Shared(text) => text.as_bytes(),
        }
    }

    /// The id as an `x-scope-orgid` header value (copies the bytes).
    pub fn to_header_value(&self) -> HeaderValue {
        header_value(self.as_bytes())
    }
}

/// `id` (at most [`OrgId::INLINE_CAPACITY`] bytes) at the start of an inline
/// buffer; the bytes after it are unspecified (never read).
///
/// Two overlapping fixed-size copies (the first and the last `N` bytes)
/// instead of `memset` + a variable-length `memcpy`: no library calls, a
/// handful of vector moves.
#[inline]
fn inline_copy(id: &[u8]) -> [u8; INLINE_CAPACITY] {
    let mut bytes = [0; INLINE_CAPACITY];
    match id.len() {
        32.. => copy_ends::<32>(&mut bytes, id),
        16.. => copy_ends::<16>(&mut bytes, id),
        8.. => copy_ends::<8>(&mut bytes, id),
        4.. => copy_ends::<4>(&mut bytes, id),
        _ => {
            for (dst, src) in bytes.iter_mut().zip(id) {
                *dst = *src;
            }
        }
    }
    bytes
}

/// Copies the first and the last `N` bytes of `id` (`N <= id.len() <= 2N`,
/// `id.len() <= INLINE_CAPACITY`) to the same places in `bytes`.
#[inline(always)]
fn copy_ends<const N: usize>(bytes: &mut [u8; INLINE_CAPACITY], id: &[u8]) {
    let len = id.len();
    if let (Some(head), Some(tail)) = (id.first_chunk::<N>(), id.last_chunk::<N>()) {
        if let Some(dst) = bytes.first_chunk_mut::<N>() {
            *dst = *head;
        }
        if let Some(dst) = bytes
            .get_mut(len - N..len)
            .and_then(|d| d.first_chunk_mut::<N>())
        {
            *dst = *tail;
        }
    }
}

/// A header value from validated (visible ASCII) bytes.
pub(crate) fn header_value(bytes: &[u8]) -> HeaderValue {
    HeaderValue::from_maybe_shared(bytes::Bytes::copy_from_slice(bytes))
        // Unreachable for validated ids; an empty value is refused on read.
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

impl fmt::Debug for OrgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OrgId").field(&self.as_str()).finish()
    }
}

impl fmt::Display for OrgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for OrgId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for OrgId {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for OrgId {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for OrgId {}

impl PartialEq<str> for OrgId {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for OrgId {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialOrd for OrgId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrgId {
    /// Byte order, which for ASCII is the order of the text (Cortex sorts
    /// tenant ids as strings).
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Hash for OrgId {
    /// Hashes like the id's `str`, as `Borrow<str>` requires.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::str::FromStr for OrgId {
    type Err = InvalidOrgIdError;

    fn from_str(id: &str) -> Result<Self, Self::Err> {
        Self::new(id)
    }
}

impl TryFrom<&str> for OrgId {
    type Error = InvalidOrgIdError;

    fn try_from(id: &str) -> Result<Self, Self::Error> {
        Self::new(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn inline_and_shared_ids_behave_the_same() {
        let short = "a".repeat(INLINE_CAPACITY);
        let long = "a".repeat(INLINE_CAPACITY + 1);
        let s = OrgId::new(&short).unwrap();
        let l = OrgId::new(&long).unwrap();
        assert!(matches!(s.repr, Repr::Inline { .. }));
        assert!(matches!(l.repr, Repr::Shared(_)));
        assert_eq!(s.as_str(), short);
        assert_eq!(l.as_str(), long);
        assert!(s < l);
        assert_eq!(l.clone(), l);
        let max = OrgId::new(&"z".repeat(150)).unwrap();
        assert_eq!(max.as_bytes().len(), 150);
    }

    #[test]
    fn every_inline_length_keeps_exactly_its_bytes() {
        let text: String = ('a'..='z').chain('A'..='Z').collect();
        for len in 1..=INLINE_CAPACITY {
            let id = OrgId::new(&text[..len]).unwrap();
            assert!(matches!(id.repr, Repr::Inline { .. }));
            assert_eq!(id.as_str(), &text[..len], "{len}");
            assert_eq!(id, OrgId::new(&text[..len]).unwrap());
            assert_ne!(id, OrgId::new(&text[1..=len]).unwrap());
        }
    }

    #[test]
    fn hashing_matches_str_so_sets_can_be_queried_by_str() {
        let set: HashSet<OrgId> = ["a", "b"].iter().map(|s| OrgId::new(s).unwrap()).collect();
        assert!(set.contains("a"));
        assert!(!set.contains("c"));
        let long = "x".repeat(100);
        let set: HashSet<OrgId> = [OrgId::new(&long).unwrap()].into_iter().collect();
        assert!(set.contains(long.as_str()));
    }

    #[test]
    fn invalid_ids_are_refused() {
        assert!(OrgId::new("").is_err());
        assert!(OrgId::new("a|b").is_err());
        assert!(OrgId::new(".").is_err());
        assert!("ok".parse::<OrgId>().is_ok());
        assert_eq!(format!("{:?}", OrgId::new("t1").unwrap()), "OrgId(\"t1\")");
    }

    #[test]
    fn header_value_round_trips() {
        let id = OrgId::new("tenant-1").unwrap();
        assert_eq!(id.to_header_value(), "tenant-1");
    }
}
