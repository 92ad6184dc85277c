//! [`StaticPair`]: the checked `'static` pair behind `append_static` and
//! `MetadataEntry::from_static` (one table pass over each string for the
//! usual pair), turned into header types without allocating.

use http::{HeaderName, HeaderValue};

use super::MetadataError;
use super::key::{self, ENTRY_OVERHEAD};

/// A pair of `'static` strings that passed the gRPC rules with an already
/// lower-case key, so that `HeaderName::from_static` and
/// `HeaderValue::from_static` cannot panic on it. Made by
/// [`append_static`](super::OutgoingMetadata::append_static), which keeps the
/// strings' own lengths as the entry size, and by
/// [`MetadataEntry::from_static`](super::MetadataEntry::from_static).
pub(crate) struct StaticPair {
    key: &'static str,
    value: &'static str,
}

impl StaticPair {
    /// Checks `key` and `value` against the gRPC rules; `Ok(None)` if the
    /// key has upper case (it needs a lowered copy).
    #[inline]
    pub(crate) fn check(
        key: &'static str,
        value: &'static str,
    ) -> Result<Option<Self>, MetadataError> {
        if key::is_plain_pair(key.as_bytes(), value.as_bytes()) {
            Ok(Some(Self { key, value }))
        } else {
            Self::check_slow(key, value)
        }
    }

    /// [`check`](Self::check) for a pair that is not plain: says why it is
    /// refused, or `Ok(None)` for an upper-case key.
    #[cold]
    #[inline(never)]
    fn check_slow(key: &str, value: &str) -> Result<Option<Self>, MetadataError> {
        let checked = key::check_ascii_pair_slow(key.as_bytes(), value.as_bytes())?;
        // A plain pair would not have come here.
        debug_assert!(checked.has_upper);
        Ok(None)
    }

    /// The pair's size in a header list: key + value + 32 bytes.
    #[inline]
    pub(crate) fn size(&self) -> usize {
        self.key.len() + self.value.len() + ENTRY_OVERHEAD
    }

    /// The header name and value, built without allocating.
    #[inline]
    pub(crate) fn into_parts(self) -> (HeaderName, HeaderValue) {
        // Neither can panic: `check` accepted only `0-9 a-z - _ .` keys of
        // at most `MAX_KEY_LEN` bytes, a subset of what
        // `HeaderName::from_static` accepts (tested over every byte), and
        // printable ASCII values, a subset of what
        // `HeaderValue::from_static` accepts.
        (
            HeaderName::from_static(self.key),
            HeaderValue::from_static(self.value),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::key::MAX_KEY_LEN;

    /// The keys and values `StaticPair::check` accepts are a subset of what
    /// `HeaderName::from_static` / `HeaderValue::from_static` accept, so
    /// building them later cannot panic: every byte, alone and inside a key.
    #[test]
    fn static_pairs_never_make_from_static_panic() {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let mut accepted_keys = 0;
        for byte in 0..=u8::MAX {
            let ch = char::from(byte);
            for key in [
                ch.to_string(),
                format!("x-{ch}"),
                format!("{ch}-k"),
                format!("{ch}{ch}"),
            ] {
                let key = leak(key);
                if let Ok(Some(pair)) = StaticPair::check(key, "v") {
                    accepted_keys += 1;
                    let built = std::panic::catch_unwind(|| pair.into_parts().0);
                    assert_eq!(built.expect("from_static panicked").as_str(), key);
                }
            }
            let value = leak(format!("a{ch}b"));
            if let Ok(Some(pair)) = StaticPair::check("x-k", value) {
                let built = std::panic::catch_unwind(|| pair.into_parts().1);
                assert_eq!(
                    built.expect("from_static panicked").as_bytes(),
                    value.as_bytes()
                );
            }
        }
        // 0-9 a-z - _ . : 39 bytes, each in 4 shapes (minus reserved/-bin).
        assert!(accepted_keys >= 39 * 4 - 4, "{accepted_keys}");
        // The longest accepted key.
        let longest = leak("k".repeat(MAX_KEY_LEN));
        let pair = StaticPair::check(longest, "v").unwrap().unwrap();
        assert_eq!(pair.into_parts().0.as_str().len(), MAX_KEY_LEN);
        assert!(StaticPair::check(leak("k".repeat(MAX_KEY_LEN + 1)), "v").is_err());
        assert!(StaticPair::check("", "v").is_err());
        // Upper case is not a static pair: it is lowered into a copy.
        assert!(StaticPair::check("X-k", "v").unwrap().is_none());
    }
}
