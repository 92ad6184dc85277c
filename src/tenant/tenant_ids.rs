//! `TenantIds`: the tenants of a federated `a|b|c` org id.

use std::fmt;
use std::sync::Arc;

use http::HeaderValue;

use super::error::InvalidOrgIdError;
use super::org_id::{OrgId, header_value};
use crate::wire::org_id::{self, Fault, Tenants};

/// The tenants named by one `x-scope-orgid` value, validated, sorted and
/// de-duplicated (Cortex's `NormalizeTenantIDs`).
///
/// A single tenant is stored without allocating; several share one
/// `Arc<[OrgId]>`, so clones are cheap either way.
///
/// ```
/// use tonic_hotpath::tenant::TenantIds;
///
/// let ids = TenantIds::parse("b|a|b")?;
/// assert_eq!(ids.as_slice(), ["a", "b"]);
/// assert_eq!(ids.to_string(), "a|b");
///
/// let err = TenantIds::parse("a||b").unwrap_err();
/// assert_eq!(err.to_string(), "org id is empty at byte 2");
/// # Ok::<(), tonic_hotpath::tenant::InvalidOrgIdError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TenantIds {
    repr: Repr,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    One(OrgId),
    Many(Arc<[OrgId]>),
}

/// The tenants of one header value, as [`TenantIds::parse_borrowed`] reads
/// them.
#[derive(Debug)]
pub(crate) enum Parsed<'a> {
    /// One tenant (`a`, or `a|a`), borrowed from the value: checked, ASCII.
    One(&'a [u8]),
    /// Several distinct tenants.
    Several(TenantIds),
}

impl TenantIds {
    /// Parses `a|b|c`: splits on `|`, validates each member (an empty member
    /// is an error), then sorts and de-duplicates. Error positions are byte
    /// offsets in `value`.
    pub fn parse(value: &str) -> Result<Self, InvalidOrgIdError> {
        Self::parse_bytes(value.as_bytes())
    }

    /// [`TenantIds::parse`] over raw header-value bytes.
    #[inline]
    pub fn parse_bytes(value: &[u8]) -> Result<Self, InvalidOrgIdError> {
        match Self::parse_borrowed(value).map_err(InvalidOrgIdError::from_fault)? {
            Parsed::One(id) => Ok(Self::from(OrgId::from_checked(id))),
            Parsed::Several(ids) => Ok(ids),
        }
    }

    /// The tenants of a header value from one walk of it
    /// (`crate::wire::org_id::split`): a single tenant borrowed (checked,
    /// ASCII; nothing allocated), several copied as they are checked, then
    /// sorted and de-duplicated.
    #[inline]
    pub(crate) fn parse_borrowed(value: &[u8]) -> Result<Parsed<'_>, Fault> {
        let mut ids = Vec::new();
        match org_id::split(value, |member| ids.push(OrgId::from_checked(member)))? {
            Tenants::One(id) => Ok(Parsed::One(id)),
            Tenants::Several { .. } => Ok(Parsed::Several(Self::sorted(ids))),
        }
    }

    /// The tenants named in a list: validates each id, then sorts and
    /// de-duplicates, as [`parse`](Self::parse) does with the members of
    /// `a|b|c`. Error positions are byte offsets in the ids joined with `|`
    /// (so an error means the same as from `parse` on that value); an empty
    /// list is [`InvalidOrgIdError::Empty`] at byte 0, like `parse("")`.
    ///
    /// ```
    /// use tonic_hotpath::tenant::{InvalidOrgIdError, TenantIds};
    ///
    /// let from_config = vec!["team-b".to_string(), "team-a".to_string()];
    /// let ids = TenantIds::from_ids(&from_config)?;
    /// assert_eq!(ids.to_string(), "team-a|team-b");
    ///
    /// assert_eq!(
    ///     TenantIds::from_ids(["ok", "not ok"]).unwrap_err(),
    ///     InvalidOrgIdError::Character { byte: b' ', position: 6 }, // in "ok|not ok"
    /// );
    /// assert!(TenantIds::from_ids(Vec::<&str>::new()).is_err());
    /// # Ok::<(), InvalidOrgIdError>(())
    /// ```
    pub fn from_ids<I>(ids: I) -> Result<Self, InvalidOrgIdError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Self::from_members(ids.into_iter(), |id| id.as_ref().as_bytes())
    }

    /// Validates each id (positions counted as if the ids were joined
    /// with `|`), then sorts and de-duplicates. No id is an empty id at
    /// byte 0.
    fn from_members<M>(
        members: impl Iterator<Item = M>,
        bytes: impl Fn(&M) -> &[u8],
    ) -> Result<Self, InvalidOrgIdError> {
        let mut ids = Vec::new();
        let mut checked = org_id::Members::default();
        for member in members {
            let member = bytes(&member);
            checked
                .check(member)
                .map_err(InvalidOrgIdError::from_fault)?;
            ids.push(OrgId::from_checked(member));
        }
        if ids.is_empty() {
            return Err(InvalidOrgIdError::Empty { position: 0 });
        }
        Ok(Self::sorted(ids))
    }

    /// The checked ids, sorted and de-duplicated; `ids` is not empty.
    fn sorted(mut ids: Vec<OrgId>) -> Self {
        ids.sort_unstable();
        ids.dedup();
        match <[OrgId; 1]>::try_from(ids) {
            Ok([one]) => Self::from(one),
            Err(many) => Self {
                repr: Repr::Many(many.into()),
            },
        }
    }

    /// The tenants, sorted, without duplicates; never empty.
    pub fn as_slice(&self) -> &[OrgId] {
        match &self.repr {
            Repr::One(id) => std::slice::from_ref(id),
            Repr::Many(ids) => ids,
        }
    }

    /// The tenant, if there is exactly one.
    pub fn single(&self) -> Option<&OrgId> {
        match &self.repr {
            Repr::One(id) => Some(id),
            Repr::Many(_) => None,
        }
    }

    /// How many tenants there are (at least one).
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Always false: a `TenantIds` names at least one tenant.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Iterates over the tenants in order.
    pub fn iter(&self) -> std::slice::Iter<'_, OrgId> {
        self.as_slice().iter()
    }

    /// The tenants as one `x-scope-orgid` header value, `a|b|c`.
    pub fn to_header_value(&self) -> HeaderValue {
        match &self.repr {
            Repr::One(id) => id.to_header_value(),
            Repr::Many(_) => header_value(self.to_string().as_bytes()),
        }
    }
}

