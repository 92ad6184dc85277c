//! [`TenantTable`]: the tenants recorded by name (as
//! [`TenantAttribute`] says), found for each RPC with no lock and no
//! shared write, with the attribute sets of each method recorded with
//! each; and how a request's `x-scope-orgid` is recorded.

use std::fmt;

use http::HeaderMap;
use opentelemetry::{Key, KeyValue};

use super::append_only::SlotTable;
use super::attrs::{METHOD, OTHER, STATUS, TARGET, TenantAttrs, shared};
use super::builder::OtelMetricsError;
use super::methods::{MethodTable, RecordedMethod};
use super::names::NameTable;
use super::tenant_attribute::{Guard, TenantAttribute};
use crate::stats::Side;
use crate::tenant::{self, OrgId, OrgIdError, validate_org_id};

/// The value recorded for an RPC that names no valid tenant: no
/// `x-scope-orgid`, several, or one that breaks the tenant rules. gRPC's
/// own optional labels use the empty string for "no value" (gRFC A78's
/// `grpc.lb.locality`, A89's `grpc.lb.backend_service`); an empty org id
/// is never valid, so it is never mistaken for a tenant.
pub(super) const NO_TENANT: &str = "";

/// A segment count for a tenant's method slots: indices below
/// `16 × (2^16 − 1)`, far more methods than a handler records by name.
const METHOD_SEGMENTS: usize = 16;

/// How an RPC's tenant is recorded: by name (the index of its entry in a
/// [`TenantTable`]), as `other`, or as naming none. Copied into each
/// RPC's state: a handle with no reference count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecordedTenant {
    Named(u32),
    Other,
    /// The RPC names no valid tenant: [`NO_TENANT`].
    NoTenant,
}

/// What the request headers say about an RPC's tenant.
#[derive(Debug)]
pub(super) enum TenantOf {
    /// Settled.
    Recorded(RecordedTenant),
    /// A valid tenant that is not recorded by name yet but may be learned
    /// (a server waits for the RPC to be served).
    Unknown(OrgId),
}

/// One tenant attribute value, with the attribute sets of each method
/// recorded with it, built on the method's first RPC with the tenant:
/// slot 0 for `other`, slot `i + 1` for the method at index `i` of the
/// [`MethodTable`].
struct TenantColumn {
    value: KeyValue,
    methods: SlotTable<Box<TenantAttrs>, METHOD_SEGMENTS>,
}

impl TenantColumn {
    fn new(key: &Key, value: &str) -> Self {
        Self {
            value: KeyValue::new(key.clone(), shared(value)),
            methods: SlotTable::new(),
        }
    }
}

/// The tenants recorded by name, and the attribute sets of every
/// (method, tenant) combination recorded so far.
///
/// Named tenants are entries of a [`NameTable`]: an allow-list's, added
/// when built, or the first `max` learned. A lookup hashes the id once
/// and follows atomic loads (no lock, no shared write); the (method,
/// tenant) attribute sets are then two more loads. A tenant that is not
/// recorded by name is not stored anywhere: only the RPC's own state holds
/// its id (inline up to 38 bytes) while a server waits for the RPC to be
/// served. Memory is bounded by the named tenants (at most
/// [`TenantAttribute::MAX_TENANTS`]), plus `other` and no tenant, times
/// the methods recorded with each.
pub(super) struct TenantTable {
    tenants: NameTable<TenantColumn>,
    /// First seen: a tenant not in the table may be learned.
    learns: bool,
    other: TenantColumn,
    none: TenantColumn,
    key: Key,
}

impl TenantTable {
    pub(super) fn new(attribute: TenantAttribute) -> Result<Self, OtelMetricsError> {
        let TenantAttribute { key, guard } = attribute;
        if [METHOD, STATUS, TARGET].contains(&key) {
            return Err(OtelMetricsError::TenantKeyTaken(key.as_str().to_owned()));
        }
        let count = match &guard {
            Guard::AllowList(tenants) => tenants.len(),
            Guard::FirstSeen(max) => *max,
        };
        if count > TenantAttribute::MAX_TENANTS {
            return Err(OtelMetricsError::TooManyTenants {
                count,
                max: TenantAttribute::MAX_TENANTS,
            });
        }
        let (tenants, learns) = match guard {
            Guard::AllowList(list) => {
                let mut tenants = NameTable::new(list.len(), 0);
                for id in list {
                    if validate_org_id(id.as_bytes()).is_err() {
                        return Err(OtelMetricsError::InvalidTenant(id));
                    }
                    tenants.add(&id, || TenantColumn::new(&key, &id));
                }
                (tenants, false)
            }
            Guard::FirstSeen(max) => (NameTable::new(0, max), true),
        };
        Ok(Self {
            tenants,
            learns,
            other: TenantColumn::new(&key, OTHER),
            none: TenantColumn::new(&key, NO_TENANT),
            key,
        })
    }

