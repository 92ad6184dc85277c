//! Outgoing gRPC metadata as a persistent chain: O(1) append, FIFO read,
//! forks that share their past.
//!
//! grpc-go's `AppendToOutgoingContext` copied every earlier pair on each
//! call (O(N) per append); its fix keeps a linked list of deltas. Here the
//! same idea is an immutable, `Arc`-linked chain of [`MetadataDelta`] nodes
//! behind a cheap-to-clone [`OutgoingMetadata`] handle:
//!
//! - **append** ([`append`](OutgoingMetadata::append),
//!   [`append_static`](OutgoingMetadata::append_static),
//!   [`append_bytes`](OutgoingMetadata::append_bytes),
//!   [`append_bin`](OutgoingMetadata::append_bin),
//!   [`append_entries`](OutgoingMetadata::append_entries)) returns a new
//!   handle with one new node and leaves the old handle as it was, so two
//!   appends to the same parent are two independent forks;
//! - a **base** `MetadataMap` ([`from_metadata_map`](OutgoingMetadata::from_metadata_map),
//!   [`with_base`](OutgoingMetadata::with_base)) replaces everything appended
//!   before it, like grpc-go's `NewOutgoingContext`;
//! - **reads** ([`iter`](OutgoingMetadata::iter),
//!   [`get`](OutgoingMetadata::get), [`get_all`](OutgoingMetadata::get_all),
//!   [`len`](OutgoingMetadata::len)) walk the chain and never build a map;
//! - **sending**: attach the handle to a `tonic::Request`
//!   ([`OutgoingMetadataExt`]) or run the call inside
//!   [`OutgoingMetadata::scope`]; [`OutgoingMetadataLayer`] below the
//!   generated client writes the chain straight into the request headers.
//!
//! Keys follow gRPC's rules (`0-9 a-z - _ .`, upper case lowered, `-bin`
//! keys carry base64-encoded binary values); headers the transport manages
//! (grpc-go's `isReservedHeader` set: `te`, `content-type`, `user-agent`,
//! `grpc-timeout`, `grpc-status`, ...) are refused when appended and
//! dropped from a base map, as grpc-go's transport drops them. The chain's size,
//! counted like HTTP/2's header-list size, is capped (15 KiB by default, so
//! that it fits a default server's 16 KiB header list with tonic's own
//! headers).
//!
//! ```
//! use tonic_hotpath::metadata::OutgoingMetadata;
//!
//! let parent = OutgoingMetadata::new().append_static("x-request-id", "42")?;
//! let a = parent.append("x-route", "a")?;
//! let b = parent.append("x-route", "b")?;
//!
//! let pairs: Vec<_> = a.iter().map(|(k, v)| (k.as_str(), v.to_str().unwrap())).collect();
//! assert_eq!(pairs, [("x-request-id", "42"), ("x-route", "a")]);
//! assert_eq!(b.get("x-route").unwrap(), "b");
//! assert_eq!(parent.len(), 1);
//! # Ok::<(), tonic_hotpath::metadata::MetadataError>(())
//! ```

mod base;
mod claim;
mod delta;
mod error;
mod key;
mod layer;
mod scope;
mod static_pair;
mod write;

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use tonic::metadata::MetadataMap;

pub use claim::ClaimedHeaders;
use delta::DeltaEntries;
pub use delta::{GetAll, Iter, MetadataDelta};
pub use error::{ClaimedHeaderError, MetadataError};
pub use key::MetadataEntry;
pub use layer::{OutgoingMetadataLayer, OutgoingMetadataService, ResponseFuture};
pub use scope::OutgoingMetadataExt;
use static_pair::StaticPair;

/// Default cap on a chain's size: 15 KiB, i.e. the 16 KiB header list a
/// default tonic (hyper/h2) server accepts, minus 1 KiB for what tonic and
/// HTTP/2 add to every request (`:path`, `:authority`, `te`,
/// `content-type`, `user-agent`, `grpc-timeout`, ...). A chain at this limit
/// still reaches a default server; at a full 16 KiB the server answers
/// HTTP 431.
pub(crate) const DEFAULT_SIZE_LIMIT: usize = 15 * 1024;

