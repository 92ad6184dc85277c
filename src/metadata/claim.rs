//! [`ClaimedHeaders`]: headers a layer above [`OutgoingMetadataLayer`] has
//! set on a request, which the chain written into the same headers must
//! agree with.
//!
//! [`OutgoingMetadataLayer`]: super::OutgoingMetadataLayer

use http::{HeaderName, HeaderValue};

use super::OutgoingMetadata;
use super::error::ClaimedHeaderError;

/// Headers that a layer above [`OutgoingMetadataLayer`] has set on a
/// request, each to one value, and that the outgoing metadata chain sent
/// with the request must agree with. It rides the request's extensions.
///
/// Some headers must reach the server exactly once: an org id, a routing
/// key. A layer that sets one in the request headers claims it here; when
/// [`OutgoingMetadataLayer`] then writes the request's chain into the same
/// headers, it judges the chain's entries for each claimed name:
///
/// - none: nothing to judge, the claimed header is sent as it is;
/// - exactly one, with the claimed value: it is not written (the value is
///   sent once, from the headers);
/// - one with a different value, or several: the request is refused with
///   `INVALID_ARGUMENT` ([`ClaimedHeaderError`] as the status's source)
///   and not sent.
///
/// Entries of names nobody claimed are written as always. Without an
/// `OutgoingMetadataLayer` below, nothing reads a claim (and no chain is
/// sent, so there is nothing to agree with). A claim promises that the
/// request headers hold exactly that value: make it after setting the
/// header.
///
/// ```
/// use http::{HeaderName, HeaderValue};
/// use tonic_hotpath::metadata::{ClaimedHeaders, OutgoingMetadata, OutgoingMetadataLayer};
/// use tower::{Layer, Service, ServiceExt, service_fn};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// // Below the metadata layer: how many `x-route` values would be sent.
/// let send = service_fn(|request: http::Request<()>| async move {
///     Ok::<_, std::convert::Infallible>(request.headers().get_all("x-route").iter().count())
/// });
/// let mut service = OutgoingMetadataLayer::new().layer(send);
///
/// // A layer above set `x-route: eu` and claimed it; the chain carries `chained`.
/// let request = |chained: &'static str| {
///     let (name, value) = (HeaderName::from_static("x-route"), HeaderValue::from_static("eu"));
///     let mut request = http::Request::new(());
///     request.headers_mut().insert(name.clone(), value.clone());
///     ClaimedHeaders::claim(request.extensions_mut(), name, value);
///     let chain = OutgoingMetadata::new().append_static("x-route", chained).unwrap();
///     request.extensions_mut().insert(chain);
///     request
/// };
/// assert_eq!(service.ready().await?.call(request("eu")).await?, 1); // sent once
/// let refused = service.ready().await?.call(request("us")).await.unwrap_err();
/// let status = refused.downcast::<tonic::Status>().unwrap();
/// assert_eq!(status.code(), tonic::Code::InvalidArgument);
/// assert_eq!(
///     status.message(),
///     "outgoing metadata sets x-route to 'us', but a layer above set it to 'eu'; \
///      the request was not sent"
/// );
/// # Ok::<(), tower::BoxError>(())
/// # }).unwrap();
/// ```
///
/// Claiming costs one allocation (the extension's box) the first time on a
/// request; further claims on the same request go into the same value.
///
/// [`OutgoingMetadataLayer`]: super::OutgoingMetadataLayer
#[derive(Debug, Clone)]
pub struct ClaimedHeaders {
    /// The first claim, inline: most requests carry one.
    first: (HeaderName, HeaderValue),
    /// Any further claims, in the order they were made.
    more: Vec<(HeaderName, HeaderValue)>,
}

impl ClaimedHeaders {
    /// Claims for one header: `name` set to `value`.
    pub fn new(name: HeaderName, value: HeaderValue) -> Self {
        Self {
            first: (name, value),
            more: Vec::new(),
        }
    }

    /// Adds a claim: `name` set to `value`. A name claimed before gets the
    /// new value (the headers now hold it).
    pub fn insert(&mut self, name: HeaderName, value: HeaderValue) {
        match self.get_mut(&name) {
            Some(claimed) => *claimed = value,
            None => self.more.push((name, value)),
        }
    }

