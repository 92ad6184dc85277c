//! Cortex's tenant-id rules as one pass over the bytes of a header value.
//!
//! The rules (cortexproject/cortex `pkg/util/users/tenant.go`):
//! - characters `a-z A-Z 0-9 ! - _ . * ' ( )`,
//! - at most `OrgId::MAX_LEN` (150) bytes,
//! - not `.` or `..`,
//! - not one of Cortex's reserved storage names (`OrgId::RESERVED`).
//!
//! On top of Cortex, an empty id is refused: Cortex lets `""` through
//! `ValidTenantID`, which turns `"a|"` into the tenants `["", "a"]`.

use super::org_id_error::InvalidOrgIdError;

/// The longest valid org id, in bytes (Cortex's `MaxTenantIDLength`).
pub(crate) const MAX_ORG_ID_LEN: usize = 150;

/// Ids Cortex refuses because they name objects in its block storage layout
/// (`__markers__` directories, the `user-index.json.gz` bucket index). They
/// are refused here too, so an id that passes this crate passes Cortex.
pub(crate) const RESERVED_ORG_IDS: [&str; 2] = ["__markers__", "user-index.json.gz"];

/// The separator between the tenants of a federated (multi-tenant) id.
pub(crate) const TENANT_SEPARATOR: u8 = b'|';

/// `ALLOWED[b]` is true when byte `b` may appear in an org id.
static ALLOWED: [bool; 256] = allowed_table();

const fn allowed_table() -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(c, b'!' | b'-' | b'_' | b'.' | b'*' | b'\'' | b'(' | b')');
        b += 1;
    }
    table
}

/// Returns true when `byte` may appear in an org id.
#[inline]
pub(crate) fn is_allowed_byte(byte: u8) -> bool {
    ALLOWED[usize::from(byte)]
}

/// Checks one org id against every rule. `offset` is where `id` starts in
/// the header value it came from, so errors report positions in that value.
#[inline]
pub(crate) fn check_org_id(id: &[u8], offset: usize) -> Result<(), InvalidOrgIdError> {
    if let Some(position) = id.iter().position(|&b| !is_allowed_byte(b)) {
        return Err(InvalidOrgIdError::Character {
            byte: id[position],
            position: offset + position,
        });
    }
    check_shape(id, offset)
}

/// The rules that look at the whole id rather than at each byte.
#[inline]
fn check_shape(id: &[u8], offset: usize) -> Result<(), InvalidOrgIdError> {
    match id {
        [] => Err(InvalidOrgIdError::Empty { position: offset }),
        b"." | b".." => Err(InvalidOrgIdError::DotSegment),
        _ if id.len() > MAX_ORG_ID_LEN => Err(InvalidOrgIdError::TooLong { len: id.len() }),
        _ => match RESERVED_ORG_IDS.iter().find(|r| r.as_bytes() == id) {
            Some(reserved) => Err(InvalidOrgIdError::Reserved { name: reserved }),
            None => Ok(()),
        },
    }
}

/// Validates a single org id and returns it as `&str`.
///
/// The rule pass proves every byte is ASCII, so the conversion to `&str`
/// that follows cannot fail; it runs std's word-at-a-time ASCII fast path
/// (this module has no `unsafe` to skip it).
///
/// ```
/// use tonic_hotpath::tenant::validate_org_id;
///
/// assert_eq!(validate_org_id(b"team-a").unwrap(), "team-a");
/// let err = validate_org_id(b"team a").unwrap_err();
/// assert_eq!(err.to_string(), "org id has unsupported character ' ' at byte 4");
/// ```
pub fn validate_org_id(id: &[u8]) -> Result<&str, InvalidOrgIdError> {
    check_org_id(id, 0)?;
    ascii_str(id, 0)
}

/// Converts validated (hence ASCII) bytes to `&str`. The error arm is
/// unreachable after [`check_org_id`]; it still maps to an error value
/// rather than a panic.
#[inline]
pub(crate) fn ascii_str(id: &[u8], offset: usize) -> Result<&str, InvalidOrgIdError> {
    std::str::from_utf8(id).map_err(|e| {
        let position = e.valid_up_to();
        InvalidOrgIdError::Character {
            byte: id[position],
            position: offset + position,
        }
    })
}

/// The tenants an `x-scope-orgid` value names, by dskit's `TenantIDs`
/// rule: the value split on `|`, each member checked (the first invalid one
/// is the error, its position in the whole value), then sorted and
/// de-duplicated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tenants<'a> {
    /// One tenant (`a`, or `a|a`: its first member, borrowed), checked:
    /// its bytes are allowed org-id characters, all ASCII. (Bytes, not
    /// `str`: an owned id copies them without a second pass; a borrowed
    /// one reads them with [`ascii_str`].)
    One(&'a [u8]),
    /// Several distinct tenants (`a|b`); the position of the first `|`.
    Several { separator: usize },
}

/// Classifies one `x-scope-orgid` value: the one place every part (the
/// extractors, the server layer, the limits, the metrics' tenant
/// attribute) sorts a value into one tenant, several, or invalid.
#[inline]
pub(crate) fn classify(value: &[u8]) -> Result<Tenants<'_>, InvalidOrgIdError> {
    match check_org_id(value, 0) {
        Ok(()) => Ok(Tenants::One(value)),
        Err(InvalidOrgIdError::Character {
            byte: TENANT_SEPARATOR,
            position,
        }) => classify_several(value, position),
        Err(invalid) => Err(invalid),
    }
}

