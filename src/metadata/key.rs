//! Key and value rules, and [`MetadataEntry`]: one validated key/value pair.

use std::fmt;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};

use super::MetadataError;
use super::static_pair::StaticPair;
use crate::wire::base64::base64_encode_no_pad;
use crate::wire::keys::{is_binary, is_binary_any_case, is_reserved, is_reserved_lower};

/// Longest key an `http::HeaderName` accepts.
pub(crate) const MAX_KEY_LEN: usize = (1 << 16) - 1;

/// Per-entry overhead in HTTP/2's header-list size (RFC 9113 §6.5.2).
pub(crate) const ENTRY_OVERHEAD: usize = 32;

/// The size an entry adds to a header list: name + value + 32.
#[inline]
pub(crate) fn entry_size(name: &HeaderName, value: &HeaderValue) -> usize {
    name.as_str().len() + value.len() + ENTRY_OVERHEAD
}

/// Whether the key must carry a binary value or an ASCII one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    Ascii,
    Binary,
}

/// A key that passed the gRPC key rules.
pub(crate) struct CheckedKey {
    pub(crate) has_upper: bool,
}

const INVALID: u8 = 1;
const UPPER: u8 = 2;

/// Per byte: 0 for `0-9 a-z - _ .`, [`UPPER`] for `A-Z`, else [`INVALID`].
const KEY_BYTE_CLASS: [u8; 256] = {
    let mut table = [INVALID; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        if b.is_ascii_digit() || b.is_ascii_lowercase() || b == b'-' || b == b'_' || b == b'.' {
            table[byte] = 0;
        } else if b.is_ascii_uppercase() {
            table[byte] = UPPER;
        }
        byte += 1;
    }
    table
};

#[inline]
fn check_key(key: &[u8], kind: ValueKind) -> Result<CheckedKey, MetadataError> {
    if key.is_empty() {
        return Err(MetadataError::EmptyKey);
    }
    if key.len() > MAX_KEY_LEN {
        return Err(MetadataError::KeyTooLong {
            len: key.len(),
            max: MAX_KEY_LEN,
        });
    }
    let mut classes = 0u8;
    for &byte in key {
        classes |= KEY_BYTE_CLASS[usize::from(byte)];
    }
    if classes & INVALID != 0 {
        let index = key
            .iter()
            .position(|&byte| KEY_BYTE_CLASS[usize::from(byte)] & INVALID != 0)
            .unwrap_or(0);
        return Err(MetadataError::InvalidKeyByte {
            key: String::from_utf8_lossy(key).into_owned(),
            byte: key[index],
            index,
        });
    }
    let has_upper = classes & UPPER != 0;
    if is_reserved(key) {
        return Err(MetadataError::ReservedKey { key: lowered(key) });
    }
    match (is_binary_any_case(key), kind) {
        (true, ValueKind::Ascii) => {
            Err(MetadataError::BinaryKeyWithAsciiValue { key: lowered(key) })
        }
        (false, ValueKind::Binary) => {
            Err(MetadataError::AsciiKeyWithBinaryValue { key: lowered(key) })
        }
        _ => Ok(CheckedKey { has_upper }),
    }
}

fn lowered(key: &[u8]) -> String {
    String::from_utf8_lossy(key).to_ascii_lowercase()
}

/// Per byte: 0 for printable ASCII (`0x20..=0x7e`), else [`INVALID`].
const VALUE_BYTE_CLASS: [u8; 256] = {
    let mut table = [INVALID; 256];
    let mut byte = 0x20;
    while byte <= 0x7e {
        table[byte] = 0;
        byte += 1;
    }
    table
};

/// The fast, branch-light check of the usual pair: a non-empty,
/// already lower-case key of `0-9 a-z - _ .` within [`MAX_KEY_LEN`] bytes
/// that is neither reserved nor `-bin`, and a printable ASCII value. One
/// table pass over each; `false` sends the caller to the full check.
#[inline]
pub(crate) fn is_plain_pair(key: &[u8], value: &[u8]) -> bool {
    let key_classes = key.iter().fold(0, |classes, &byte| {
        classes | KEY_BYTE_CLASS[usize::from(byte)]
    });
    let value_classes = value.iter().fold(0, |classes, &byte| {
        classes | VALUE_BYTE_CLASS[usize::from(byte)]
    });
    key_classes | value_classes == 0
        && !key.is_empty()
        && key.len() <= MAX_KEY_LEN
        && !is_binary(key)
        && !is_reserved(key)
}

