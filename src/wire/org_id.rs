//! Cortex's tenant-id rules as one pass over the bytes of a header value,
//! and a federated value's `|` split, walked once.
//!
//! The rules (cortexproject/cortex `pkg/util/users/tenant.go`):
//! - characters `a-z A-Z 0-9 ! - _ . * ' ( )`,
//! - at most `OrgId::MAX_LEN` (150) bytes,
//! - not `.` or `..`,
//! - not one of Cortex's reserved storage names (`OrgId::RESERVED`).
//!
//! On top of Cortex, an empty id is refused: Cortex lets `""` through
//! `ValidTenantID`, which turns `"a|"` into the tenants `["", "a"]`.

/// The longest valid org id, in bytes (Cortex's `MaxTenantIDLength`).
pub(crate) const MAX_ORG_ID_LEN: usize = 150;

/// Ids Cortex refuses because they name objects in its block storage layout
/// (`__markers__` directories, the `user-index.json.gz` bucket index). They
/// are refused here too, so an id that passes this crate passes Cortex.
pub(crate) const RESERVED_ORG_IDS: [&str; 2] = ["__markers__", "user-index.json.gz"];

/// The separator between the tenants of a federated (multi-tenant) id.
pub(crate) const TENANT_SEPARATOR: u8 = b'|';

/// Which rule an id breaks, and where. Crate-private: `tenant` turns it
/// into its public `Fault`, variant for variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A byte outside `a-z A-Z 0-9 ! - _ . * ' ( )`, at its offset in the
    /// header value.
    Character { byte: u8, position: usize },
    /// Longer than [`MAX_ORG_ID_LEN`] bytes.
    TooLong { len: usize },
    /// `.` or `..`.
    DotSegment,
    /// Empty, at its offset in the header value.
    Empty { position: usize },
    /// One of [`RESERVED_ORG_IDS`].
    Reserved { name: &'static str },
}

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
pub(crate) fn check_org_id(id: &[u8], offset: usize) -> Result<(), Fault> {
    if let Some(position) = id.iter().position(|&b| !is_allowed_byte(b)) {
        return Err(Fault::Character {
            byte: id[position],
            position: offset + position,
        });
    }
    check_shape(id, offset)
}

/// The rules that look at the whole id rather than at each byte.
#[inline]
fn check_shape(id: &[u8], offset: usize) -> Result<(), Fault> {
    match id {
        [] => Err(Fault::Empty { position: offset }),
        b"." | b".." => Err(Fault::DotSegment),
        _ if id.len() > MAX_ORG_ID_LEN => Err(Fault::TooLong { len: id.len() }),
        _ => match RESERVED_ORG_IDS.iter().find(|r| r.as_bytes() == id) {
            Some(reserved) => Err(Fault::Reserved { name: reserved }),
            None => Ok(()),
        },
    }
}

