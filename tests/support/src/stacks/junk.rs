//! Clients that send junk: a raw h2 client that sends any headers and body
//! bytes (bad frames, bad content types, wrong flags) and reports whatever
//! came back, reset reasons included; and a raw HTTP/1.1 sender.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one junk exchange may take before it counts as no answer.
/// Every caller expects an answer (or a close) well before it: the bound
/// only keeps a broken server from hanging the test, so it is generous,
/// as `crate::PATIENCE` is. A flood of a thousand streams on a loaded
/// 2-core machine has had single exchanges take over 5 s.
pub const JUNK_TIMEOUT: Duration = Duration::from_secs(30);

/// What came back for a raw h2 request; the fields filled in so far when
/// the stream or connection failed.
#[derive(Debug, Clone, Default)]
pub struct H2Reply {
    /// The response status, if headers came.
    pub status: Option<StatusCode>,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body bytes received.
    pub body: Vec<u8>,
    /// The trailers, if any came.
    pub trailers: Option<HeaderMap>,
    /// The reason of a `RST_STREAM` or `GOAWAY` that ended the exchange.
    pub reset: Option<h2::Reason>,
    /// Any error (reset, I/O, protocol, timeout), as text.
    pub error: Option<String>,
    /// The error h2 gave for the body when the server had answered in
    /// full and closed the stream before the body went out (RFC 9113
    /// section 8.1 allows it; the answer stands), as text.
    pub body_refused: Option<String>,
}

impl H2Reply {
    /// `grpc-status` from the trailers, else from the headers
    /// (trailers-only).
    pub fn grpc_status(&self) -> Option<i32> {
        let trailers = self.trailers.as_ref().and_then(|t| t.get("grpc-status"));
        let value = trailers.or(self.headers.get("grpc-status"))?;
        value.to_str().ok()?.parse().ok()
    }
}

/// A `POST` to `http://127.0.0.1{path}` with `content-type` and
/// `te: trailers`, for [`h2_send`]. Add or change headers freely, but h2
/// refuses connection-specific ones (`connection`, `te` other than
/// `trailers`, ...) before sending.
pub fn grpc_request(path: &str, content_type: &str) -> Request<()> {
    Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{path}"))
        .header("content-type", content_type)
        .header("te", "trailers")
        .body(())
        .expect("a valid request")
}

/// Sends `request` with `body` (ending the stream; empty: headers only)
/// over a new h2 connection to `addr` and reads the answer to its end.
pub async fn h2_send(addr: SocketAddr, request: Request<()>, body: Bytes) -> H2Reply {
    let io = TcpStream::connect(addr).await.expect("connect");
    io.set_nodelay(true).expect("TCP_NODELAY");
    h2_send_on(io, request, body).await
}

/// [`h2_send`] over any connected `io` (a Unix socket, a TLS stream).
pub async fn h2_send_on<IO>(io: IO, request: Request<()>, body: Bytes) -> H2Reply
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match h2_handshake(io).await {
        Ok(client) => h2_exchange(client, request, body).await,
        Err(error) => H2Reply::failed(error),
    }
}

/// A new h2 client connection to `addr` (TCP_NODELAY on), its connection
/// task spawned; clone the handle to open many streams on it (with
/// [`h2_exchange`]). The connection closes once every clone is dropped.
pub async fn h2_connect(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let io = TcpStream::connect(addr).await.expect("connect");
    io.set_nodelay(true).expect("TCP_NODELAY");
    h2_handshake(io).await.expect("h2 handshake")
}

/// The client handshake over `io`, the connection task spawned.
async fn h2_handshake<IO>(io: IO) -> Result<h2::client::SendRequest<Bytes>, Failure>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let handshake = async {
        let (client, connection) = h2::client::handshake(io).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    };
    match tokio::time::timeout(JUNK_TIMEOUT, handshake).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failure::timeout()),
    }
}

