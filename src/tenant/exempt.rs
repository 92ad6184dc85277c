//! The requests [`RequireOrgIdLayer`](super::RequireOrgIdLayer) lets pass
//! unchecked: calls to exempt gRPC services, and requests to exempt paths.

use std::sync::Arc;

/// Exempt gRPC services and exact paths. Shared by every clone of the
/// layer and its services.
#[derive(Debug, Default)]
pub(crate) struct Exemptions {
    /// Full gRPC service names (`package.Service`).
    services: Box<[Box<str>]>,
    /// Exact request paths (`/healthz`).
    paths: Box<[Box<str>]>,
}

impl Exemptions {
    /// `current` with its services replaced by `services`; `None` when
    /// nothing is exempt any more.
    pub(crate) fn with_services(
        current: Option<&Self>,
        services: Box<[Box<str>]>,
    ) -> Option<Arc<Self>> {
        let paths = current
            .map(|current| current.paths.clone())
            .unwrap_or_default();
        Self { services, paths }.shared()
    }

    /// `current` with its paths replaced by `paths`; `None` when nothing is
    /// exempt any more.
    pub(crate) fn with_paths(current: Option<&Self>, paths: Box<[Box<str>]>) -> Option<Arc<Self>> {
        let services = current
            .map(|current| current.services.clone())
            .unwrap_or_default();
        Self { services, paths }.shared()
    }

    fn shared(self) -> Option<Arc<Self>> {
        (!self.services.is_empty() || !self.paths.is_empty()).then(|| Arc::new(self))
    }

    /// Whether a request for `path` passes unchecked: `path` is one of the
    /// exempt paths, or `/package.Service/Method` of an exempt service.
    pub(crate) fn exempts(&self, path: &str) -> bool {
        self.paths.iter().any(|exempt| **exempt == *path) || self.exempts_service_of(path)
    }

    fn exempts_service_of(&self, path: &str) -> bool {
        !self.services.is_empty()
            && path
                .strip_prefix('/')
                .and_then(|path| path.split_once('/'))
                .is_some_and(|(service, _)| self.services.iter().any(|exempt| **exempt == *service))
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

    fn exemptions(services: &[&str], paths: &[&str]) -> Exemptions {
        Exemptions {
            services: names(services),
            paths: names(paths),
        }
    }

    #[test]
    fn a_service_is_matched_on_the_whole_name_of_a_method_path() {
        let exempt = exemptions(&["grpc.health.v1.Health"], &[]);
        assert!(exempt.exempts("/grpc.health.v1.Health/Check"));
        assert!(exempt.exempts("/grpc.health.v1.Health/Watch"));
        assert!(!exempt.exempts("/grpc.health.v1.HealthX/Check"));
        assert!(!exempt.exempts("/grpc.health.v1/Health/Check"));
        assert!(!exempt.exempts("/grpc.health.v1.Health"));
        assert!(!exempt.exempts("grpc.health.v1.Health/Check"));
    }

    #[test]
    fn a_path_is_matched_exactly() {
        let exempt = exemptions(&[], &["/healthz", "/metrics"]);
        assert!(exempt.exempts("/healthz"));
        assert!(exempt.exempts("/metrics"));
        assert!(!exempt.exempts("/healthz/"));
        assert!(!exempt.exempts("/healthz/live"));
        assert!(!exempt.exempts("/Healthz"));
        assert!(!exempt.exempts("/health"));
        assert!(!exempt.exempts("/"));
    }

    #[test]
    fn replacing_one_list_keeps_the_other_and_empty_lists_exempt_nothing() {
        let both = Exemptions::with_paths(
            Exemptions::with_services(None, names(["a.B"])).as_deref(),
            names(["/healthz"]),
        )
        .unwrap();
        assert!(both.exempts("/a.B/M") && both.exempts("/healthz"));
        let paths_only = Exemptions::with_services(Some(&both), names::<[&str; 0]>([])).unwrap();
        assert!(!paths_only.exempts("/a.B/M") && paths_only.exempts("/healthz"));
        assert!(Exemptions::with_paths(Some(&paths_only), names::<[&str; 0]>([])).is_none());
    }
}