    /// Claims `name` set to `value` in a request's `extensions`: added to
    /// the claims already there, or the first one.
    pub fn claim(extensions: &mut http::Extensions, name: HeaderName, value: HeaderValue) {
        match extensions.get_mut::<Self>() {
            Some(claims) => claims.insert(name, value),
            None => {
                extensions.insert(Self::new(name, value));
            }
        }
    }

    /// The claimed value of `name`, if it is claimed.
    pub fn get(&self, name: &HeaderName) -> Option<&HeaderValue> {
        self.iter()
            .find_map(|(claimed, value)| (claimed == name).then_some(value))
    }

    fn get_mut(&mut self, name: &HeaderName) -> Option<&mut HeaderValue> {
        std::iter::once(&mut self.first)
            .chain(&mut self.more)
            .find_map(|(claimed, value)| (claimed == name).then_some(value))
    }

    /// Every claim, in the order they were made.
    pub fn iter(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        std::iter::once(&self.first)
            .chain(&self.more)
            .map(|(name, value)| (name, value))
    }

    /// Judges `chain` against the claims (see the type's docs): `Ok(true)`
    /// if some entry of it repeats a claimed header and must not be
    /// written, `Ok(false)` if it names no claimed header, or the first
    /// conflict. One single-key walk of the chain per claim; nothing is
    /// allocated unless there is a conflict.
    pub(crate) fn judge(&self, chain: &OutgoingMetadata) -> Result<bool, ClaimedHeaderError> {
        let mut repeats = false;
        for (name, claimed) in self.iter() {
            match chain.first_and_count(name) {
                (None, _) => {}
                (Some(outgoing), 1) if outgoing == claimed => repeats = true,
                (Some(outgoing), 1) => return Err(different_value(name, claimed, outgoing)),
                (Some(_), count) => return Err(several_values(name, claimed, count)),
            }
        }
        Ok(repeats)
    }

    /// Whether the chain entry named `name` repeats a claim (and is not
    /// written): after [`judge`](Self::judge) accepted the chain, every
    /// entry of a claimed name does.
    #[inline]
    pub(crate) fn is_claimed(&self, name: &HeaderName) -> bool {
        self.get(name).is_some()
    }
}

/// A value as an error message shows it: `<sensitive>` when it, or the
/// claimed value it is judged against, is marked sensitive.
fn shown(value: &HeaderValue, claimed: &HeaderValue) -> String {
    if value.is_sensitive() || claimed.is_sensitive() {
        String::from("<sensitive>")
    } else {
        String::from_utf8_lossy(value.as_bytes()).into_owned()
    }
}

#[cold]
#[inline(never)]
fn different_value(
    name: &HeaderName,
    claimed: &HeaderValue,
    outgoing: &HeaderValue,
) -> ClaimedHeaderError {
    ClaimedHeaderError::DifferentValue {
        header: name.as_str().to_owned(),
        claimed: shown(claimed, claimed),
        outgoing: shown(outgoing, claimed),
    }
}

