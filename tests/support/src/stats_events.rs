//! A stats handler that records every event of every RPC and connection,
//! for tests that check what a `CombinedLayer` reports on a real stack.
//!
//! Its per-RPC state is the RPC's id and its per-connection state the
//! connection's id (non-zero-sized, so the server layer links RPCs to
//! the connections its incoming stream accepted).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::Code;
use tonic_hotpath::stats::{
    CombinedLayer, CombinedService, ConnEvent, ConnInfo, Payload, RpcError, RpcEvent, RpcInfo,
    Side, StatsHandler,
};

/// One event, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    Begin,
    InHeader,
    OutHeader,
    InPayload(Payload<'static>),
    OutPayload(Payload<'static>),
    InTrailer,
    OutTrailer,
    End {
        code: Code,
        message: String,
        error: Option<RpcError>,
    },
}

impl Ev {
    /// The event's name, for comparing sequences.
    pub fn name(&self) -> &'static str {
        match self {
            Ev::Begin => "Begin",
            Ev::InHeader => "InHeader",
            Ev::OutHeader => "OutHeader",
            Ev::InPayload(_) => "InPayload",
            Ev::OutPayload(_) => "OutPayload",
            Ev::InTrailer => "InTrailer",
            Ev::OutTrailer => "OutTrailer",
            Ev::End { .. } => "End",
        }
    }
}

/// How one RPC was tagged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged {
    pub side: Side,
    pub method: String,
    /// The id of the connection `tag_rpc` was given, if any.
    pub conn: Option<u64>,
    pub peer_addr: Option<SocketAddr>,
    pub local_addr: Option<SocketAddr>,
}

/// Records everything it is handed.
#[derive(Debug, Default)]
pub struct EventLog {
    next_rpc: AtomicU64,
    next_conn: AtomicU64,
    tagged: Mutex<BTreeMap<u64, Tagged>>,
    events: Mutex<Vec<(u64, Ev)>>,
    conns: Mutex<Vec<(u64, ConnInfo, &'static str)>>,
}

impl StatsHandler for EventLog {
    type RpcState = u64;
    type ConnState = u64;
    // Everything: compressed messages are logged with their uncompressed
    // length (and judged as their receiver will).
    const UNCOMPRESSED_SIZES: bool = true;

    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&u64>) -> u64 {
        let id = self.next_rpc.fetch_add(1, Ordering::SeqCst);
        let tagged = Tagged {
            side: info.side,
            method: info.method.to_owned(),
            conn: conn.copied(),
            peer_addr: info.peer_addr,
            local_addr: info.local_addr,
        };
        self.tagged.lock().unwrap().insert(id, tagged);
        id
    }

    fn handle_rpc(&self, id: &mut u64, event: &RpcEvent<'_>) {
        let ev = match event {
            RpcEvent::Begin { .. } => Ev::Begin,
            RpcEvent::InHeader(_) => Ev::InHeader,
            RpcEvent::OutHeader(_) => Ev::OutHeader,
            RpcEvent::InPayload(p) => Ev::InPayload(p.with_time(None).with_data(None)),
            RpcEvent::OutPayload(p) => Ev::OutPayload(p.with_time(None).with_data(None)),
            RpcEvent::InTrailer(_) => Ev::InTrailer,
            RpcEvent::OutTrailer(_) => Ev::OutTrailer,
            RpcEvent::End(end) => Ev::End {
                code: end.code,
                message: end.message.to_owned(),
                error: end.error.cloned(),
            },
            other => panic!("an event this log does not know: {other:?}"),
        };
        self.events.lock().unwrap().push((*id, ev));
    }

    fn tag_conn(&self, info: &ConnInfo) -> u64 {
        let id = self.next_conn.fetch_add(1, Ordering::SeqCst);
        self.conns.lock().unwrap().push((id, *info, "tagged"));
        id
    }

    fn handle_conn(&self, id: &u64, event: &ConnEvent) {
        let mut conns = self.conns.lock().unwrap();
        let (_, info, _) = *conns.iter().find(|(conn, ..)| conn == id).unwrap();
        let kind = match event {
            ConnEvent::Begin { .. } => "begin",
            ConnEvent::End { .. } => "end",
            other => panic!("a connection event this log does not know: {other:?}"),
        };
        conns.push((*id, info, kind));
    }
}

