//! [`MetadataDelta`]: one node of the persistent chain, and the chain walks
//! that read it in append (FIFO) order without a heap allocation for short
//! chains.

use std::fmt;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

/// One immutable node of an outgoing-metadata chain.
///
/// A chain is a singly linked list from the newest node to the oldest; the
/// oldest may be a base map. Each node records the cumulative entry count and
/// header-list size of the chain ending in it, so both are O(1) to read.
/// Nodes are shared between forks through `Arc` and never change.
pub struct MetadataDelta {
    parent: Option<Arc<MetadataDelta>>,
    entries: DeltaEntries,
    /// Entries in the chain ending here, base included.
    len: usize,
    /// Header-list size of the chain ending here, base included.
    size: usize,
    /// Nodes in the chain ending here, this one included.
    depth: usize,
}

/// What one node adds.
pub(crate) enum DeltaEntries {
    /// A base map; always the oldest node of its chain. Boxed so that the
    /// common one-pair node stays small.
    Base(Box<HeaderMap>),
    /// One appended pair (the common case: one allocation per append).
    One([(HeaderName, HeaderValue); 1]),
    /// Several pairs appended as one node, in order.
    Many(Box<[(HeaderName, HeaderValue)]>),
}

impl MetadataDelta {
    /// A node adding `entries` (of total header-list size `added_size`) on
    /// top of `parent`.
    #[inline]
    pub(crate) fn new(
        parent: Option<Arc<MetadataDelta>>,
        entries: DeltaEntries,
        added_size: usize,
    ) -> Self {
        let added_len = match &entries {
            DeltaEntries::Base(map) => map.len(),
            DeltaEntries::One(_) => 1,
            DeltaEntries::Many(pairs) => pairs.len(),
        };
        let (len, size, depth) = match &parent {
            Some(parent) => (parent.len, parent.size, parent.depth),
            None => (0, 0, 0),
        };
        Self {
            parent,
            entries,
            len: len + added_len,
            size: size + added_size,
            depth: depth + 1,
        }
    }

    /// Entries in the chain ending here, base included.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chain ending here holds no entries (only an empty base).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Header-list size (name + value + 32 per entry) of the chain ending
    /// here.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// The next older node, if any.
    pub fn parent(&self) -> Option<&MetadataDelta> {
        self.parent.as_deref()
    }

    /// The pairs this node appended, in order (empty for a base node).
    pub fn pairs(&self) -> &[(HeaderName, HeaderValue)] {
        match &self.entries {
            DeltaEntries::Base(_) => &[],
            DeltaEntries::One(pair) => pair,
            DeltaEntries::Many(pairs) => pairs,
        }
    }

    /// The first value of `name` among this node's entries and how many
    /// there are: one match on the node's kind, the one-pair node (the
    /// common one) read without a loop.
    #[inline]
    pub(crate) fn first_and_count(&self, name: &HeaderName) -> (Option<&HeaderValue>, usize) {
        match &self.entries {
            DeltaEntries::One([(pair_name, value)]) => {
                if pair_name == name {
                    (Some(value), 1)
                } else {
                    (None, 0)
                }
            }
            DeltaEntries::Many(pairs) => {
                let mut matching = pairs.iter().filter(|(pair_name, _)| pair_name == name);
                match matching.next() {
                    Some((_, first)) => (Some(first), 1 + matching.count()),
                    None => (None, 0),
                }
            }
            DeltaEntries::Base(map) => {
                let mut values = map.get_all(name).iter();
                match values.next() {
                    Some(first) => (Some(first), 1 + values.count()),
                    None => (None, 0),
                }
            }
        }
    }

    /// The base map, if this is a base node (always the oldest).
    pub fn base(&self) -> Option<&HeaderMap> {
        match &self.entries {
            DeltaEntries::Base(map) => Some(map),
            _ => None,
        }
    }

    /// Global index (in FIFO order over the whole chain) of this node's
    /// first entry.
    fn first_index(&self) -> usize {
        match &self.entries {
            DeltaEntries::Base(_) => 0,
            _ => self.len - self.pairs().len(),
        }
    }

    /// The oldest node of the chain ending here (the base node, if any).
    pub fn root(&self) -> &MetadataDelta {
        let mut node = self;
        while let Some(parent) = node.parent() {
            node = parent;
        }
        node
    }