#[cold]
#[inline(never)]
fn several_values(name: &HeaderName, claimed: &HeaderValue, count: usize) -> ClaimedHeaderError {
    ClaimedHeaderError::SeveralValues {
        header: name.as_str().to_owned(),
        claimed: shown(claimed, claimed),
        count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    fn name() -> HeaderName {
        HeaderName::from_static("x-k")
    }

    /// What `OutgoingMetadataLayer` does with a chain and claims: judge,
    /// then write all of it or all but the claimed names.
    fn write_judged(
        chain: &OutgoingMetadata,
        headers: &mut HeaderMap,
        claims: &ClaimedHeaders,
    ) -> Result<(), ClaimedHeaderError> {
        let written = match claims.judge(chain)? {
            false => chain.write_to(headers),
            true => chain.write_unclaimed_to(headers, claims),
        };
        written.expect("the headers have room");
        Ok(())
    }

    fn chain(values: &[&'static str]) -> OutgoingMetadata {
        values.iter().fold(
            OutgoingMetadata::new()
                .append_static("x-other", "o")
                .unwrap(),
            |chain, value| chain.append_static("x-k", value).unwrap(),
        )
    }

    /// The claim rule: absent → nothing to judge; the same value once →
    /// not written again; a different value or several → the conflict,
    /// naming the header and both values; nothing is written then.
    #[test]
    fn the_same_value_once_is_sent_once_a_different_one_or_several_are_refused() {
        let claims = ClaimedHeaders::new(name(), HeaderValue::from_static("a"));
        let write = |chain: &OutgoingMetadata| {
            let mut headers = HeaderMap::new();
            headers.insert(name(), HeaderValue::from_static("a"));
            write_judged(chain, &mut headers, &claims).map(|()| headers)
        };

        let headers = write(&chain(&[])).unwrap();
        assert_eq!(headers.get_all("x-k").iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(headers.get("x-other").unwrap(), "o");

        let headers = write(&chain(&["a"])).unwrap();
        assert_eq!(headers.get_all("x-k").iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(headers.get("x-other").unwrap(), "o");

        let different = write(&chain(&["b"])).unwrap_err();
        assert_eq!(
            different,
            ClaimedHeaderError::DifferentValue {
                header: "x-k".into(),
                claimed: "a".into(),
                outgoing: "b".into(),
            }
        );
        assert_eq!(
            different.to_string(),
            "outgoing metadata sets x-k to 'b', but a layer above set it to 'a'; \
             the request was not sent"
        );
        let several = write(&chain(&["a", "a"])).unwrap_err();
        assert_eq!(
            several,
            ClaimedHeaderError::SeveralValues {
                header: "x-k".into(),
                claimed: "a".into(),
                count: 2,
            }
        );
        assert_eq!(several.header(), "x-k");
        assert_eq!(several.claimed(), "a");
    }

    /// A refused chain leaves the headers as they were.
    #[test]
    fn a_conflict_writes_nothing() {
        let claims = ClaimedHeaders::new(name(), HeaderValue::from_static("a"));
        let mut headers = HeaderMap::new();
        headers.insert(name(), HeaderValue::from_static("a"));
        let before = headers.clone();
        assert!(write_judged(&chain(&["b"]), &mut headers, &claims).is_err());
        assert_eq!(headers, before);
    }

    /// Claims of several names, and a name claimed twice, in one value.
    #[test]
    fn claims_accumulate_and_a_later_claim_of_a_name_wins() {
        let mut extensions = http::Extensions::new();
        let other = HeaderName::from_static("x-other");
        ClaimedHeaders::claim(&mut extensions, name(), HeaderValue::from_static("a"));
        ClaimedHeaders::claim(
            &mut extensions,
            other.clone(),
            HeaderValue::from_static("o"),
        );
        ClaimedHeaders::claim(&mut extensions, name(), HeaderValue::from_static("b"));
        let claims = extensions.get::<ClaimedHeaders>().unwrap();
        let all: Vec<_> = claims
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap()))
            .collect();
        assert_eq!(all, [("x-k", "b"), ("x-other", "o")]);
        // Both names are judged: `x-other: o` repeats its claim, `x-k: a`
        // differs from its claim `b`.
        assert_eq!(claims.judge(&chain(&["b"])), Ok(true));
        assert!(matches!(
            claims.judge(&chain(&["a"])),
            Err(ClaimedHeaderError::DifferentValue { .. })
        ));
        let unclaimed = OutgoingMetadata::new().append_static("x-y", "1").unwrap();
        assert_eq!(claims.judge(&unclaimed), Ok(false));
    }

    /// Values marked sensitive are not shown.
    #[test]
    fn sensitive_values_are_not_shown() {
        let mut secret = HeaderValue::from_static("s3cret");
        secret.set_sensitive(true);
        let claims = ClaimedHeaders::new(name(), secret);
        let conflict = claims.judge(&chain(&["guess"])).unwrap_err();
        assert_eq!(
            conflict,
            ClaimedHeaderError::DifferentValue {
                header: "x-k".into(),
                claimed: "<sensitive>".into(),
                outgoing: "<sensitive>".into(),
            }
        );
    }
}
