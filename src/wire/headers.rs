//! Looking a name up in a request's or a response's headers: small maps
//! are scanned, larger ones hashed.

use http::{HeaderMap, HeaderName, HeaderValue};

/// Maps holding at most this many values are searched by a scan instead of
/// a hash lookup.
///
/// A lookup FNV-hashes the name and probes; a scan compares names in order
/// (a standard name differs from a custom one on its tag, without its text
/// being read), about 2.5 ns per entry when each lookup waits for the one
/// before, much less when lookups overlap. Measured on fresh 10-12 entry
/// maps (`x-scope-orgid` plus other custom names): the scan wins when the
/// name is among the first half of the entries (by 2-8 ns one at a time, by
/// ~13 ns back to back) and loses 4-15 ns when it is the last of 10-12; at
/// 16 or 32 entries the hash wins. A gRPC request carries about ten
/// headers, its trailers one or two; the limit stays where the scan's worst
/// case is small.
pub(crate) const SCAN_LIMIT: usize = 12;

/// How many values a name has, when it does not have exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotOne {
    /// None.
    Missing,
    /// This many (two or more).
    Several(usize),
}

/// The first value of `name` in `headers`, as [`HeaderMap::get`] gives it.
#[inline(always)]
pub(crate) fn first_value<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Option<&'a HeaderValue> {
    if headers.len() > SCAN_LIMIT {
        return headers.get(name);
    }
    // A loop rather than an iterator adapter, so that it is compiled into
    // the caller, not called per entry. `iter` yields a name's values
    // together, its first value first.
    for (key, value) in headers {
        if key == name {
            return Some(value);
        }
    }
    None
}

/// The only value of `name` in `headers`: none or several is an error
/// that says how many.
#[inline(always)]
pub(crate) fn single_value<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Result<&'a HeaderValue, NotOne> {
    if headers.len() > SCAN_LIMIT {
        return exactly_one(headers.get_all(name).iter());
    }
    if headers.keys_len() == headers.len() {
        // No name has a second value, so the first match is the only one:
        // the scan stops there.
        return first_value(headers, name).ok_or(NotOne::Missing);
    }
    exactly_one(
        headers
            .iter()
            .filter_map(|(key, value)| (key == name).then_some(value)),
    )
}

/// The only item of `values`, or how many there are.
#[inline]
fn exactly_one<'a>(
    mut values: impl Iterator<Item = &'a HeaderValue>,
) -> Result<&'a HeaderValue, NotOne> {
    let first = values.next().ok_or(NotOne::Missing)?;
    match values.count() {
        0 => Ok(first),
        more => Err(NotOne::Several(more + 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: HeaderName = HeaderName::from_static("x-scope-orgid");

    /// A map of `before` other names, `name` with `values`, then `after`
    /// other names; `repeat` gives one of the others a second value.
    fn map(before: usize, values: &[&'static str], after: usize, repeat: bool) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for i in 0..before {
            headers.append(
                HeaderName::try_from(format!("x-before-{i}")).unwrap(),
                HeaderValue::from_static("b"),
            );
        }
        for value in values {
            headers.append(NAME, HeaderValue::from_static(value));
        }
        for i in 0..after {
            headers.append(
                HeaderName::try_from(format!("x-after-{i}")).unwrap(),
                HeaderValue::from_static("a"),
            );
        }
        if repeat {
            headers.append("x-before-0", HeaderValue::from_static("again"));
        }
        headers
    }

    #[test]
    fn small_and_large_maps_answer_alike() {
        for (before, after) in [(0, 0), (0, 3), (5, 5), (11, 0), (0, 11), (20, 20)] {
            for repeat in [false, true] {
                let none = map(before, &[], after, repeat);
                assert_eq!(first_value(&none, &NAME), None);
                assert_eq!(single_value(&none, &NAME), Err(NotOne::Missing));
                let one = map(before, &["a"], after, repeat);
                assert_eq!(first_value(&one, &NAME).unwrap(), "a");
                assert_eq!(single_value(&one, &NAME).unwrap(), "a");
                let two = map(before, &["a", "b"], after, repeat);
                assert_eq!(first_value(&two, &NAME).unwrap(), "a", "the first, as get");
                assert_eq!(single_value(&two, &NAME), Err(NotOne::Several(2)));
                for headers in [&none, &one, &two] {
                    assert_eq!(first_value(headers, &NAME), headers.get(&NAME));
                }
            }
        }
    }
}