    /// The tenant of an RPC with request `headers` on `side`: its
    /// `x-scope-orgid`, read in place (the crate's zero-copy extraction).
    #[inline]
    pub(super) fn tenant_of(&self, headers: &HeaderMap, side: Side) -> TenantOf {
        match tenant::extract_from_headers(headers) {
            Ok(id) => self.lookup(id, side),
            // Several valid tenants (`a|b`; `extract_from_headers` reports
            // an invalid member as invalid): `other`. Not each member: the
            // RPC would be counted once per member; not the list itself: its
            // combinations would multiply past any guard.
            Err(OrgIdError::MultipleTenants { .. }) => TenantOf::Recorded(RecordedTenant::Other),
            Err(_) => TenantOf::Recorded(RecordedTenant::NoTenant),
        }
    }

    /// A valid single tenant `id` on `side`.
    #[inline]
    fn lookup(&self, id: &str, side: Side) -> TenantOf {
        let recorded = match self.tenants.find(id) {
            Some(index) => RecordedTenant::Named(index),
            None if !self.learns || self.tenants.is_full() => RecordedTenant::Other,
            // The application chooses the tenants it calls for.
            None if side == Side::Client => self.learn(id),
            // Anyone may send any id: wait for the server to serve it.
            None => match OrgId::new(id) {
                Ok(id) => return TenantOf::Unknown(id),
                Err(_) => RecordedTenant::Other,
            },
        };
        TenantOf::Recorded(recorded)
    }

    /// `id` (valid, single), if recorded by name.
    pub(super) fn find(&self, id: &str) -> Option<RecordedTenant> {
        self.tenants.find(id).map(RecordedTenant::Named)
    }

    /// Records `id` (valid, single) by name from now on, unless this is an
    /// allow-list or `max` tenants are learned already (then: `other`).
    pub(super) fn learn(&self, id: &str) -> RecordedTenant {
        if !self.learns {
            return self.find(id).unwrap_or(RecordedTenant::Other);
        }
        self.tenants
            .learn(id, || TenantColumn::new(&self.key, id))
            .map_or(RecordedTenant::Other, RecordedTenant::Named)
    }

    /// The attribute sets of `method` with `tenant`, built on their first
    /// use (`methods` has `method`'s own).
    #[inline]
    pub(super) fn attrs(
        &self,
        methods: &MethodTable,
        method: RecordedMethod,
        tenant: RecordedTenant,
    ) -> &TenantAttrs {
        let column = match tenant {
            RecordedTenant::Named(index) => self.tenants.get(index).unwrap_or(&self.other),
            RecordedTenant::Other => &self.other,
            RecordedTenant::NoTenant => &self.none,
        };
        let make = |method: RecordedMethod| {
            move || Box::new(TenantAttrs::new(methods.attrs(method), &column.value))
        };
        let slot = match method {
            RecordedMethod::Named(index) => index.checked_add(1),
            RecordedMethod::Other => Some(0),
        };
        match slot.and_then(|slot| column.methods.get_or_init(slot, make(method))) {
            Some(attrs) => attrs,
            // A method past the slots (more than a million recorded by
            // name) is recorded as `other` with its tenant.
            None => column
                .methods
                .get_or_init(0, make(RecordedMethod::Other))
                .expect("slot 0 exists"),
        }
    }

    /// How many tenants are recorded by name.
    pub(super) fn named_len(&self) -> usize {
        self.tenants.added_len() + self.tenants.learned_len()
    }
}

impl fmt::Debug for TenantTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantTable")
            .field("key", &self.key.as_str())
            .field(
                "guard",
                &if self.learns {
                    "first_seen"
                } else {
                    "allow_list"
                },
            )
            .field("named_tenants", &self.named_len())
            .finish_non_exhaustive()
    }
}