/// Sends `request` with `body` (ending the stream; empty: headers only) as
/// a new stream of `client` (see [`h2_connect`]) and reads the answer to
/// its end, within [`JUNK_TIMEOUT`].
pub async fn h2_exchange(
    client: h2::client::SendRequest<Bytes>,
    request: Request<()>,
    body: Bytes,
) -> H2Reply {
    let mut reply = H2Reply::default();
    let exchange = exchange(client, request, body, &mut reply);
    let outcome = match tokio::time::timeout(JUNK_TIMEOUT, exchange).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failure::timeout()),
    };
    if let Err(error) = outcome {
        reply.fail(error);
    }
    reply
}

impl H2Reply {
    fn failed(error: Failure) -> Self {
        let mut reply = H2Reply::default();
        reply.fail(error);
        reply
    }

    fn fail(&mut self, error: Failure) {
        match error {
            Failure::H2(error) => {
                self.reset = error.reason();
                self.error = Some(error.to_string());
            }
            Failure::Other(error) => self.error = Some(error),
        }
    }
}

#[derive(Debug)]
enum Failure {
    H2(h2::Error),
    Other(String),
}

impl Failure {
    fn timeout() -> Self {
        Failure::Other("no answer before the timeout".to_owned())
    }
}

impl From<h2::Error> for Failure {
    fn from(error: h2::Error) -> Self {
        Failure::H2(error)
    }
}

async fn exchange(
    client: h2::client::SendRequest<Bytes>,
    request: Request<()>,
    body: Bytes,
    reply: &mut H2Reply,
) -> Result<(), Failure> {
    let mut client = client.ready().await?;
    let (response, mut send) = client.send_request(request, body.is_empty())?;
    let refused = if body.is_empty() {
        None
    } else {
        send.send_data(body, true).err()
    };
    let response = match refused {
        None => response.await?,
        // The stream closed before its body went out: a server may answer
        // in full without reading the body, then reset the stream with
        // NO_ERROR (RFC 9113 section 8.1: the client must not discard that
        // answer), and h2 refuses the body ("inactive stream"). On a
        // loaded machine that comes between `send_request` and
        // `send_data` (issue #45). The stream is closed, so its answer, or
        // the reset that ended it, is already in: the body's error
        // counts only when neither is.
        Some(refused) => match tokio::time::timeout(Duration::ZERO, response).await {
            Ok(answer) => {
                let answer = answer?;
                reply.body_refused = Some(refused.to_string());
                answer
            }
            Err(_) => return Err(refused.into()),
        },
    };
    reply.status = Some(response.status());
    reply.headers = response.headers().clone();
    let mut received = response.into_body();
    while let Some(chunk) = received.data().await {
        let chunk = chunk?;
        let _ = received.flow_control().release_capacity(chunk.len());
        reply.body.extend_from_slice(&chunk);
    }
    reply.trailers = received.trailers().await?;
    Ok(())
}

/// What came back on a raw HTTP/1.1 connection, as bytes.
#[derive(Debug, Clone)]
pub struct RawReply {
    /// Everything read until the server closed the connection or
    /// [`JUNK_TIMEOUT`] passed.
    pub bytes: Vec<u8>,
    /// Whether the server closed the connection (else the timeout ended
    /// the read).
    pub closed: bool,
}

impl RawReply {
    /// The status code of the first status line, if one came.
    pub fn status(&self) -> Option<u16> {
        let text = self.text();
        let line = text.lines().next()?;
        let mut words = line.split(' ');
        words.next().filter(|v| v.starts_with("HTTP/"))?;
        words.next()?.parse().ok()
    }

    /// The reply as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Writes `raw` (request line, headers, body, exactly as given) to a new
/// TCP connection to `addr` and reads until the server closes it. Send
/// `connection: close` (or junk the server drops) so the read ends before
/// [`JUNK_TIMEOUT`].
pub async fn http1_raw(addr: SocketAddr, raw: &[u8]) -> RawReply {
    let mut io = TcpStream::connect(addr).await.expect("connect");
    io.set_nodelay(true).expect("TCP_NODELAY");
    io.write_all(raw).await.expect("write the raw request");
    let mut bytes = Vec::new();
    let closed = tokio::time::timeout(JUNK_TIMEOUT, async {
        let mut buf = [0u8; 4096];
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    RawReply { bytes, closed }
}
