//! Org ids as a peer sends them in `x-scope-orgid`: one id, a federated
//! `a|b|c` list, several header values, on gRPC and plain HTTP requests
//! through the tenant server layer; each checked against Cortex's rules
//! (as `tenant::validate` documents them), written here from the rules.

use std::convert::Infallible;

use http::{HeaderMap, Request, Response, StatusCode};
use tonic_hotpath::tenant::{
    self, InvalidOrgIdError, OrgId, OrgIdError, RequireOrgIdLayer, TenantIds,
};
use tower::{Layer, Service};

use super::body::now;
use super::input::{Input, headers};

/// The rules, in their order: every byte allowed (the first that is not
/// is the error), not empty, not `.` or `..`, at most 150 bytes, not
/// reserved. `offset`: where `id` starts in the header value.
fn rules(id: &[u8], offset: usize) -> Result<(), InvalidOrgIdError> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"!-_.*'()".contains(&b);
    if let Some(at) = id.iter().position(|&b| !allowed(b)) {
        return Err(InvalidOrgIdError::Character {
            byte: id[at],
            position: offset + at,
        });
    }
    if id.is_empty() {
        return Err(InvalidOrgIdError::Empty { position: offset });
    }
    if id == b"." || id == b".." {
        return Err(InvalidOrgIdError::DotSegment);
    }
    if id.len() > OrgId::MAX_LEN {
        return Err(InvalidOrgIdError::TooLong { len: id.len() });
    }
    match OrgId::RESERVED.iter().find(|name| name.as_bytes() == id) {
        Some(name) => Err(InvalidOrgIdError::Reserved { name }),
        None => Ok(()),
    }
}

/// A federated list: each member by the rules (positions in the whole
/// value), then sorted and de-duplicated.
fn list(value: &[u8]) -> Result<Vec<&[u8]>, InvalidOrgIdError> {
    let mut ids = Vec::new();
    let mut offset = 0;
    for member in value.split(|&b| b == b'|') {
        rules(member, offset)?;
        ids.push(member);
        offset += member.len() + 1;
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// The one `x-scope-orgid` value.
fn single_value(headers: &HeaderMap) -> Result<&[u8], OrgIdError> {
    let mut values = headers.get_all("x-scope-orgid").iter();
    let first = values.next().ok_or(OrgIdError::Missing)?;
    match values.count() {
        0 => Ok(first.as_bytes()),
        more => Err(OrgIdError::TooManyHeaders { count: more + 1 }),
    }
}

/// A single tenant's id, by dskit's `TenantID`: the list's members are
/// checked first (an invalid one is the error); one distinct tenant is it
/// (`a|a` is `a`), several are too many (at the first `|`).
fn single(headers: &HeaderMap) -> Result<&[u8], OrgIdError> {
    let value = single_value(headers)?;
    match list(value).map_err(OrgIdError::Invalid)?.as_slice() {
        [one] => Ok(one),
        _ => Err(OrgIdError::MultipleTenants {
            position: value.iter().position(|&b| b == b'|').unwrap_or(0),
        }),
    }
}

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let choice = input.byte();
    let multi_tenant = choice & 1 == 1;
    let grpc = choice & 2 == 2;
    let headers = headers(
        &mut input,
        &["x-scope-orgid", "x-other", "content-type"],
        24,
    );

    // One value, as bytes: the id rules and the list rules.
    for value in headers.get_all("x-scope-orgid") {
        let value = value.as_bytes();
        let want = rules(value, 0);
        assert_eq!(
            tenant::validate_org_id(value)
                .map(str::as_bytes)
                .map(|_| ()),
            want
        );
        let id = OrgId::from_bytes(value);
        assert_eq!(id.as_ref().map(|_| ()).map_err(Clone::clone), want);
        if let Ok(id) = id {
            assert_eq!(id.as_bytes(), value);
            assert_eq!(id.to_header_value().as_bytes(), value, "round trip");
        }
        let ids = TenantIds::parse_bytes(value);
        let want = list(value);
        match (&ids, &want) {
            (Ok(ids), Ok(want)) => {
                let got: Vec<&[u8]> = ids.iter().map(OrgId::as_bytes).collect();
                assert_eq!(&got, want);
                let again = TenantIds::parse_bytes(ids.to_header_value().as_bytes());
                assert_eq!(again.as_ref(), Ok(ids), "round trip");
            }
            (got, want) => assert_eq!(got.as_ref().err(), want.as_ref().err(), "{value:?}"),
        }
    }

    // The request's headers: one tenant, or a list.
    let want_single = single(&headers);
    assert_eq!(
        tenant::extract_from_headers(&headers).map(str::as_bytes),
        want_single,
    );
    let want_list =
        single_value(&headers).and_then(|value| list(value).map_err(OrgIdError::Invalid));
    let got_list = tenant::extract_tenant_ids_from_headers(&headers).map(|ids| {
        ids.iter()
            .map(|id| id.as_bytes().to_vec())
            .collect::<Vec<_>>()
    });
    assert_eq!(
        got_list,
        want_list.map(|ids| ids.iter().map(|id| id.to_vec()).collect()),
    );

    // Through the server layer, as gRPC or plain HTTP.
    let mut request = Request::new(String::new());
    *request.headers_mut() = headers.clone();
    request.headers_mut().remove("content-type");
    if grpc {
        request.headers_mut().insert(
            "content-type",
            http::HeaderValue::from_static("application/grpc"),
        );
    }
    let mut service = RequireOrgIdLayer::new()
        .allow_multi_tenant(multi_tenant)
        .layer(tower::service_fn(|_: Request<String>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let response = now(service.call(request)).unwrap();
    let refused = match multi_tenant {
        true => want_list_error(&headers),
        false => single(&headers).err(),
    };
    let grpc_status = response
        .headers()
        .get("grpc-status")
        .map(|v| v.as_bytes().to_vec());
    match (refused, grpc) {
        (None, _) => {
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(grpc_status, None, "admitted");
        }
        (Some(error), true) => {
            assert_eq!(response.status(), StatusCode::OK, "trailers-only");
            let code = (error.code() as i32).to_string().into_bytes();
            assert_eq!(grpc_status, Some(code));
        }
        (Some(error), false) => {
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "dskit's 401");
            assert_eq!(grpc_status, None);
            let text = now(http_body_util::BodyExt::collect(response.into_body()))
                .unwrap()
                .to_bytes();
            // dskit's `http.Error`: the text and a newline.
            assert_eq!(text, format!("{error}\n"), "the error's text");
        }
    }
}

fn want_list_error(headers: &HeaderMap) -> Option<OrgIdError> {
    single_value(headers)
        .and_then(|value| list(value).map(|_| ()).map_err(OrgIdError::Invalid))
        .err()
}