impl EventLog {
    /// How many RPCs were tagged.
    pub fn rpc_count(&self) -> usize {
        self.next_rpc.load(Ordering::SeqCst) as usize
    }

    /// Every RPC's events, by RPC id.
    pub fn rpcs(&self) -> Vec<Vec<Ev>> {
        let mut by_rpc: BTreeMap<u64, Vec<Ev>> = BTreeMap::new();
        for (id, ev) in self.events.lock().unwrap().iter() {
            by_rpc.entry(*id).or_default().push(ev.clone());
        }
        by_rpc.into_values().collect()
    }

    /// Every RPC's event names, by RPC id.
    pub fn sequences(&self) -> Vec<Vec<&'static str>> {
        let rpcs = self.rpcs();
        rpcs.iter()
            .map(|events| events.iter().map(Ev::name).collect())
            .collect()
    }

    /// How each RPC was tagged, by RPC id.
    pub fn tagged(&self) -> Vec<Tagged> {
        self.tagged.lock().unwrap().values().cloned().collect()
    }

    /// The `End`s delivered so far: code, message, error.
    pub fn ends(&self) -> Vec<(Code, String, Option<RpcError>)> {
        let events = self.events.lock().unwrap();
        let ends = events.iter().filter_map(|(_, ev)| match ev {
            Ev::End {
                code,
                message,
                error,
            } => Some((*code, message.clone(), error.clone())),
            _ => None,
        });
        ends.collect()
    }

    /// Every payload event: (inbound?, payload).
    pub fn payloads(&self) -> Vec<(bool, Payload<'static>)> {
        let events = self.events.lock().unwrap();
        let payloads = events.iter().filter_map(|(_, ev)| match ev {
            Ev::InPayload(p) => Some((true, *p)),
            Ev::OutPayload(p) => Some((false, *p)),
            _ => None,
        });
        payloads.collect()
    }

    /// The connection events so far: (connection id, what).
    pub fn conn_events(&self) -> Vec<(u64, &'static str)> {
        let conns = self.conns.lock().unwrap();
        conns.iter().map(|(id, _, kind)| (*id, *kind)).collect()
    }

    /// The connections tagged so far, with what was known of them.
    pub fn conns(&self) -> Vec<(u64, ConnInfo)> {
        let conns = self.conns.lock().unwrap();
        let tagged = conns.iter().filter(|(.., kind)| *kind == "tagged");
        tagged.map(|(id, info, _)| (*id, *info)).collect()
    }

    /// Waits (up to [`PATIENCE`](crate::PATIENCE)) for `n` `End`s,
    /// then checks no more come (20 ms).
    pub async fn wait_for_ends(&self, n: usize) -> Vec<(Code, String, Option<RpcError>)> {
        let deadline = crate::deadline();
        while std::time::Instant::now() < deadline {
            if self.ends().len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let ends = self.ends();
        assert_eq!(ends.len(), n, "exactly {n} End(s): {ends:?}");
        ends
    }
}

/// An echo client whose channel is wrapped in a client stats layer that
/// logs into an [`EventLog`].
pub type LoggedClient = crate::EchoClient<
    CombinedService<tonic::transport::Channel, Arc<EventLog>, tonic_hotpath::stats::ClientSide>,
>;

/// A client of `addr` behind a client stats layer logging into the
/// returned log; the client accepts messages up to `limit` bytes, and its
/// layer is told the same limit (as the layer's docs ask).
pub async fn logged_client(addr: SocketAddr, limit: u32) -> (Arc<EventLog>, LoggedClient) {
    let log = Arc::new(EventLog::default());
    let layer = CombinedLayer::client()
        .with(Arc::clone(&log))
        .max_message_len(limit);
    let layered = tower::ServiceBuilder::new()
        .layer(layer)
        .service(crate::connect(addr).await);
    let client = crate::EchoClient::new(layered).max_decoding_message_size(limit as usize);
    (log, client)
}