/// Checks an ASCII pair: one table pass for the usual pair, the full
/// check (out of line) for anything else, e.g. to lower an upper-case key.
#[inline]
fn check_ascii_pair(key: &[u8], value: &[u8]) -> Result<(), MetadataError> {
    if is_plain_pair(key, value) {
        return Ok(());
    }
    check_ascii_pair_slow(key, value).map(drop)
}

/// The full check of an ASCII pair: says why it is refused.
#[cold]
#[inline(never)]
pub(crate) fn check_ascii_pair_slow(key: &[u8], value: &[u8]) -> Result<CheckedKey, MetadataError> {
    let checked = check_key(key, ValueKind::Ascii)?;
    check_ascii_value(key, value)?;
    Ok(checked)
}

#[inline]
fn check_ascii_value(key: &[u8], value: &[u8]) -> Result<(), MetadataError> {
    match value.iter().position(|byte| !(0x20..=0x7e).contains(byte)) {
        None => Ok(()),
        Some(index) => Err(MetadataError::InvalidValueByte {
            key: lowered(key),
            byte: value[index],
            index,
        }),
    }
}

/// Builds the header name of a key that passed [`check_key`] (one copy,
/// lowering upper case, unless it is a well-known header name).
fn copied_name(key: &[u8]) -> Result<HeaderName, MetadataError> {
    // Cannot fail for a checked key (our charset is a subset of HTTP's token
    // charset and the length was checked), but stay panic-free regardless.
    HeaderName::from_bytes(key).map_err(|_| MetadataError::InvalidKeyByte {
        key: String::from_utf8_lossy(key).into_owned(),
        byte: key[0],
        index: 0,
    })
}

/// Wraps a checked value (printable ASCII or base64) without copying it.
fn shared_value(key: &[u8], value: Bytes) -> Result<HeaderValue, MetadataError> {
    // Cannot fail for a checked value, but stay panic-free regardless.
    let first_byte = value.first().copied().unwrap_or(0);
    HeaderValue::from_maybe_shared(value).map_err(|_| MetadataError::InvalidValueByte {
        key: lowered(key),
        byte: first_byte,
        index: 0,
    })
}

/// One validated metadata key/value pair, ready to append.
///
/// Building an entry does all the checking (key charset, reserved keys,
/// `-bin` ⇔ binary value, value charset) and any copying or base64 encoding;
/// appending it to an [`OutgoingMetadata`](super::OutgoingMetadata) then only
/// checks the size limit. Build an entry once and append it many times to
/// pay the checks once.
///
/// ```
/// use tonic_hotpath::metadata::{MetadataEntry, MetadataError};
///
/// let entry = MetadataEntry::from_static("x-Trace-Id", "abc")?;
/// assert_eq!(entry.key(), "x-trace-id");
/// assert_eq!(entry.value().as_bytes(), b"abc");
///
/// let bin = MetadataEntry::binary("x-token-bin", &[0xff, 0x00])?;
/// assert_eq!(bin.value().as_bytes(), b"/wA"); // base64, no padding, like tonic
///
/// assert!(matches!(
///     MetadataEntry::ascii("grpc-status", "0"),
///     Err(MetadataError::ReservedKey { .. })
/// ));
/// # Ok::<(), MetadataError>(())
/// ```
#[derive(Clone)]
pub struct MetadataEntry {
    name: HeaderName,
    value: HeaderValue,
}

impl MetadataEntry {
    /// An ASCII entry from `'static` strings: neither key nor value is copied
    /// (unless the key has upper case, which is lowered into a copy).
    #[inline]
    pub fn from_static(key: &'static str, value: &'static str) -> Result<Self, MetadataError> {
        let (name, value) = match StaticPair::check(key, value)? {
            Some(pair) => pair.into_parts(),
            // Cannot panic: `check` accepted the value (printable ASCII).
            None => (
                copied_name(key.as_bytes())?,
                HeaderValue::from_static(value),
            ),
        };
        Ok(Self { name, value })
    }

