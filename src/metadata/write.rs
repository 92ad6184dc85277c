//! Writing a chain into request headers: every entry, or every entry but
//! those of [claimed](ClaimedHeaders) names.

use http::{HeaderMap, HeaderName, HeaderValue};

use super::claim::ClaimedHeaders;
use super::{MetadataError, OutgoingMetadata};

impl OutgoingMetadata {
    /// Writes every entry into `headers` in FIFO order with
    /// `HeaderMap::append` (existing headers are kept). Values are shared,
    /// not copied; no intermediate map is built. This is what
    /// [`OutgoingMetadataLayer`](super::OutgoingMetadataLayer) does at send
    /// time.
    ///
    /// Into a fresh map (`HeaderMap::new()`), a base map is copied whole
    /// rather than re-inserted; into a map with room for the whole chain
    /// (`with_capacity`), nothing is allocated; into any other map (a
    /// request's headers have room for 6, 2 of them taken by `te` and
    /// `content-type`), room for the whole chain is reserved once, before
    /// the first entry goes in.
    ///
    /// Fails with [`MetadataError::HeadersFull`], having written
    /// nothing, if `headers` cannot take that many more entries.
    pub fn write_to(&self, headers: &mut HeaderMap) -> Result<(), MetadataError> {
        self.write_where(headers, |_| true, BaseCopy::Allowed)
    }

    /// [`write_to`](Self::write_to), leaving out the entries of every name
    /// `claims` holds: those the layer above has already put into
    /// `headers`, once ([`ClaimedHeaders::judge`] has checked that they
    /// agree). Room is reserved for the whole chain.
    pub(crate) fn write_unclaimed_to(
        &self,
        headers: &mut HeaderMap,
        claims: &ClaimedHeaders,
    ) -> Result<(), MetadataError> {
        self.write_where(headers, |name| !claims.is_claimed(name), BaseCopy::Refused)
    }

    /// Writes the entries whose name `keep` accepts. A whole-base copy
    /// (into a fresh map) is only tried when every entry is kept.
    #[inline(always)]
    fn write_where(
        &self,
        headers: &mut HeaderMap,
        keep: impl Fn(&HeaderName) -> bool,
        base_copy: BaseCopy,
    ) -> Result<(), MetadataError> {
        let Some(head) = self.head() else {
            return Ok(());
        };
        let existing = headers.len();
        let headers_full = || MetadataError::HeadersFull {
            existing,
            adding: head.len(),
        };
        // Into a fresh map (nothing allocated yet) a base is copied tables
        // and all, about a third faster than re-hashing its entries.
        // (A request's headers always have room: no walk to the root.)
        let fresh_base = match (base_copy, headers.capacity()) {
            (BaseCopy::Allowed, 0) => head.root().base(),
            _ => None,
        };
        let base_copied = match fresh_base {
            Some(base) => {
                headers.clone_from(base);
                true
            }
            None => false,
        };
        let pending = if base_copied {
            head.len() - headers.len()
        } else {
            head.len()
        };
        if headers.try_reserve(pending).is_err() {
            if base_copied {
                headers.clear();
            }
            return Err(headers_full());
        }
        // Names go in by reference: `HeaderMap` clones one straight into
        // its new entry, where a clone passed by value is first moved
        // through the stack (a quarter of a 50-entry write).
        let mut full = false;
        let mut append = |name: &HeaderName, value: &HeaderValue| {
            if keep(name) {
                full |= headers.try_append(name, value.clone()).is_err();
            }
        };
        head.for_each_node_fifo(&mut |node| match node.base() {
            Some(base) if !base_copied => base.iter().for_each(|(name, value)| append(name, value)),
            _ => node
                .pairs()
                .iter()
                .for_each(|(name, value)| append(name, value)),
        });
        // Unreachable after a successful `try_reserve`, but never silent.
        if full { Err(headers_full()) } else { Ok(()) }
    }
}

/// Whether a base may be copied whole into a fresh map.
#[derive(Clone, Copy)]
enum BaseCopy {
    Allowed,
    Refused,
}