    /// Calls `f` on every node from the oldest to `self`, in that order.
    ///
    /// Chains of up to [`INLINE_NODES`] nodes are reversed by (bounded)
    /// recursion; longer ones through one `Vec`.
    pub(crate) fn for_each_node_fifo<'a, F>(&'a self, f: &mut F)
    where
        F: FnMut(&'a MetadataDelta),
    {
        if self.depth <= INLINE_NODES {
            self.recurse_fifo(f);
        } else {
            let nodes = NodeStack::collect(self);
            for node in nodes.iter_fifo() {
                f(node);
            }
        }
    }

    /// Recursion depth is `self.depth`, at most [`INLINE_NODES`].
    fn recurse_fifo<'a, F>(&'a self, f: &mut F)
    where
        F: FnMut(&'a MetadataDelta),
    {
        if let Some(parent) = self.parent() {
            parent.recurse_fifo(f);
        }
        f(self);
    }
}

impl Drop for MetadataDelta {
    /// Unlinks the chain iteratively, so dropping a very long chain cannot
    /// overflow the stack.
    fn drop(&mut self) {
        let mut next = self.parent.take();
        while let Some(node) = next {
            // Fast path: a parent shared with a fork or a live handle just
            // loses one reference. (A racing drop that makes it unique
            // after this check runs this same loop from that node.)
            if Arc::strong_count(&node) > 1 {
                break;
            }
            match Arc::try_unwrap(node) {
                Ok(mut owned) => next = owned.parent.take(),
                Err(_shared) => break,
            }
        }
    }
}

impl fmt::Debug for MetadataDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataDelta")
            .field("len", &self.len)
            .field("size", &self.size)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

/// How many nodes a FIFO walk reverses on the stack before it needs a `Vec`.
pub(crate) const INLINE_NODES: usize = 32;

/// The nodes of a chain, newest first, ready to be walked oldest first.
#[allow(
    clippy::large_enum_variant,
    reason = "the inline array is the point: short chains reverse without a heap allocation"
)]
pub(crate) enum NodeStack<'a> {
    Inline {
        nodes: [Option<&'a MetadataDelta>; INLINE_NODES],
        len: usize,
    },
    Heap(Vec<&'a MetadataDelta>),
}

impl<'a> NodeStack<'a> {
    pub(crate) fn collect(head: &'a MetadataDelta) -> Self {
        let mut node = Some(head);
        if head.depth <= INLINE_NODES {
            let mut nodes = [None; INLINE_NODES];
            let mut len = 0;
            while let Some(current) = node {
                nodes[len] = Some(current);
                len += 1;
                node = current.parent();
            }
            Self::Inline { nodes, len }
        } else {
            let mut nodes = Vec::with_capacity(head.depth);
            while let Some(current) = node {
                nodes.push(current);
                node = current.parent();
            }
            Self::Heap(nodes)
        }
    }

    pub(crate) fn empty() -> Self {
        Self::Inline {
            nodes: [None; INLINE_NODES],
            len: 0,
        }
    }

    /// Number of nodes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Inline { len, .. } => *len,
            Self::Heap(nodes) => nodes.len(),
        }
    }

    /// The `i`-th node counting from the oldest.
    pub(crate) fn fifo(&self, i: usize) -> Option<&'a MetadataDelta> {
        let len = self.len();
        if i >= len {
            return None;
        }
        match self {
            Self::Inline { nodes, .. } => nodes[len - 1 - i],
            Self::Heap(nodes) => Some(nodes[len - 1 - i]),
        }
    }

    fn iter_fifo(&self) -> impl Iterator<Item = &'a MetadataDelta> + '_ {
        (0..self.len()).filter_map(|i| self.fifo(i))
    }
}

/// How many matching values one walk of [`GetAll`] buffers.
const GET_ALL_BATCH: usize = 8;

