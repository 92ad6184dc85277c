//! The error-chain walk: what each link of an error's `source()` chain is,
//! for the mappings of errors to gRPC codes (`stats::layer::status`).

use std::error::Error;

/// A link of an error's source chain that a mapping to a gRPC code may
/// stop at.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cause<'a> {
    /// An `h2::Error` on top of the chain (h2's errors have no source: the
    /// walk ends there).
    H2(&'a h2::Error),
    /// tower's load-shed `Overloaded` on top of the chain.
    Overloaded,
    /// A `tonic::Status`.
    Status(&'a tonic::Status),
    /// tonic's `TimeoutExpired` (a call's own deadline).
    TimeoutExpired(&'a tonic::TimeoutExpired),
    /// tonic's `ConnectError`.
    Connect(&'a tonic::ConnectError),
    /// An I/O error.
    Io,
    /// A `hyper::Error` that timed out.
    HyperTimeout(&'a hyper::Error),
    /// A `hyper::Error` that was cancelled.
    HyperCanceled(&'a hyper::Error),
    /// A `hyper::Error` directly over an `h2::Error`.
    HyperH2(&'a hyper::Error, &'a h2::Error),
}

/// The links of `error`'s source chain a mapping may stop at, from the top
/// down; links of no known kind are skipped.
pub(crate) fn causes<'a>(error: &'a (dyn Error + 'static)) -> impl Iterator<Item = Cause<'a>> {
    let top = if let Some(h2) = error.downcast_ref::<h2::Error>() {
        Some(Cause::H2(h2))
    } else if error.is::<tower::load_shed::error::Overloaded>() {
        Some(Cause::Overloaded)
    } else {
        None
    };
    let chain = std::iter::successors(Some(error), |&error| error.source());
    top.into_iter().chain(chain.filter_map(cause))
}

/// What one link is, if a mapping may stop at it.
fn cause<'a>(error: &'a (dyn Error + 'static)) -> Option<Cause<'a>> {
    if let Some(status) = error.downcast_ref::<tonic::Status>() {
        return Some(Cause::Status(status));
    }
    if let Some(timeout) = error.downcast_ref::<tonic::TimeoutExpired>() {
        return Some(Cause::TimeoutExpired(timeout));
    }
    if let Some(connect) = error.downcast_ref::<tonic::ConnectError>() {
        return Some(Cause::Connect(connect));
    }
    if error.is::<std::io::Error>() {
        return Some(Cause::Io);
    }
    let hyper = error.downcast_ref::<hyper::Error>()?;
    if hyper.is_timeout() {
        return Some(Cause::HyperTimeout(hyper));
    }
    if hyper.is_canceled() {
        return Some(Cause::HyperCanceled(hyper));
    }
    let h2 = hyper.source()?.downcast_ref::<h2::Error>()?;
    Some(Cause::HyperH2(hyper, h2))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error of no known kind over `source`.
    #[derive(Debug)]
    struct Wrapper(Box<dyn Error + Send + Sync>);

    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("wrapper")
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&*self.0)
        }
    }

    #[test]
    fn the_walk_yields_known_links_top_down_and_skips_the_rest() {
        let io = std::io::Error::other("broken pipe");
        let error = Wrapper(Box::new(Wrapper(Box::new(io))));
        let seen: Vec<_> = causes(&error).collect();
        assert!(matches!(seen.as_slice(), [Cause::Io]), "{seen:?}");

        let status = tonic::Status::unavailable("down");
        let error = Wrapper(Box::new(status));
        let seen: Vec<_> = causes(&error).collect();
        assert!(
            matches!(seen.as_slice(), [Cause::Status(status)] if status.message() == "down"),
            "{seen:?}"
        );

        let overloaded = tower::load_shed::error::Overloaded::new();
        let seen: Vec<_> = causes(&overloaded).collect();
        assert!(matches!(seen.as_slice(), [Cause::Overloaded]), "{seen:?}");
        let under = Wrapper(Box::new(tower::load_shed::error::Overloaded::new()));
        assert_eq!(causes(&under).count(), 0, "only on top");
    }
}