/// Most entries a chain may hold, whatever its size limit: well inside what
/// one `http::HeaderMap` can take (about 24 000 entries), so writing a chain
/// into a request's headers cannot overflow them.
pub(crate) const MAX_ENTRIES: usize = 16 * 1024;

/// A cheap-to-clone handle (one `Arc`) to an immutable chain of outgoing
/// metadata.
///
/// See the [module docs](self) for the model. Every append returns a new
/// handle; on error nothing is appended and the old handle is still valid.
///
/// ```
/// use tonic_hotpath::metadata::OutgoingMetadata;
///
/// let md = OutgoingMetadata::new()
///     .append_static("x-tenant", "acme")?
///     .append_bin("x-token-bin", &[1, 2, 3])?
///     .append("x-tenant", "beta")?;
/// let tenants: Vec<_> = md.get_all("x-tenant").collect();
/// assert_eq!(tenants, ["acme", "beta"]);
/// assert_eq!(md.len(), 3);
///
/// let mut headers = http::HeaderMap::new();
/// md.write_to(&mut headers)?;
/// assert_eq!(headers.get("x-token-bin").unwrap(), "AQID");
/// # Ok::<(), tonic_hotpath::metadata::MetadataError>(())
/// ```
#[derive(Clone)]
#[must_use = "appends return a new handle and leave this one unchanged"]
pub struct OutgoingMetadata {
    head: Option<Arc<MetadataDelta>>,
    limit: usize,
}

impl Default for OutgoingMetadata {
    fn default() -> Self {
        Self::new()
    }
}

impl OutgoingMetadata {
    /// Default cap on a chain's size: 15 KiB, i.e. the 16 KiB header list
    /// a default tonic (hyper/h2) server accepts, minus 1 KiB for what tonic
    /// and HTTP/2 add to every request (`:path`, `:authority`, `te`,
    /// `content-type`, `user-agent`, `grpc-timeout`, ...). A chain at this
    /// limit still reaches a default server; at a full 16 KiB the server
    /// answers HTTP 431.
    pub const DEFAULT_SIZE_LIMIT: usize = DEFAULT_SIZE_LIMIT;

    /// Most entries a chain may hold, whatever its size limit: well inside
    /// what one `http::HeaderMap` can take (about 24 000 entries), so
    /// writing a chain into a request's headers cannot overflow them.
    pub const MAX_ENTRIES: usize = MAX_ENTRIES;

    /// An empty chain with the [default size limit](Self::DEFAULT_SIZE_LIMIT).
    /// Does not allocate.
    pub const fn new() -> Self {
        Self::with_limit(DEFAULT_SIZE_LIMIT)
    }

    /// An empty chain whose size (name + value + 32 bytes per entry) may not
    /// exceed `limit` bytes. Forks and appends inherit the limit.
    pub const fn with_limit(limit: usize) -> Self {
        Self { head: None, limit }
    }

    /// A chain on the base `map` with the default size limit, like grpc-go's
    /// `NewOutgoingContext`. Headers the transport manages (`te`,
    /// `content-type`, `user-agent`, `grpc-timeout`, `grpc-status`, ...:
    /// grpc-go's `isReservedHeader` set and tonic's) are removed from the
    /// map, as grpc-go's transport drops them, so a map received from a
    /// caller can be forwarded without its stale deadline; the other entries
    /// keep their order.
    pub fn from_metadata_map(map: MetadataMap) -> Result<Self, MetadataError> {
        Self::new().with_base(map)
    }

    /// A new chain on the base `map`, keeping this handle's limit and
    /// dropping everything this handle held. Reserved headers are removed
    /// from the map as in [`from_metadata_map`](Self::from_metadata_map),
    /// and the remaining entries keep the map's iteration order (the FIFO
    /// order [`iter`](Self::iter) and the wire show); a map over the limit
    /// is an error.
    ///
    /// ```
    /// use tonic::metadata::MetadataMap;
    /// use tonic_hotpath::metadata::OutgoingMetadata;
    ///
    /// let mut incoming = MetadataMap::new();
    /// incoming.insert("x-a", "1".parse().unwrap());
    /// incoming.insert("grpc-timeout", "4999870u".parse().unwrap());
    /// incoming.insert("x-b", "2".parse().unwrap());
    /// let chain = OutgoingMetadata::new().with_base(incoming)?;
    /// let keys: Vec<_> = chain.iter().map(|(name, _)| name.as_str()).collect();
    /// assert_eq!(keys, ["x-a", "x-b"]);
    /// # Ok::<(), tonic_hotpath::metadata::MetadataError>(())
    /// ```
    pub fn with_base(&self, map: MetadataMap) -> Result<Self, MetadataError> {
        let mut headers = map.into_headers();
        base::drop_reserved(&mut headers);
        let size = headers
            .iter()
            .map(|(name, value)| key::entry_size(name, value))
            .sum();
        self.check_growth(0, 0, headers.len(), size)?;
        let node = MetadataDelta::new(None, DeltaEntries::Base(Box::new(headers)), size);
        Ok(self.with_head(node))
    }