/// Converts validated (hence ASCII) bytes to `&str`. The error arm is
/// unreachable after [`check_org_id`]; it still maps to an error value
/// rather than a panic.
#[inline]
pub(crate) fn ascii_str(id: &[u8], offset: usize) -> Result<&str, Fault> {
    std::str::from_utf8(id).map_err(|e| {
        let position = e.valid_up_to();
        Fault::Character {
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

/// Sorts one `x-scope-orgid` value into one tenant, several, or invalid,
/// for the parts that need no more (the extractors, the server layer, the
/// limits, the metrics' tenant attribute): [`split`] with no use for the
/// members.
#[inline]
pub(crate) fn classify(value: &[u8]) -> Result<Tenants<'_>, Fault> {
    split(value, |_| {})
}

/// The one walk over an `x-scope-orgid` value: a single id is checked in
/// one pass (the common case; its first refused byte, if a `|`, starts
/// the split); a federated value is split on `|` once, each member checked
/// as it is reached and then handed to `member`, in order (`member` sees
/// nothing for a value without `|`: that value is [`Tenants::One`]).
#[inline]
pub(crate) fn split<'a>(
    value: &'a [u8],
    member: impl FnMut(&'a [u8]),
) -> Result<Tenants<'a>, Fault> {
    match check_org_id(value, 0) {
        Ok(()) => Ok(Tenants::One(value)),
        Err(Fault::Character {
            byte: TENANT_SEPARATOR,
            position,
        }) => split_several(value, position, member),
        Err(fault) => Err(fault),
    }
}

/// [`split`] for a value with a `|` at `separator` (the first byte the
/// single-id rules refused).
#[cold]
fn split_several<'a>(
    value: &'a [u8],
    separator: usize,
    mut each: impl FnMut(&'a [u8]),
) -> Result<Tenants<'a>, Fault> {
    let mut members = Members::default();
    let mut first: Option<&[u8]> = None;
    let mut distinct = false;
    for member in value.split(|&b| b == TENANT_SEPARATOR) {
        members.check(member)?;
        each(member);
        match first {
            None => first = Some(member),
            Some(first) => distinct |= first != member,
        }
    }
    match (distinct, first) {
        (false, Some(member)) => Ok(Tenants::One(member)),
        _ => Ok(Tenants::Several { separator }),
    }
}

/// The members of one federated id checked in order, each error's
/// position counted in the value the members make joined with `|` (for a
/// list of ids given one by one, an error means what it would in that
/// value).
#[derive(Debug, Default)]
pub(crate) struct Members {
    /// Where the next member starts in the joined value.
    offset: usize,
}

impl Members {
    /// Checks the next member.
    #[inline]
    pub(crate) fn check(&mut self, member: &[u8]) -> Result<(), Fault> {
        check_org_id(member, self.offset)?;
        self.offset += member.len() + 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(id: &[u8]) -> Fault {
        check_org_id(id, 0).unwrap_err()
    }

    #[test]
    fn every_allowed_character_passes_alone_and_in_an_id() {
        let allowed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!-_.*'()";
        for c in allowed.bytes() {
            assert!(is_allowed_byte(c), "{}", c as char);
            let id = [b'x', c, b'y'];
            assert_eq!(check_org_id(&id, 0), Ok(()));
            assert_eq!(ascii_str(&id, 0).unwrap().as_bytes(), id);
        }
        assert_eq!(check_org_id(allowed.as_bytes(), 0), Ok(()));
        assert_eq!(ascii_str(allowed.as_bytes(), 0), Ok(allowed));
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
                Fault::Character {
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
        assert_eq!(err(&long), Fault::TooLong { len: 151 });
    }

    #[test]
    fn dot_segments_are_refused_but_dots_inside_ids_are_fine() {
        assert_eq!(err(b"."), Fault::DotSegment);
        assert_eq!(err(b".."), Fault::DotSegment);
        for ok in [&b"..."[..], b".a", b"a.", b"a..b"] {
            assert!(check_org_id(ok, 0).is_ok());
        }
    }

    #[test]
    fn empty_and_reserved_ids_are_refused() {
        assert_eq!(err(b""), Fault::Empty { position: 0 });
        assert_eq!(
            err(b"__markers__"),
            Fault::Reserved {
                name: "__markers__"
            }
        );
        assert_eq!(
            err(b"user-index.json.gz"),
            Fault::Reserved {
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
            Fault::Character {
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
            Err(Fault::Character {
                byte: b' ',
                position: 3
            }),
            "an invalid member is the error, not the count"
        );
        assert_eq!(classify(b"a|"), Err(Fault::Empty { position: 2 }));
        assert_eq!(classify(b"|a"), Err(Fault::Empty { position: 0 }));
        assert_eq!(classify(b"a||b"), Err(Fault::Empty { position: 2 }));
        assert_eq!(
            classify(b"a b|c"),
            Err(Fault::Character {
                byte: b' ',
                position: 1
            })
        );
        assert_eq!(classify(b".."), Err(Fault::DotSegment));
    }

    #[test]
    fn the_split_hands_over_each_checked_member_once_in_order() {
        let mut seen = Vec::new();
        assert_eq!(
            split(b"b|a|b", |member| seen.push(member)),
            Ok(Tenants::Several { separator: 1 })
        );
        assert_eq!(seen, [&b"b"[..], b"a", b"b"]);
        seen.clear();
        assert_eq!(
            split(b"a|a", |member| seen.push(member)),
            Ok(Tenants::One(b"a"))
        );
        assert_eq!(seen, [&b"a"[..], b"a"]);
        seen.clear();
        assert_eq!(
            split(b"team-a", |member| seen.push(member)),
            Ok(Tenants::One(b"team-a"))
        );
        assert!(seen.is_empty(), "a single id is the value itself");
        assert_eq!(
            split(b"a|b c|d", |member| seen.push(member)),
            Err(Fault::Character {
                byte: b' ',
                position: 3
            })
        );
        assert_eq!(seen, [b"a"], "members up to the invalid one");
    }

    #[test]
    fn members_count_positions_as_if_joined() {
        let mut members = Members::default();
        assert_eq!(members.check(b"ab"), Ok(()));
        assert_eq!(members.check(b""), Err(Fault::Empty { position: 3 }));
        let mut members = Members::default();
        assert_eq!(members.check(b"ab"), Ok(()));
        assert_eq!(
            members.check(b"c d"),
            Err(Fault::Character {
                byte: b' ',
                position: 4
            })
        );
    }
}
