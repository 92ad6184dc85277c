//! Sets of gRPC services and exact request paths: the requests
//! [`RequireOrgIdLayer`](super::RequireOrgIdLayer) lets pass unchecked, and
//! those [`TenantLimitLayer`](crate::limits::TenantLimitLayer) limits.

use std::sync::Arc;

/// gRPC services and exact paths. Shared by every clone of the layer and
/// its services.
#[derive(Debug, Default)]
pub(crate) struct PathSet {
    /// Full gRPC service names (`package.Service`).
    services: Box<[Box<str>]>,
    /// Exact request paths (`/healthz`).
    paths: Box<[Box<str>]>,
}

impl PathSet {
    /// `current` with its services replaced by `services`; `None` when
    /// the set is empty.
    pub(crate) fn with_services(
        current: Option<&Self>,
        services: Box<[Box<str>]>,
    ) -> Option<Arc<Self>> {
        let paths = current
            .map(|current| current.paths.clone())
            .unwrap_or_default();
        Self { services, paths }.shared()
    }

    /// `current` with its paths replaced by `paths`; `None` when the set
    /// is empty.
    pub(crate) fn with_paths(current: Option<&Self>, paths: Box<[Box<str>]>) -> Option<Arc<Self>> {
        let services = current
            .map(|current| current.services.clone())
            .unwrap_or_default();
        Self { services, paths }.shared()
    }

    fn shared(self) -> Option<Arc<Self>> {
        (!self.services.is_empty() || !self.paths.is_empty()).then(|| Arc::new(self))
    }

    /// Whether a request for `path` is in the set: `path` is one of its
    /// paths, or `/package.Service/Method` of one of its services.
    pub(crate) fn matches(&self, path: &str) -> bool {
        self.paths.iter().any(|member| **member == *path) || self.matches_service_of(path)
    }

    fn matches_service_of(&self, path: &str) -> bool {
        !self.services.is_empty()
            && path
                .strip_prefix('/')
                .and_then(|path| path.split_once('/'))
                .is_some_and(|(service, _)| self.services.iter().any(|member| **member == *service))
    }
}

/// A list of names from any iterable of strings, copied once.
pub(crate) fn names<I>(names: I) -> Box<[Box<str>]>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    names
        .into_iter()
        .map(|name| Box::from(name.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(services: &[&str], paths: &[&str]) -> PathSet {
        PathSet {
            services: names(services),
            paths: names(paths),
        }
    }

    #[test]
    fn a_service_is_matched_on_the_whole_name_of_a_method_path() {
        let set = set(&["grpc.health.v1.Health"], &[]);
        assert!(set.matches("/grpc.health.v1.Health/Check"));
        assert!(set.matches("/grpc.health.v1.Health/Watch"));
        assert!(!set.matches("/grpc.health.v1.HealthX/Check"));
        assert!(!set.matches("/grpc.health.v1/Health/Check"));
        assert!(!set.matches("/grpc.health.v1.Health"));
        assert!(!set.matches("grpc.health.v1.Health/Check"));
    }

    #[test]
    fn a_path_is_matched_exactly() {
        let set = set(&[], &["/healthz", "/metrics"]);
        assert!(set.matches("/healthz"));
        assert!(set.matches("/metrics"));
        assert!(!set.matches("/healthz/"));
        assert!(!set.matches("/healthz/live"));
        assert!(!set.matches("/Healthz"));
        assert!(!set.matches("/health"));
        assert!(!set.matches("/"));
    }

    #[test]
    fn replacing_one_list_keeps_the_other_and_empty_lists_match_nothing() {
        let both = PathSet::with_paths(
            PathSet::with_services(None, names(["a.B"])).as_deref(),
            names(["/healthz"]),
        )
        .unwrap();
        assert!(both.matches("/a.B/M") && both.matches("/healthz"));
        let paths_only = PathSet::with_services(Some(&both), names::<[&str; 0]>([])).unwrap();
        assert!(!paths_only.matches("/a.B/M") && paths_only.matches("/healthz"));
        assert!(PathSet::with_paths(Some(&paths_only), names::<[&str; 0]>([])).is_none());
    }
}