    /// Appends an ASCII pair from `'static` strings without copying either:
    /// one node, one allocation.
    #[inline(always)]
    pub fn append_static(
        &self,
        key: &'static str,
        value: &'static str,
    ) -> Result<Self, MetadataError> {
        match StaticPair::check(key, value)? {
            Some(pair) => {
                let size = pair.size();
                self.append_pair(pair.into_parts(), size)
            }
            None => self.append_lowered_static(key, value),
        }
    }

    /// [`append_static`](Self::append_static) of an upper-case key, which is
    /// lowered into a copy. Out of line: the hot path stays small enough to
    /// inline into callers.
    #[cold]
    #[inline(never)]
    fn append_lowered_static(
        &self,
        key: &'static str,
        value: &'static str,
    ) -> Result<Self, MetadataError> {
        self.append_entry(MetadataEntry::from_static(key, value)?)
    }

    /// Appends an ASCII pair, copying the key and the value once each.
    #[inline]
    pub fn append(&self, key: &str, value: &str) -> Result<Self, MetadataError> {
        self.append_entry(MetadataEntry::ascii(key, value)?)
    }

    /// Appends an ASCII pair whose value is already [`Bytes`] (not copied).
    pub fn append_bytes(&self, key: &str, value: Bytes) -> Result<Self, MetadataError> {
        self.append_entry(MetadataEntry::ascii_bytes(key, value)?)
    }

    /// Appends a binary value under a `-bin` key; it is sent base64-encoded,
    /// as tonic's `MetadataValue<Binary>`, so a tonic server reads it back
    /// with `MetadataMap::get_bin`.
    pub fn append_bin(&self, key: &str, value: &[u8]) -> Result<Self, MetadataError> {
        self.append_entry(MetadataEntry::binary(key, value)?)
    }

    /// Appends one pre-validated entry: one node, one allocation.
    #[inline(always)]
    pub fn append_entry(&self, entry: MetadataEntry) -> Result<Self, MetadataError> {
        let size = entry.size();
        self.append_pair(entry.into_parts(), size)
    }

    /// Appends one checked pair of `size` bytes in a header list.
    #[inline(always)]
    fn append_pair(
        &self,
        pair: (HeaderName, HeaderValue),
        size: usize,
    ) -> Result<Self, MetadataError> {
        self.check_growth(self.len(), self.size(), 1, size)?;
        Ok(self.push(DeltaEntries::One([pair]), size))
    }

    /// Appends several entries, in order, as one node (grpc-go's
    /// `AppendToOutgoingContext(ctx, k1, v1, k2, v2, ...)`). An empty
    /// iterator returns a clone of this handle.
    pub fn append_entries<I>(&self, entries: I) -> Result<Self, MetadataError>
    where
        I: IntoIterator<Item = MetadataEntry>,
    {
        let pairs: Box<[_]> = entries.into_iter().map(MetadataEntry::into_parts).collect();
        if pairs.is_empty() {
            return Ok(self.clone());
        }
        let size = pairs
            .iter()
            .map(|(name, value)| key::entry_size(name, value))
            .sum();
        self.check_growth(self.len(), self.size(), pairs.len(), size)?;
        Ok(self.push(DeltaEntries::Many(pairs), size))
    }

    /// Refuses growth from `len` entries / `size` bytes by `added_len` /
    /// `added_size` past [`MAX_ENTRIES`](Self::MAX_ENTRIES) or the size limit.
    #[inline]
    fn check_growth(
        &self,
        len: usize,
        size: usize,
        added_len: usize,
        added_size: usize,
    ) -> Result<(), MetadataError> {
        let len = len.saturating_add(added_len);
        let size = size.saturating_add(added_size);
        if len > MAX_ENTRIES || size > self.limit {
            return Err(self.growth_error(len, size));
        }
        Ok(())
    }

