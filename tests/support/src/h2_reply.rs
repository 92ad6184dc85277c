//! A raw HTTP/2 server (the `h2` crate on 127.0.0.1) that answers every
//! request with one fixed [`Reply`]: whatever status, headers, body chunks
//! and trailers a test wants a tonic client to meet — a proxy answering
//! with a bare HTTP status, a peer sending junk or compressed frames.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

/// What the server answers.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The `:status`.
    pub status: u16,
    /// The response headers.
    pub headers: Vec<(&'static str, &'static str)>,
    /// The body, one DATA frame per chunk.
    pub body: Vec<Bytes>,
    /// The trailers; `None` ends the stream with the last body chunk (or
    /// with the headers when there is no body).
    pub trailers: Option<Vec<(&'static str, &'static str)>>,
}

impl Reply {
    /// `status` with no header, body or trailers: what a proxy or load
    /// balancer answers when it has no gRPC backend.
    pub fn bare(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            trailers: None,
        }
    }

    /// A gRPC response (`200`, `content-type: application/grpc`) with
    /// `body` and the trailers `grpc-status: 0`.
    pub fn grpc_ok(body: Vec<Bytes>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type", "application/grpc")],
            body,
            trailers: Some(vec![("grpc-status", "0")]),
        }
    }

    /// The same reply with one more response header.
    pub fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }
}

fn header_map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(name, value)| {
            (
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            )
        })
        .collect()
}

/// Serves `reply` to every request on 127.0.0.1; returns the address.
pub async fn serve(reply: Reply) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(answer(socket, reply.clone()));
        }
    });
    addr
}

async fn answer(socket: tokio::net::TcpStream, reply: Reply) {
    let Ok(mut conn) = h2::server::handshake(socket).await else {
        return;
    };
    // Streams this server keeps open (dropping one would reset it).
    let mut open = Vec::new();
    while let Some(Ok((_request, mut respond))) = conn.accept().await {
        let mut response = http::Response::new(());
        *response.status_mut() = http::StatusCode::from_u16(reply.status).unwrap();
        *response.headers_mut() = header_map(&reply.headers);
        let ends_now = reply.body.is_empty() && reply.trailers.is_none();
        let Ok(mut stream) = respond.send_response(response, ends_now) else {
            continue;
        };
        let last = reply.body.len();
        for (index, chunk) in reply.body.iter().enumerate() {
            let end = index + 1 == last && reply.trailers.is_none();
            let _ = stream.send_data(chunk.clone(), end);
        }
        if let Some(trailers) = &reply.trailers {
            let _ = stream.send_trailers(header_map(trailers));
        }
        open.push(stream);
    }
}
