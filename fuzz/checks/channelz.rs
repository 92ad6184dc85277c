//! channelz requests as a peer sends them: any bytes, decoded as each
//! request message, answered by the service over a registry holding a few
//! servers, listen sockets and channels. Listings keep grpc-go's paging
//! rules whatever the ids and page sizes (negative, zero, huge); lookups
//! answer the registered entities and `NOT_FOUND` for the rest.

use std::net::SocketAddr;
use std::sync::OnceLock;

use prost::Message;
use tonic::{Code, Request, Status};
use tonic_hotpath::channelz::proto::channelz_server::Channelz;
use tonic_hotpath::channelz::proto::*;
use tonic_hotpath::channelz::{ChannelEntry, ChannelzService, ListenSocket, ServerEntry};

use super::body::now;
use super::input::Input;

/// What the fuzzed process registered (kept alive for the whole run).
struct Registered {
    servers: Vec<ServerEntry>,
    _listen: Vec<ListenSocket>,
    channels: Vec<ChannelEntry>,
}

fn registered() -> &'static Registered {
    static REGISTERED: OnceLock<Registered> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        let servers: Vec<ServerEntry> = (0..3)
            .map(|i| ServerEntry::named(format!("s{i}")))
            .collect();
        let listen = servers
            .iter()
            .map(|server| server.listen_socket(SocketAddr::from(([127, 0, 0, 1], 50051))))
            .collect();
        let channels = (0..60)
            .map(|i| ChannelEntry::new(format!("dns:///c{i}")))
            .collect();
        Registered {
            servers,
            _listen: listen,
            channels,
        }
    })
}

/// A listing's page: ids at or above `start`, ascending, at most `max`
/// (50 for 0 or less), and `end` unless the page is full.
fn check_page(ids: &[i64], end: bool, start: i64, max: i64) {
    let max = usize::try_from(max)
        .ok()
        .filter(|max| *max > 0)
        .unwrap_or(50);
    assert!(ids.len() <= max, "{} entries, max {max}", ids.len());
    assert!(ids.iter().all(|id| *id >= start), "{ids:?} from {start}");
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "{ids:?} sorted"
    );
    assert!(
        end || ids.len() == max,
        "a page that is not full is the last"
    );
}

/// A lookup's answer (the id of the entity found): the entity with the
/// requested id, or `NOT_FOUND`, which a registered id never gets.
fn check_lookup(what: &str, id: i64, known: bool, answer: Result<Option<i64>, Status>) {
    match answer {
        Ok(found) => assert_eq!(found, Some(id), "{what} {id}"),
        Err(status) => {
            assert!(!known, "{what} {id} is registered");
            assert_eq!(status.code(), Code::NotFound);
        }
    }
}

pub fn check(data: &[u8]) {
    let registered = registered();
    let service = ChannelzService;
    let mut input = Input::new(data);
    let method = input.byte() % 7;
    let bytes = input.rest();
    match method {
        0 => {
            let Ok(request) = GetTopChannelsRequest::decode(bytes) else {
                return;
            };
            let (start, max) = (request.start_channel_id, request.max_results);
            let page = now(service.get_top_channels(Request::new(request)))
                .unwrap()
                .into_inner();
            let ids: Vec<i64> = page
                .channel
                .iter()
                .filter_map(|c| c.r#ref.as_ref())
                .map(|r| r.channel_id)
                .collect();
            assert_eq!(ids.len(), page.channel.len(), "every channel has its ref");
            check_page(&ids, page.end, start, max);
        }
        1 => {
            let Ok(request) = GetServersRequest::decode(bytes) else {
                return;
            };
            let (start, max) = (request.start_server_id, request.max_results);
            let page = now(service.get_servers(Request::new(request)))
                .unwrap()
                .into_inner();
            let ids: Vec<i64> = page
                .server
                .iter()
                .filter_map(|s| s.r#ref.as_ref())
                .map(|r| r.server_id)
                .collect();
            assert_eq!(ids.len(), page.server.len(), "every server has its ref");
            check_page(&ids, page.end, start, max);
        }
        2 => {
            let Ok(request) = GetServerSocketsRequest::decode(bytes) else {
                return;
            };
            let (start, max) = (request.start_socket_id, request.max_results);
            let page = now(service.get_server_sockets(Request::new(request)))
                .unwrap()
                .into_inner();
            let ids: Vec<i64> = page.socket_ref.iter().map(|r| r.socket_id).collect();
            check_page(&ids, page.end, start, max);
        }
        3 => {
            let Ok(request) = GetServerRequest::decode(bytes) else {
                return;
            };
            let id = request.server_id;
            let known = registered.servers.iter().any(|server| server.id() == id);
            let answer = now(service.get_server(Request::new(request))).map(|r| {
                r.into_inner()
                    .server
                    .and_then(|s| s.r#ref)
                    .map(|r| r.server_id)
            });
            check_lookup("server", id, known, answer);
        }
        4 => {
            let Ok(request) = GetChannelRequest::decode(bytes) else {
                return;
            };
            let id = request.channel_id;
            let known = registered.channels.iter().any(|channel| channel.id() == id);
            let answer = now(service.get_channel(Request::new(request))).map(|r| {
                r.into_inner()
                    .channel
                    .and_then(|c| c.r#ref)
                    .map(|r| r.channel_id)
            });
            check_lookup("channel", id, known, answer);
        }
        5 => {
            let Ok(request) = GetSubchannelRequest::decode(bytes) else {
                return;
            };
            let id = request.subchannel_id;
            let known = registered
                .channels
                .iter()
                .any(|channel| channel.subchannel_id() == id);
            let answer = now(service.get_subchannel(Request::new(request))).map(|r| {
                let subchannel = r.into_inner().subchannel;
                subchannel.and_then(|s| s.r#ref).map(|r| r.subchannel_id)
            });
            check_lookup("subchannel", id, known, answer);
        }
        _ => {
            let Ok(request) = GetSocketRequest::decode(bytes) else {
                return;
            };
            let id = request.socket_id;
            let answer = now(service.get_socket(Request::new(request))).map(|r| {
                r.into_inner()
                    .socket
                    .and_then(|s| s.r#ref)
                    .map(|r| r.socket_id)
            });
            // Which sockets exist is not tracked here: only the answer's shape.
            check_lookup("socket", id, false, answer);
        }
    }
}