/// Every value of one key, in append order (base values first), found by
/// walking the chain; never allocates.
///
/// Returned by [`OutgoingMetadata::get_all`](super::OutgoingMetadata::get_all).
/// Each walk buffers the oldest 8 not-yet-returned matches on the stack, so
/// a key with `m` values costs `ceil(m / 8)` walks of the chain.
pub struct GetAll<'a> {
    key: &'a str,
    head: Option<&'a MetadataDelta>,
    base: Option<http::header::ValueIter<'a, HeaderValue>>,
    /// Matches of the current walk, newest first: `buffer[..buffered]`.
    buffer: [Option<(usize, &'a HeaderValue)>; GET_ALL_BATCH],
    buffered: usize,
    /// Whether the first walk (which also finds the base) has run.
    started: bool,
    /// Global index through which every chain match has been returned.
    returned_through: Option<usize>,
    /// Whether the chain holds matches the buffer could not take.
    more: bool,
}

impl<'a> GetAll<'a> {
    pub(crate) fn new(head: Option<&'a MetadataDelta>, key: &'a str) -> Self {
        Self {
            key,
            head,
            base: None,
            buffer: [None; GET_ALL_BATCH],
            buffered: 0,
            started: false,
            returned_through: None,
            more: true,
        }
    }

    /// Walks the chain for the oldest matches with a global index above
    /// `returned_through`, filling `buffer` (newest first).
    fn walk(&mut self) {
        let floor = self.returned_through;
        let first_walk = !self.started;
        self.started = true;
        let mut seen = 0usize;
        let mut node = self.head;
        while let Some(current) = node {
            if let Some(floor) = floor
                && current.len() <= floor + 1
            {
                break;
            }
            if first_walk && let Some(base) = current.base() {
                self.base = Some(base.get_all(self.key).into_iter());
            }
            let first = current.first_index();
            for (offset, (name, value)) in current.pairs().iter().enumerate().rev() {
                let index = first + offset;
                if floor.is_some_and(|floor| index <= floor) {
                    break;
                }
                if name.as_str().eq_ignore_ascii_case(self.key) {
                    // Keep the last GET_ALL_BATCH seen, i.e. the oldest.
                    self.buffer[seen % GET_ALL_BATCH] = Some((index, value));
                    seen += 1;
                }
            }
            node = current.parent();
        }
        self.more = seen > GET_ALL_BATCH;
        if seen > GET_ALL_BATCH {
            // Rotate so that buffer[..GET_ALL_BATCH] is newest first.
            self.buffer.rotate_left(seen % GET_ALL_BATCH);
        }
        self.buffered = seen.min(GET_ALL_BATCH);
    }
}

impl<'a> Iterator for GetAll<'a> {
    type Item = &'a HeaderValue;

    fn next(&mut self) -> Option<&'a HeaderValue> {
        if !self.started {
            self.walk();
        }
        if let Some(value) = self.base.as_mut().and_then(Iterator::next) {
            return Some(value);
        }
        if self.buffered == 0 && self.more {
            self.walk();
        }
        if self.buffered == 0 {
            return None;
        }
        self.buffered -= 1;
        let (index, value) = self.buffer[self.buffered]?;
        if self.buffered == 0 {
            self.returned_through = Some(index);
        }
        Some(value)
    }
}

impl fmt::Debug for GetAll<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GetAll")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Every entry of a chain in FIFO order: base entries first (in the base
/// map's iteration order), then appended pairs in append order.
///
/// Returned by [`OutgoingMetadata::iter`](super::OutgoingMetadata::iter).
/// Chains of up to 32 nodes are walked without a heap allocation.
pub struct Iter<'a> {
    nodes: NodeStack<'a>,
    node: usize,
    pair: usize,
    base: Option<http::header::Iter<'a, HeaderValue>>,
}

impl<'a> Iter<'a> {
    pub(crate) fn new(head: Option<&'a MetadataDelta>) -> Self {
        let nodes = head.map_or_else(NodeStack::empty, NodeStack::collect);
        let base = nodes
            .fifo(0)
            .and_then(MetadataDelta::base)
            .map(HeaderMap::iter);
        Self {
            nodes,
            node: 0,
            pair: 0,
            base,
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a HeaderName, &'a HeaderValue);

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.base.as_mut().and_then(Iterator::next) {
            return Some(entry);
        }
        while let Some(node) = self.nodes.fifo(self.node) {
            if let Some((name, value)) = node.pairs().get(self.pair) {
                self.pair += 1;
                return Some((name, value));
            }
            self.node += 1;
            self.pair = 0;
        }
        None
    }
}

impl fmt::Debug for Iter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter")
            .field("node", &self.node)
            .field("pair", &self.pair)
            .finish_non_exhaustive()
    }
}
