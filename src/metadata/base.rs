//! Making a base map fit to send: dropping the headers the transport
//! reserves without disturbing the order of the others.

use http::header::Entry;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::wire::keys;

/// How many entries [`drop_reserved`] moves aside on the stack; larger maps
/// use one `Vec`.
const INLINE_ENTRIES: usize = 32;

/// One drained entry: `None` for a further value of the previous name.
type Drained = (Option<HeaderName>, HeaderValue);

/// Removes every [reserved key](keys::RESERVED_KEYS) from `headers` and keeps
/// the others in their iteration (FIFO) order.
///
/// `HeaderMap::remove` swap-removes (the last entry moves into the removed
/// one's place), which would reorder what is left. Instead the map is
/// drained, which keeps its tables, and the kept entries are inserted back
/// in order: no allocation for a map of up to 32 entries (an incoming
/// request's metadata, say), and nothing at all when no key is reserved.
pub(crate) fn drop_reserved(headers: &mut HeaderMap) {
    if !headers.keys().any(keys::is_reserved_name) {
        return;
    }
    if headers.len() <= INLINE_ENTRIES {
        let mut kept: [Option<Drained>; INLINE_ENTRIES] = [const { None }; INLINE_ENTRIES];
        let mut len = 0;
        for (slot, entry) in kept.iter_mut().zip(unreserved(headers)) {
            *slot = Some(entry);
            len += 1;
        }
        insert_in_order(headers, kept[..len].iter_mut().filter_map(Option::take));
    } else {
        let kept: Vec<Drained> = unreserved(headers).collect();
        insert_in_order(headers, kept.into_iter());
    }
}

/// Drains `headers` (keeping its tables), yielding the entries whose name is
/// not reserved, in order.
fn unreserved(headers: &mut HeaderMap) -> impl Iterator<Item = Drained> + '_ {
    let mut keep = true;
    headers.drain().filter(move |(name, _)| {
        if let Some(name) = name {
            keep = !keys::is_reserved_name(name);
        }
        keep
    })
}

/// Inserts drained `entries` into `headers`, each name's values in order.
fn insert_in_order(headers: &mut HeaderMap, entries: impl Iterator<Item = Drained>) {
    let mut entries = entries.peekable();
    while let Some((name, value)) = entries.next() {
        // A drain starts each name's values with the name, so `None` here
        // cannot happen; skipping it keeps this panic-free regardless.
        let Some(name) = name else { continue };
        // Cannot fail: the map held at least these entries before.
        let Ok(entry) = headers.try_entry(name) else {
            continue;
        };
        let mut entry = match entry {
            Entry::Vacant(vacant) => vacant.insert_entry(value),
            Entry::Occupied(mut occupied) => {
                occupied.append(value);
                occupied
            }
        };
        while let Some((_, value)) = entries.next_if(|(name, _)| name.is_none()) {
            entry.append(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    fn pairs(headers: &HeaderMap) -> Vec<(&str, &str)> {
        headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap()))
            .collect()
    }

    #[test]
    fn reserved_keys_go_and_the_rest_keeps_its_order() {
        let mut headers = map(&[
            ("a", "1"),
            ("te", "trailers"),
            ("b", "2"),
            ("a", "3"),
            ("grpc-timeout", "1S"),
            ("grpc-timeout", "2S"),
            ("c", "4"),
            ("user-agent", "x"),
        ]);
        drop_reserved(&mut headers);
        assert_eq!(
            pairs(&headers),
            [("a", "1"), ("a", "3"), ("b", "2"), ("c", "4")]
        );
    }

    #[test]
    fn a_map_without_reserved_keys_is_untouched_and_large_maps_work() {
        let mut headers = map(&[("x", "1"), ("y", "2")]);
        let before = headers.clone();
        drop_reserved(&mut headers);
        assert_eq!(headers, before);

        let mut large = HeaderMap::new();
        large.insert("content-type", HeaderValue::from_static("application/grpc"));
        for i in 0..100 {
            let name = HeaderName::try_from(format!("k-{i}")).unwrap();
            large.append(name, HeaderValue::from(i));
        }
        drop_reserved(&mut large);
        let keys: Vec<_> = large.keys().map(HeaderName::as_str).collect();
        let expected: Vec<_> = (0..100).map(|i| format!("k-{i}")).collect();
        assert_eq!(keys, expected);
    }
}
