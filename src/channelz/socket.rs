//! A channelz socket: one connection, server-accepted or client-dialled,
//! with its stream and message counters.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use super::clock;
use super::proto;

/// The TLS details of a socket that tonic can give.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsDetails {
    /// The peer's certificate (DER), when it presented one.
    pub(crate) remote_certificate: Option<Vec<u8>>,
    /// This side's certificate (DER), when the application gave it.
    pub(crate) local_certificate: Option<Vec<u8>>,
}

/// One connection's entity. Its counters are written by the RPCs on that
/// connection only.
#[derive(Debug)]
pub(crate) struct SocketEntity {
    pub(crate) id: i64,
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
    streams_started: AtomicU64,
    streams_succeeded: AtomicU64,
    streams_failed: AtomicU64,
    messages_sent: AtomicU64,
    messages_received: AtomicU64,
    /// Unix nanoseconds; 0 = never.
    last_local_stream_created: AtomicI64,
    last_remote_stream_created: AtomicI64,
    last_message_sent: AtomicI64,
    last_message_received: AtomicI64,
    /// Whether the connection's TLS state has been looked for (once, by
    /// its first RPC).
    tls_checked: AtomicBool,
    tls: OnceLock<TlsDetails>,
    /// Whether the socket has left the registry (its connection closed).
    removed: AtomicBool,
}

/// Which side opened a stream: the peer (server sockets) or this side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamOrigin {
    Local,
    Remote,
}

impl SocketEntity {
    pub(crate) fn new(id: i64, local: Option<SocketAddr>, remote: Option<SocketAddr>) -> Self {
        Self {
            id,
            local,
            remote,
            streams_started: AtomicU64::new(0),
            streams_succeeded: AtomicU64::new(0),
            streams_failed: AtomicU64::new(0),
            messages_sent: AtomicU64::new(0),
            messages_received: AtomicU64::new(0),
            last_local_stream_created: AtomicI64::new(0),
            last_remote_stream_created: AtomicI64::new(0),
            last_message_sent: AtomicI64::new(0),
            last_message_received: AtomicI64::new(0),
            tls_checked: AtomicBool::new(false),
            tls: OnceLock::new(),
            removed: AtomicBool::new(false),
        }
    }

    #[inline]
    pub(crate) fn stream_started(&self, origin: StreamOrigin, unix_nanos: i64) {
        self.streams_started.fetch_add(1, Ordering::Relaxed);
        let last = match origin {
            StreamOrigin::Local => &self.last_local_stream_created,
            StreamOrigin::Remote => &self.last_remote_stream_created,
        };
        last.fetch_max(unix_nanos, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn stream_ended(&self, succeeded: bool) {
        let counter = if succeeded {
            &self.streams_succeeded
        } else {
            &self.streams_failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn message_sent(&self, unix_nanos: Option<i64>) {
        self.messages_sent.fetch_add(1, Ordering::Relaxed);
        if let Some(at) = unix_nanos {
            self.last_message_sent.fetch_max(at, Ordering::Relaxed);
        }
    }

    #[inline]
    pub(crate) fn message_received(&self, unix_nanos: Option<i64>) {
        self.messages_received.fetch_add(1, Ordering::Relaxed);
        if let Some(at) = unix_nanos {
            self.last_message_received.fetch_max(at, Ordering::Relaxed);
        }
    }

    /// Whether the TLS state still has to be looked for; true once only.
    #[inline]
    pub(crate) fn should_check_tls(&self) -> bool {
        !self.tls_checked.load(Ordering::Relaxed) && !self.tls_checked.swap(true, Ordering::Relaxed)
    }

    /// Whether the socket still has to leave the registry; true once only.
    pub(crate) fn should_remove(&self) -> bool {
        !self.removed.swap(true, Ordering::Relaxed)
    }

    pub(crate) fn set_tls(&self, details: TlsDetails) {
        let _ = self.tls.set(details);
    }

    /// The socket's reference, as its parent lists it: named, as in
    /// grpc-go, only for a listening socket (its address).
    pub(crate) fn reference(&self) -> proto::SocketRef {
        proto::SocketRef {
            socket_id: self.id,
            name: match (self.local, self.remote) {
                (Some(local), None) => local.to_string(),
                _ => String::new(),
            },
        }
    }

    /// The socket's channelz view now.
    pub(crate) fn view(&self) -> proto::Socket {
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed) as i64;
        let time = |at: &AtomicI64| clock::timestamp(at.load(Ordering::Relaxed));
        proto::Socket {
            r#ref: Some(self.reference()),
            data: Some(proto::SocketData {
                streams_started: count(&self.streams_started),
                streams_succeeded: count(&self.streams_succeeded),
                streams_failed: count(&self.streams_failed),
                messages_sent: count(&self.messages_sent),
                messages_received: count(&self.messages_received),
                keep_alives_sent: 0,
                last_local_stream_created_timestamp: time(&self.last_local_stream_created),
                last_remote_stream_created_timestamp: time(&self.last_remote_stream_created),
                last_message_sent_timestamp: time(&self.last_message_sent),
                last_message_received_timestamp: time(&self.last_message_received),
                local_flow_control_window: None,
                remote_flow_control_window: None,
                option: Vec::new(),
                received_goaway_error: None,
                peer_max_concurrent_streams: 0,
            }),
            local: self.local.map(address),
            remote: self.remote.map(address),
            security: self.tls.get().map(security),
            remote_name: String::new(),
        }
    }
}

fn address(addr: SocketAddr) -> proto::Address {
    let ip_address = match addr.ip() {
        std::net::IpAddr::V4(v4) => v4.octets().to_vec(),
        std::net::IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    proto::Address {
        address: Some(proto::address::Address::TcpipAddress(
            proto::address::TcpIpAddress {
                ip_address,
                port: i32::from(addr.port()),
            },
        )),
    }
}

fn security(details: &TlsDetails) -> proto::Security {
    proto::Security {
        model: Some(proto::security::Model::Tls(proto::security::Tls {
            local_certificate: details.local_certificate.clone().unwrap_or_default(),
            remote_certificate: details.remote_certificate.clone().unwrap_or_default(),
            cipher_suite: None,
        })),
    }
}