    /// An ASCII entry from `'static` strings, checkable at compile time:
    /// `None` unless `key` is a valid, already lower-case, non-reserved,
    /// non-`-bin` gRPC key and `value` printable ASCII. Use it in a `const`
    /// item (or through [`metadata_entry!`](crate::metadata_entry), which
    /// turns `None` into a compile error) so that each append of the entry
    /// does no checking and no copying at all; [`from_static`](Self::from_static)
    /// says why an entry is refused, and lowers upper-case keys.
    ///
    /// ```
    /// use tonic_hotpath::metadata::{MetadataEntry, OutgoingMetadata};
    ///
    /// const TRACE: Option<MetadataEntry> = MetadataEntry::try_from_static("x-trace-id", "abc");
    /// assert!(TRACE.is_some());
    /// assert!(MetadataEntry::try_from_static("X-Trace-Id", "abc").is_none()); // upper case
    /// assert!(MetadataEntry::try_from_static("te", "trailers").is_none()); // reserved
    /// assert!(MetadataEntry::try_from_static("x-k", "line\n").is_none()); // not printable
    /// ```
    #[must_use]
    pub const fn try_from_static(key: &'static str, value: &'static str) -> Option<Self> {
        let (key_bytes, value_bytes) = (key.as_bytes(), value.as_bytes());
        if key_bytes.is_empty() || key_bytes.len() > MAX_KEY_LEN {
            return None;
        }
        let mut i = 0;
        while i < key_bytes.len() {
            // Upper case is refused too: lowering it needs a runtime copy.
            if KEY_BYTE_CLASS[key_bytes[i] as usize] != 0 {
                return None;
            }
            i += 1;
        }
        if is_reserved_lower(key_bytes) || is_binary(key_bytes) {
            return None;
        }
        let mut i = 0;
        while i < value_bytes.len() {
            if !matches!(value_bytes[i], 0x20..=0x7e) {
                return None;
            }
            i += 1;
        }
        // Neither can panic: `0-9 a-z - _ .` within `MAX_KEY_LEN` bytes is a
        // subset of what `HeaderName::from_static` accepts, and printable
        // ASCII of what `HeaderValue::from_static` accepts.
        Some(Self {
            name: HeaderName::from_static(key),
            value: HeaderValue::from_static(value),
        })
    }

    /// An ASCII entry from borrowed strings: the key and the value are each
    /// copied once.
    pub fn ascii(key: &str, value: &str) -> Result<Self, MetadataError> {
        check_ascii_pair(key.as_bytes(), value.as_bytes())?;
        let name = copied_name(key.as_bytes())?;
        let value = shared_value(key.as_bytes(), Bytes::copy_from_slice(value.as_bytes()))?;
        Ok(Self { name, value })
    }

    /// An ASCII entry whose value is already held as [`Bytes`]: the value is
    /// checked but not copied.
    pub fn ascii_bytes(key: &str, value: Bytes) -> Result<Self, MetadataError> {
        check_ascii_pair(key.as_bytes(), &value)?;
        let name = copied_name(key.as_bytes())?;
        let value = shared_value(key.as_bytes(), value)?;
        Ok(Self { name, value })
    }

    /// A binary entry: `key` must end in `-bin`; `value` is base64-encoded
    /// (standard alphabet, no padding) as tonic's `MetadataValue<Binary>`
    /// does, so a tonic server reads it back with `get_bin`.
    pub fn binary(key: &str, value: &[u8]) -> Result<Self, MetadataError> {
        check_key(key.as_bytes(), ValueKind::Binary)?;
        let name = copied_name(key.as_bytes())?;
        let encoded = Bytes::from(base64_encode_no_pad(value));
        let value = HeaderValue::from_maybe_shared(encoded).map_err(|_| {
            MetadataError::InvalidValueByte {
                key: lowered(key.as_bytes()),
                byte: 0,
                index: 0,
            }
        })?;
        Ok(Self { name, value })
    }