/// [`classify`] for a value with a `|` at `separator` (the first byte the
/// single-id rules refused).
#[cold]
fn classify_several(value: &[u8], separator: usize) -> Result<Tenants<'_>, InvalidOrgIdError> {
    let mut offset = 0;
    let mut first: Option<&[u8]> = None;
    let mut distinct = false;
    for member in value.split(|&b| b == TENANT_SEPARATOR) {
        check_org_id(member, offset)?;
        match first {
            None => first = Some(member),
            Some(first) => distinct |= first != member,
        }
        offset += member.len() + 1;
    }
    match (distinct, first) {
        (false, Some(member)) => Ok(Tenants::One(member)),
        _ => Ok(Tenants::Several { separator }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(id: &[u8]) -> InvalidOrgIdError {
        check_org_id(id, 0).unwrap_err()
    }

    #[test]
    fn every_allowed_character_passes_alone_and_in_an_id() {
        let allowed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!-_.*'()";
        for c in allowed.bytes() {
            assert!(is_allowed_byte(c), "{}", c as char);
            let id = [b'x', c, b'y'];
            assert_eq!(validate_org_id(&id).unwrap().as_bytes(), id);
        }
        assert_eq!(validate_org_id(allowed.as_bytes()).unwrap(), allowed);
    }

    #[test]
    fn exactly_the_allowed_characters_pass() {
        let allowed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!-_.*'()";
        let count = (0..=255u8).filter(|&b| is_allowed_byte(b)).count();
        assert_eq!(count, allowed.len());
        for b in 0..=255u8 {
            assert_eq!(is_allowed_byte(b), allowed.as_bytes().contains(&b), "{b}");
        }
    }

    #[test]
    fn neighbours_of_allowed_ranges_are_refused() {
        // Just outside 0-9, A-Z, a-z, and the punctuation between them.
        for b in [
            b'/', b':', b'@', b'[', b'`', b'{', b' ', b'"', b'#', b'$', b'%', b'&', b'+', b',',
            b';', b'<', b'=', b'>', b'?', b'\\', b']', b'^', b'|', b'}', b'~', b'\t', 0, 0x7f,
            0x80, 0xff,
        ] {
            assert_eq!(
                err(&[b'a', b]),
                InvalidOrgIdError::Character {
                    byte: b,
                    position: 1
                }
            );
        }
    }

    #[test]
    fn length_boundary_is_150_bytes() {
        let ok = vec![b'a'; MAX_ORG_ID_LEN];
        assert!(check_org_id(&ok, 0).is_ok());
        let long = vec![b'a'; MAX_ORG_ID_LEN + 1];
        assert_eq!(err(&long), InvalidOrgIdError::TooLong { len: 151 });
        assert_eq!(
            err(&long).to_string(),
            "org id is 151 bytes long, the limit is 150"
        );
    }

    #[test]
    fn dot_segments_are_refused_but_dots_inside_ids_are_fine() {
        assert_eq!(err(b"."), InvalidOrgIdError::DotSegment);
        assert_eq!(err(b".."), InvalidOrgIdError::DotSegment);
        for ok in [&b"..."[..], b".a", b"a.", b"a..b"] {
            assert!(check_org_id(ok, 0).is_ok());
        }
    }

    #[test]
    fn empty_and_reserved_ids_are_refused() {
        assert_eq!(err(b""), InvalidOrgIdError::Empty { position: 0 });
        assert_eq!(
            err(b"__markers__"),
            InvalidOrgIdError::Reserved {
                name: "__markers__"
            }
        );
        assert_eq!(
            err(b"user-index.json.gz"),
            InvalidOrgIdError::Reserved {
                name: "user-index.json.gz"
            }
        );
        assert!(check_org_id(b"__markers__x", 0).is_ok());
        assert!(check_org_id(b"user-index.json", 0).is_ok());
    }

    #[test]
    fn positions_include_the_offset_and_name_the_first_bad_byte() {
        assert_eq!(
            check_org_id(b"ab%c$", 7).unwrap_err(),
            InvalidOrgIdError::Character {
                byte: b'%',
                position: 9
            }
        );
    }

    #[test]
    fn a_value_names_one_tenant_several_or_is_invalid_as_dskit_reads_it() {
        assert_eq!(classify(b"team-a"), Ok(Tenants::One(b"team-a")));
        assert_eq!(classify(b"a|a"), Ok(Tenants::One(b"a")), "de-duplicated");
        assert_eq!(classify(b"b|a|b"), Ok(Tenants::Several { separator: 1 }));
        assert_eq!(
            classify(b"a|b c"),
            Err(InvalidOrgIdError::Character {
                byte: b' ',
                position: 3
            }),
            "an invalid member is the error, not the count"
        );
        assert_eq!(
            classify(b"a|"),
            Err(InvalidOrgIdError::Empty { position: 2 })
        );
        assert_eq!(
            classify(b"|a"),
            Err(InvalidOrgIdError::Empty { position: 0 })
        );
        assert_eq!(
            classify(b"a||b"),
            Err(InvalidOrgIdError::Empty { position: 2 })
        );
        assert_eq!(
            classify(b"a b|c"),
            Err(InvalidOrgIdError::Character {
                byte: b' ',
                position: 1
            })
        );
        assert_eq!(classify(b".."), Err(InvalidOrgIdError::DotSegment));
    }
}