    /// Why growth to `len` entries / `size` bytes was refused.
    #[cold]
    #[inline(never)]
    fn growth_error(&self, len: usize, size: usize) -> MetadataError {
        if len > MAX_ENTRIES {
            MetadataError::TooManyEntries {
                limit: MAX_ENTRIES,
                len,
            }
        } else {
            MetadataError::SizeLimitExceeded {
                limit: self.limit,
                size,
            }
        }
    }

    /// A handle to a new node adding `entries` (of size `size`, already
    /// checked against the limits) on top of this chain.
    #[inline]
    fn push(&self, entries: DeltaEntries, size: usize) -> Self {
        self.with_head(MetadataDelta::new(self.head.clone(), entries, size))
    }

    #[inline]
    fn with_head(&self, node: MetadataDelta) -> Self {
        Self {
            head: Some(Arc::new(node)),
            limit: self.limit,
        }
    }

    /// The size limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Number of entries (base entries included). O(1).
    #[inline]
    pub fn len(&self) -> usize {
        self.head.as_ref().map_or(0, |head| head.len())
    }

    /// Whether the chain holds no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Header-list size of the chain: name + value + 32 bytes per entry. O(1).
    #[inline]
    pub fn size(&self) -> usize {
        self.head.as_ref().map_or(0, |head| head.size())
    }

    /// The newest node of the chain, if any.
    pub fn head(&self) -> Option<&MetadataDelta> {
        self.head.as_deref()
    }

    /// Every entry in FIFO order: the base map's entries (in its iteration
    /// order), then appended pairs in append order. `-bin` values are
    /// base64 as on the wire.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self.head())
    }

    /// The first value of `key` in FIFO order (as `MetadataMap::get` on the
    /// materialised map would return). Walks the chain; never allocates.
    pub fn get(&self, key: &str) -> Option<&HeaderValue> {
        let mut oldest = None;
        let mut node = self.head();
        while let Some(current) = node {
            if let Some(value) = current.base().and_then(|base| base.get(key)) {
                return Some(value);
            }
            let mut pairs = current.pairs().iter();
            if let Some((_, value)) =
                pairs.find(|(name, _)| name.as_str().eq_ignore_ascii_case(key))
            {
                oldest = Some(value);
            }
            node = current.parent();
        }
        oldest
    }

    /// The first value of the binary `key` (ending in `-bin`), decoded from
    /// base64: what `MetadataMap::get_bin(key)` then
    /// `MetadataValue::to_bytes()` give on the materialised map. `Ok(None)`
    /// if there is no such value or `key` does not end in `-bin`
    /// (case-sensitive, as tonic's `get_bin` checks it). A value that is not base64 (possible
    /// only in a base map built from raw headers) is
    /// [`MetadataError::InvalidBinaryValue`]. Allocates the decoded bytes.
    ///
    /// ```
    /// use tonic_hotpath::metadata::OutgoingMetadata;
    ///
    /// let md = OutgoingMetadata::new().append_bin("x-trace-bin", &[0xca, 0xfe])?;
    /// assert_eq!(md.get("x-trace-bin").unwrap(), "yv4"); // as on the wire
    /// assert_eq!(md.get_bin("x-trace-bin")?.unwrap(), [0xca, 0xfe][..]);
    /// assert_eq!(md.get_bin("x-other-bin")?, None);
    /// # Ok::<(), tonic_hotpath::metadata::MetadataError>(())
    /// ```
    pub fn get_bin(&self, key: &str) -> Result<Option<Bytes>, MetadataError> {
        // tonic's test for a binary key: the suffix, case-sensitively.
        let Some(value) = self
            .get(key)
            .filter(|_| crate::wire::keys::is_binary(key.as_bytes()))
        else {
            return Ok(None);
        };
        match crate::wire::base64::base64_decode(value.as_bytes()) {
            Some(bytes) => Ok(Some(Bytes::from(bytes))),
            None => Err(MetadataError::InvalidBinaryValue {
                key: key.to_ascii_lowercase(),
            }),
        }
    }

    /// Every value of `key` in FIFO order. Walks the chain; never allocates.
    pub fn get_all<'a>(&'a self, key: &'a str) -> GetAll<'a> {
        GetAll::new(self.head(), key)
    }

    /// The first value of `name` in FIFO order (as [`get`](Self::get)) and
    /// how many values it has (as `get_all(..).count()`), in one walk of
    /// the chain with no iterator state: the single-key read a layer does
    /// on every request (e.g. the tenant layer's org-id check). Never
    /// allocates.
    pub(crate) fn first_and_count(&self, name: &HeaderName) -> (Option<&HeaderValue>, usize) {
        let (mut oldest, mut count) = (None, 0);
        let mut node = self.head();
        while let Some(current) = node {
            let (first, in_node) = current.first_and_count(name);
            if first.is_some() {
                oldest = first;
                count += in_node;
            }
            node = current.parent();
        }
        (oldest, count)
    }

    /// The chain as a `MetadataMap`, e.g. for APIs that want one.
    ///
    /// Cannot fail: a chain holds at most [`MAX_ENTRIES`](Self::MAX_ENTRIES) entries, which a
    /// fresh map always has room for.
    pub fn to_metadata_map(&self) -> MetadataMap {
        let mut headers = HeaderMap::new();
        let written = self.write_to(&mut headers);
        debug_assert!(written.is_ok(), "a fresh HeaderMap takes MAX_ENTRIES");
        MetadataMap::from_headers(headers)
    }
}

