//! [`UnprovenPath`]: the method path of a server RPC whose method the
//! server has not yet been seen to serve, kept in that RPC's own state
//! (never in the handler) until the RPC proves the method or ends.

use std::fmt;

/// Paths up to this many bytes are copied inline, without an allocation;
/// longer ones are copied to the heap. 94 keeps the whole value at 96
/// bytes and holds most real paths (`/pkg.v1.Service/Method`).
const INLINE_CAPACITY: usize = 94;

/// A copy of a method path (`/pkg.Service/Method`).
pub(super) enum UnprovenPath {
    Inline {
        len: u8,
        bytes: [u8; INLINE_CAPACITY],
    },
    Heap(Box<str>),
}

impl UnprovenPath {
    pub(super) fn new(path: &str) -> Self {
        match u8::try_from(path.len()) {
            Ok(len) if path.len() <= INLINE_CAPACITY => {
                let mut bytes = [0; INLINE_CAPACITY];
                bytes[..path.len()].copy_from_slice(path.as_bytes());
                UnprovenPath::Inline { len, bytes }
            }
            _ => UnprovenPath::Heap(path.into()),
        }
    }

    pub(super) fn as_str(&self) -> &str {
        match self {
            UnprovenPath::Inline { len, bytes } => std::str::from_utf8(&bytes[..usize::from(*len)])
                .expect("a copy of a whole `str` is UTF-8"),
            UnprovenPath::Heap(path) => path,
        }
    }
}

impl fmt::Debug for UnprovenPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_paths_stay_inline_and_long_ones_go_to_the_heap() {
        let short = "/grpc.health.v1.Health/Check";
        assert!(matches!(
            UnprovenPath::new(short),
            UnprovenPath::Inline { .. }
        ));
        assert_eq!(UnprovenPath::new(short).as_str(), short);
        let fits = format!("/{}/é", "s".repeat(INLINE_CAPACITY - 4));
        assert_eq!(fits.len(), INLINE_CAPACITY);
        assert!(matches!(
            UnprovenPath::new(&fits),
            UnprovenPath::Inline { .. }
        ));
        assert_eq!(UnprovenPath::new(&fits).as_str(), fits);
        let long = format!("{fits}x");
        assert!(matches!(UnprovenPath::new(&long), UnprovenPath::Heap(_)));
        assert_eq!(UnprovenPath::new(&long).as_str(), long);
        assert_eq!(UnprovenPath::new("").as_str(), "");
        assert_eq!(std::mem::size_of::<UnprovenPath>(), 96);
    }
}