    /// The (lower-case) key.
    pub fn key(&self) -> &str {
        self.name.as_str()
    }

    /// The key as an `http` header name.
    pub fn name(&self) -> &HeaderName {
        &self.name
    }

    /// The value as sent on the wire (base64 for `-bin` keys).
    pub fn value(&self) -> &HeaderValue {
        &self.value
    }

    /// Whether this entry carries a binary (`-bin`) value.
    pub fn is_binary(&self) -> bool {
        is_binary(self.name.as_str().as_bytes())
    }

    /// The entry's size in a header list: key + value + 32 bytes.
    #[inline]
    pub fn size(&self) -> usize {
        entry_size(&self.name, &self.value)
    }

    /// The header name and value.
    #[inline]
    pub fn into_parts(self) -> (HeaderName, HeaderValue) {
        (self.name, self.value)
    }
}

/// A [`MetadataEntry`] from `'static` strings, checked at compile time: an
/// invalid, upper-case, reserved or `-bin` key, or a value that is not
/// printable ASCII, fails the build instead of returning an error. Appending
/// the entry ([`append_entry`](crate::metadata::OutgoingMetadata::append_entry))
/// then checks only the size limit.
///
/// ```
/// use tonic_hotpath::metadata::{MetadataEntry, OutgoingMetadata};
///
/// const TENANT: MetadataEntry = tonic_hotpath::metadata_entry!("x-tenant", "acme");
/// let md = OutgoingMetadata::new().append_entry(TENANT)?;
/// assert_eq!(md.get("x-tenant").unwrap(), "acme");
/// # Ok::<(), tonic_hotpath::metadata::MetadataError>(())
/// ```
///
/// ```compile_fail
/// // `te` is reserved: this does not compile.
/// const TE: tonic_hotpath::metadata::MetadataEntry = tonic_hotpath::metadata_entry!("te", "trailers");
/// ```
#[macro_export]
macro_rules! metadata_entry {
    ($key:expr, $value:expr $(,)?) => {
        const {
            $crate::metadata::MetadataEntry::try_from_static($key, $value)
                .expect("invalid gRPC metadata entry (MetadataEntry::from_static says why)")
        }
    };
}

impl fmt::Debug for MetadataEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataEntry")
            .field("key", &self.key())
            .field("value", &Redacted)
            .finish()
    }
}

/// Stands for a value in `Debug` output: metadata carries credentials,
/// and every key a chain can hold is the caller's own (the protocol headers
/// whose values were safe to show are all reserved).
pub(crate) struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::keys::RESERVED_KEYS;

    /// The fast check accepts exactly the pairs the full check accepts with
    /// a lower-case key.
    #[test]
    fn plain_pair_check_agrees_with_the_full_check() {
        let full = |key: &[u8], value: &[u8]| {
            check_key(key, ValueKind::Ascii).is_ok_and(|checked| !checked.has_upper)
                && check_ascii_value(key, value).is_ok()
        };
        let mut keys: Vec<Vec<u8>> = RESERVED_KEYS
            .iter()
            .map(|k| k.as_bytes().to_vec())
            .collect();
        keys.extend(
            [
                &b""[..],
                b"-bin",
                b"x-bin",
                b"x-Bin",
                b"bin",
                b"te",
                b"tee",
                b"t",
            ]
            .map(<[u8]>::to_vec),
        );
        for byte in 0..=u8::MAX {
            keys.extend([
                vec![byte],
                vec![b'x', byte, b'y'],
                [b"te".as_slice(), &[byte]].concat(),
            ]);
        }
        for key in &keys {
            for byte in 0..=u8::MAX {
                let value = [b'a', byte];
                assert_eq!(
                    is_plain_pair(key, &value),
                    full(key, &value),
                    "{key:?} {value:?}"
                );
            }
        }
    }

    #[test]
    fn upper_case_static_key_is_lowered() {
        let entry = MetadataEntry::from_static("X-Up", "v").unwrap();
        assert_eq!(entry.key(), "x-up");
    }
}