impl From<OrgId> for TenantIds {
    #[inline]
    fn from(id: OrgId) -> Self {
        Self {
            repr: Repr::One(id),
        }
    }
}

impl<'a> IntoIterator for &'a TenantIds {
    type Item = &'a OrgId;
    type IntoIter = std::slice::Iter<'a, OrgId>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl std::ops::Deref for TenantIds {
    type Target = [OrgId];

    fn deref(&self) -> &[OrgId] {
        self.as_slice()
    }
}

impl fmt::Debug for TenantIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(OrgId::as_str))
            .finish()
    }
}

impl fmt::Display for TenantIds {
    /// The `a|b|c` form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, id) in self.iter().enumerate() {
            if i > 0 {
                f.write_str("|")?;
            }
            f.write_str(id.as_str())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_sorted_and_deduplicated() {
        let ids = TenantIds::parse("c|a|b|a|c").unwrap();
        assert_eq!(ids.as_slice(), ["a", "b", "c"]);
        assert_eq!(ids.len(), 3);
        assert!(ids.single().is_none());
        assert_eq!(ids.to_header_value(), "a|b|c");
    }

    #[test]
    fn duplicates_of_one_tenant_collapse_to_a_single_tenant() {
        let ids = TenantIds::parse("a|a").unwrap();
        assert_eq!(ids.single().unwrap(), "a");
        assert_eq!(format!("{ids:?}"), "[\"a\"]");
    }

    #[test]
    fn one_walk_borrows_a_single_tenant_and_parses_several() {
        assert!(matches!(
            TenantIds::parse_borrowed(b"team-a"),
            Ok(Parsed::One(b"team-a"))
        ));
        assert!(matches!(
            TenantIds::parse_borrowed(b"a|a"),
            Ok(Parsed::One(b"a"))
        ));
        match TenantIds::parse_borrowed(b"b|a|b") {
            Ok(Parsed::Several(ids)) => assert_eq!(ids.as_slice(), ["a", "b"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            TenantIds::parse_borrowed(b"a|").unwrap_err(),
            Fault::Empty { position: 2 }
        );
    }

    #[test]
    fn empty_members_are_errors_with_their_position() {
        assert_eq!(
            TenantIds::parse("a|").unwrap_err(),
            InvalidOrgIdError::Empty { position: 2 }
        );
        assert_eq!(
            TenantIds::parse("|a").unwrap_err(),
            InvalidOrgIdError::Empty { position: 0 }
        );
        assert_eq!(
            TenantIds::parse("").unwrap_err(),
            InvalidOrgIdError::Empty { position: 0 }
        );
    }

    #[test]
    fn from_ids_validates_sorts_and_deduplicates_like_parse() {
        let owned = vec![String::from("c"), String::from("a"), String::from("c")];
        let ids = TenantIds::from_ids(&owned).unwrap();
        assert_eq!(ids, TenantIds::parse("c|a|c").unwrap());
        assert_eq!(ids.as_slice(), ["a", "c"]);
        let one = TenantIds::from_ids([OrgId::new("team-a").unwrap()]).unwrap();
        assert_eq!(one.single().unwrap(), "team-a");
        assert_eq!(
            TenantIds::from_ids(["a", "a"]).unwrap(),
            TenantIds::parse("a").unwrap()
        );
        // A member is one id: a `|` inside it is a bad character.
        assert_eq!(
            TenantIds::from_ids(["a", "b|c"]).unwrap_err(),
            InvalidOrgIdError::Character {
                byte: b'|',
                position: 3
            }
        );
        for bad in [&["ab", "c d"][..], &["a", ""], &["a", ".."], &[]] {
            assert_eq!(
                TenantIds::from_ids(bad).unwrap_err(),
                TenantIds::parse(&bad.join("|")).unwrap_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn member_errors_report_positions_in_the_whole_value() {
        assert_eq!(
            TenantIds::parse("ab|c d").unwrap_err(),
            InvalidOrgIdError::Character {
                byte: b' ',
                position: 4
            }
        );
        assert_eq!(
            TenantIds::parse("a|..").unwrap_err(),
            InvalidOrgIdError::DotSegment
        );
        let long = format!("a|{}", "x".repeat(151));
        assert_eq!(
            TenantIds::parse(&long).unwrap_err(),
            InvalidOrgIdError::TooLong { len: 151 }
        );
    }
}