impl fmt::Debug for OutgoingMetadata {
    /// Prints keys in FIFO order and `<redacted>` for every value, as
    /// metadata carries credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (name, _) in self.iter() {
            map.entry(&name.as_str(), &key::Redacted);
        }
        map.finish()
    }
}

/// Two chains are equal when they hold the same entries in the same FIFO
/// order ([`iter`](OutgoingMetadata::iter)): same names, same values as on
/// the wire (`-bin` values compared in base64). How they were built (a base
/// map or appends, shared nodes or not) and their size limits are not
/// compared. Never allocates; handles sharing one head compare in O(1).
///
/// ```
/// use tonic_hotpath::metadata::OutgoingMetadata;
///
/// let a = OutgoingMetadata::new().append("x-a", "1")?.append("x-b", "2")?;
/// let b = OutgoingMetadata::with_limit(100).append("x-a", "1")?.append("x-b", "2")?;
/// assert_eq!(a, b);
/// assert_ne!(a, OutgoingMetadata::new().append("x-b", "2")?.append("x-a", "1")?);
/// # Ok::<(), tonic_hotpath::metadata::MetadataError>(())
/// ```
impl PartialEq for OutgoingMetadata {
    fn eq(&self, other: &Self) -> bool {
        let same_head = match (&self.head, &other.head) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        same_head || (self.len() == other.len() && self.iter().eq(other.iter()))
    }
}

impl Eq for OutgoingMetadata {}

impl<'a> IntoIterator for &'a OutgoingMetadata {
    type Item = (&'a http::HeaderName, &'a HeaderValue);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `first_and_count` agrees with `get` and `get_all(..).count()`, base
    /// values first.
    #[test]
    fn first_and_count_is_get_and_get_all_count() {
        let name = HeaderName::from_static("x-k");
        let mut base = MetadataMap::new();
        base.append("x-k", "b1".parse().unwrap());
        base.append("x-other", "o".parse().unwrap());
        base.append("x-k", "b2".parse().unwrap());
        let on_base = OutgoingMetadata::from_metadata_map(base).unwrap();
        let chains = [
            OutgoingMetadata::new(),
            OutgoingMetadata::new()
                .append_static("x-other", "1")
                .unwrap(),
            OutgoingMetadata::new()
                .append_static("x-k", "a1")
                .unwrap()
                .append_static("x-other", "2")
                .unwrap()
                .append_static("x-k", "a2")
                .unwrap(),
            on_base.clone(),
            on_base.append_static("x-k", "a1").unwrap(),
        ];
        for chain in chains {
            let (first, count) = chain.first_and_count(&name);
            assert_eq!(first, chain.get("x-k"), "{chain:?}");
            assert_eq!(count, chain.get_all("x-k").count(), "{chain:?}");
        }
    }
}