/// The attribute value of a recorded tenant, for tests.
#[cfg(test)]
impl TenantTable {
    fn value_of(&self, tenant: RecordedTenant) -> opentelemetry::Value {
        match tenant {
            RecordedTenant::Named(index) => {
                self.tenants.get(index).expect("named").value.value.clone()
            }
            RecordedTenant::Other => self.other.value.value.clone(),
            RecordedTenant::NoTenant => self.none.value.value.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;
    use crate::tenant::OrgId;

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert("content-type", HeaderValue::from_static("application/grpc"));
        for value in values {
            map.append(OrgId::HEADER, HeaderValue::from_static(value));
        }
        map
    }

    fn recorded(tenant: TenantOf) -> RecordedTenant {
        match tenant {
            TenantOf::Recorded(recorded) => recorded,
            TenantOf::Unknown(id) => panic!("{id} is not settled"),
        }
    }

    #[test]
    fn missing_invalid_and_federated_ids_have_their_values() {
        let table = TenantTable::new(TenantAttribute::allow_list(["a", "b"])).unwrap();
        for side in [Side::Server, Side::Client] {
            let value = |ids: &[&'static str]| {
                let tenant = recorded(table.tenant_of(&headers(ids), side));
                table.value_of(tenant).to_string()
            };
            assert_eq!(value(&["a"]), "a");
            assert_eq!(value(&["b"]), "b");
            assert_eq!(value(&["c"]), "other");
            assert_eq!(value(&[]), "", "missing");
            assert_eq!(value(&["a", "a"]), "", "several headers");
            assert_eq!(value(&["a b"]), "", "invalid character");
            assert_eq!(value(&[".."]), "", "dot segment");
            assert_eq!(value(&["__markers__"]), "", "reserved");
            assert_eq!(value(&["a|b"]), "other", "federated");
            assert_eq!(
                value(&["a|a"]),
                "a",
                "one tenant named twice is that tenant (dskit)"
            );
            assert_eq!(value(&["a|b c"]), "", "federated with an invalid member");
            assert_eq!(value(&["a||b"]), "", "federated with an empty member");
        }
    }

    #[test]
    fn first_seen_learns_on_clients_and_defers_on_servers() {
        let table = TenantTable::new(TenantAttribute::first_seen(2)).unwrap();
        let a = recorded(table.tenant_of(&headers(&["a"]), Side::Client));
        assert_eq!(table.value_of(a).as_str(), "a");
        assert!(matches!(
            table.tenant_of(&headers(&["b"]), Side::Server),
            TenantOf::Unknown(id) if id == "b"
        ));
        assert_eq!(table.named_len(), 1, "a server waits");
        assert_eq!(table.find("b"), None);
        let b = table.learn("b");
        assert_eq!(table.find("b"), Some(b));
        assert_eq!(table.learn("c"), RecordedTenant::Other, "past the bound");
        assert_eq!(
            recorded(table.tenant_of(&headers(&["c"]), Side::Server)),
            RecordedTenant::Other,
            "full: settled at once"
        );
        assert_eq!(table.named_len(), 2);
    }

    #[test]
    fn bad_configurations_are_refused() {
        let err = |attribute| TenantTable::new(attribute).unwrap_err();
        assert_eq!(
            err(TenantAttribute::allow_list(["ok", "not ok"])),
            OtelMetricsError::InvalidTenant("not ok".to_owned())
        );
        assert_eq!(
            err(TenantAttribute::allow_list(["a|b"])),
            OtelMetricsError::InvalidTenant("a|b".to_owned())
        );
        assert_eq!(
            err(TenantAttribute::first_seen(10_001)),
            OtelMetricsError::TooManyTenants {
                count: 10_001,
                max: 10_000
            }
        );
        assert_eq!(
            err(TenantAttribute::first_seen(1).with_key("grpc.method")),
            OtelMetricsError::TenantKeyTaken("grpc.method".to_owned())
        );
        let table = TenantTable::new(TenantAttribute::allow_list(["a", "a"])).unwrap();
        assert_eq!(table.named_len(), 1, "listed twice, named once");
    }

    #[test]
    fn each_method_and_tenant_gets_its_sets_once() {
        let methods = MethodTable::new(vec!["/p.S/M".to_owned()], [], None, 0, "t");
        let table = TenantTable::new(TenantAttribute::allow_list(["a"])).unwrap();
        let m = methods.find("/p.S/M").unwrap();
        let a = table.find("a").unwrap();
        let first: *const TenantAttrs = table.attrs(&methods, m, a);
        let again: *const TenantAttrs = table.attrs(&methods, m, a);
        assert_eq!(first, again, "built once, then reused");
        let set = table.attrs(&methods, m, a).started(Side::Client).attrs;
        let pairs: Vec<_> = set
            .iter()
            .map(|kv| (kv.key.as_str().to_owned(), kv.value.to_string()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("grpc.method".to_owned(), "p.S/M".to_owned()),
                ("grpc.tenant".to_owned(), "a".to_owned()),
                ("grpc.target".to_owned(), "t".to_owned()),
            ]
        );
        let other = table.attrs(&methods, RecordedMethod::Other, RecordedTenant::NoTenant);
        assert_eq!(other.started(Side::Server).attrs[0].value.as_str(), "other");
        assert_eq!(other.started(Side::Server).attrs[1].value.as_str(), "");
        let ended = other.ended(Side::Server, tonic::Code::NotFound).attrs;
        assert_eq!(ended.len(), 3);
        assert_eq!(ended[1].value.as_str(), "NOT_FOUND");
    }
}
