//! The gRPC `content-type` rule.

use http::HeaderMap;
use http::header::CONTENT_TYPE;

use super::headers::first_value;

/// What a `content-type` says of a request or response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentType {
    /// gRPC: `application/grpc`, `application/grpc+<subtype>` or
    /// `application/grpc;<parameters>`.
    Grpc,
    /// grpc-web: `application/grpc-web` or `application/grpc-web-text`,
    /// each alone or followed by `+<subtype>` or `;<parameters>`.
    GrpcWeb,
    /// Anything else, or none.
    Other,
}

/// Reads the `content-type` of `headers` (its first value).
///
/// The rule is grpc-go's `ContentSubtype` (the type, then the end, a `+`
/// or a `;`; no spaces) with two choices where peers differ:
/// - the type is compared without regard to ASCII case, as media types
///   are (RFC 9110 §8.3.1) and as tonic serves them (tonic does not check
///   a request's `content-type`; grpc-go compares it exactly). A layer on
///   a tonic server counts, limits and answers as gRPC what tonic serves
///   as gRPC;
/// - grpc-web is its own answer (tonic-web's two types), so each caller
///   says whether it counts: the tenant layers answer grpc-web clients in
///   gRPC (their status reaches them through tonic-web), the stats layer
///   does not observe grpc-web (it goes inside tonic-web's translation).
#[inline]
pub(crate) fn content_type(headers: &HeaderMap) -> ContentType {
    first_value(headers, &CONTENT_TYPE).map_or(ContentType::Other, |value| parse(value.as_bytes()))
}

/// Whether `headers` are gRPC's; grpc-web too when `grpc_web`.
#[inline]
pub(crate) fn is_grpc(headers: &HeaderMap, grpc_web: bool) -> bool {
    match content_type(headers) {
        ContentType::Grpc => true,
        ContentType::GrpcWeb => grpc_web,
        ContentType::Other => false,
    }
}

/// Classifies one `content-type` value.
pub(crate) fn parse(value: &[u8]) -> ContentType {
    const GRPC: &[u8] = b"application/grpc";
    let Some((kind, rest)) = value.split_at_checked(GRPC.len()) else {
        return ContentType::Other;
    };
    if !kind.eq_ignore_ascii_case(GRPC) {
        return ContentType::Other;
    }
    if ends_type(rest) {
        return ContentType::Grpc;
    }
    let web = |suffix: &[u8]| {
        rest.get(..suffix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(suffix))
            && ends_type(&rest[suffix.len()..])
    };
    if web(b"-web") || web(b"-web-text") {
        ContentType::GrpcWeb
    } else {
        ContentType::Other
    }
}

/// Whether the type ends here: nothing more, a `+<subtype>` or
/// `;<parameters>`.
fn ends_type(rest: &[u8]) -> bool {
    matches!(rest.first(), None | Some(b'+' | b';'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_grpc_web_and_the_rest() {
        for grpc in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc+json",
            "application/grpc;charset=utf-8",
            "Application/GRPC+proto",
            "APPLICATION/grpc",
        ] {
            assert_eq!(parse(grpc.as_bytes()), ContentType::Grpc, "{grpc}");
        }
        for web in [
            "application/grpc-web",
            "application/grpc-web+proto",
            "application/grpc-web-text",
            "application/grpc-web-text+proto",
            "application/GRPC-WEB-text",
            "application/grpc-web;charset=utf-8",
        ] {
            assert_eq!(parse(web.as_bytes()), ContentType::GrpcWeb, "{web}");
        }
        for other in [
            "",
            "application/grp",
            "application/grpcx",
            "application/grpc-",
            "application/grpc-we",
            "application/grpc-webx",
            "application/grpc-web-tex",
            "application/grpc ;x",
            "application/grpc\t",
            "application/json",
            "text/plain",
        ] {
            assert_eq!(parse(other.as_bytes()), ContentType::Other, "{other:?}");
        }
    }

    #[test]
    fn the_first_value_decides_and_grpc_web_is_the_callers_choice() {
        let mut headers = HeaderMap::new();
        assert!(!is_grpc(&headers, true), "no content-type");
        headers.insert(CONTENT_TYPE, "application/grpc-web".parse().unwrap());
        assert!(is_grpc(&headers, true));
        assert!(!is_grpc(&headers, false));
        headers.append(CONTENT_TYPE, "application/grpc".parse().unwrap());
        assert_eq!(content_type(&headers), ContentType::GrpcWeb);
    }
}
