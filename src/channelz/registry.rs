//! The process's channelz registry: every live server, channel,
//! subchannel and socket, by id.
//!
//! Ids come from one process-wide counter: unique, never reused, and
//! increasing in creation order (pagination walks them in that order).
//! The registry's lock is taken when an entity is created or removed (a
//! connection opening or closing) and by queries, never by an RPC: RPCs
//! count on the entities themselves.
//!
//! Removal follows grpc-go's `internal/channelz`: a socket leaves when its
//! connection closes; a server, channel or subchannel leaves once it is
//! closed (its handler dropped) and has no child left; a subchannel
//! leaving takes its channel with it when that channel is closed too.
//! grpc-go also keeps a closed child alive while a parent's trace event
//! refers to it; this registry logs no trace events, so nothing is kept
//! for that.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::entity::CallEntity;
use super::proto;
use super::socket::SocketEntity;

/// How many sockets the registry tracks at once
/// ([`ChannelzService::MAX_SOCKETS`](super::ChannelzService::MAX_SOCKETS)).
pub(crate) const MAX_SOCKETS: usize = 100_000;

/// grpc-go's page size when a request asks for `max_results` 0.
pub(crate) const DEFAULT_PAGE: usize = 50;

/// Whose child a socket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SocketParent {
    /// A connection a server accepted.
    Server(i64),
    /// A server's listening socket.
    Listener(i64),
    /// A connection a subchannel dialled.
    Subchannel(i64),
}

#[derive(Debug)]
struct ServerNode {
    entity: Arc<CallEntity>,
    sockets: BTreeSet<i64>,
    listeners: BTreeSet<i64>,
    closed: bool,
}

#[derive(Debug)]
struct ChannelNode {
    entity: Arc<CallEntity>,
    subchannels: BTreeSet<i64>,
    closed: bool,
}

#[derive(Debug)]
struct SubchannelNode {
    entity: Arc<CallEntity>,
    channel: i64,
    sockets: BTreeSet<i64>,
    closed: bool,
}

#[derive(Debug)]
struct SocketNode {
    entity: Arc<SocketEntity>,
    parent: SocketParent,
}

#[derive(Debug, Default)]
struct Tables {
    servers: BTreeMap<i64, ServerNode>,
    channels: BTreeMap<i64, ChannelNode>,
    subchannels: BTreeMap<i64, SubchannelNode>,
    sockets: BTreeMap<i64, SocketNode>,
}

/// The registry.
#[derive(Debug)]
pub(crate) struct Registry {
    max_sockets: usize,
    next_id: AtomicI64,
    untracked_sockets: AtomicU64,
    tables: RwLock<Tables>,
}

/// The process's registry.
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::new)
}

/// One page of a listing: the entries and whether it is the last.
pub(crate) struct Page<T> {
    pub(crate) entries: Vec<T>,
    pub(crate) end: bool,
}

/// Up to `max` (0: [`DEFAULT_PAGE`]) entries of `ids` from `start` on,
/// each mapped by `view`; `end` when no id after them is left (grpc-go's
/// rule: a page exactly full with nothing after it is the end).
fn page<'a, T>(
    ids: impl Iterator<Item = &'a i64>,
    start: i64,
    max: i64,
    mut view: impl FnMut(i64) -> Option<T>,
) -> Page<T> {
    let max = usize::try_from(max)
        .ok()
        .filter(|max| *max > 0)
        .unwrap_or(DEFAULT_PAGE);
    let mut entries = Vec::new();
    for &id in ids.filter(|id| **id >= start) {
        if entries.len() == max {
            return Page {
                entries,
                end: false,
            };
        }
        entries.extend(view(id));
    }
    Page { entries, end: true }
}

impl Registry {
    /// An empty registry: the process has one ([`registry`]); unit tests
    /// make their own.
    pub(crate) fn new() -> Self {
        Self::with_max_sockets(MAX_SOCKETS)
    }

    fn with_max_sockets(max_sockets: usize) -> Self {
        Self {
            max_sockets,
            next_id: AtomicI64::new(1),
            untracked_sockets: AtomicU64::new(0),
            tables: RwLock::new(Tables::default()),
        }
    }

    fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn read(&self) -> RwLockReadGuard<'_, Tables> {
        self.tables.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Tables> {
        self.tables.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn untracked_sockets(&self) -> u64 {
        self.untracked_sockets.load(Ordering::Relaxed)
    }

    /// Registers a server.
    pub(crate) fn add_server(&self, name: String) -> Arc<CallEntity> {
        let entity = Arc::new(CallEntity::new(self.next_id(), name));
        self.write().servers.insert(
            entity.id,
            ServerNode {
                entity: entity.clone(),
                sockets: BTreeSet::new(),
                listeners: BTreeSet::new(),
                closed: false,
            },
        );
        entity
    }

    /// Registers a top channel with its one subchannel, both for `target`.
    pub(crate) fn add_channel(&self, target: &str) -> (Arc<CallEntity>, Arc<CallEntity>) {
        let (channel_id, subchannel_id) = (self.next_id(), self.next_id());
        let (channel, subchannel) = CallEntity::channel(channel_id, subchannel_id, target);
        let (channel, subchannel) = (Arc::new(channel), Arc::new(subchannel));
        let mut tables = self.write();
        tables.subchannels.insert(
            subchannel.id,
            SubchannelNode {
                entity: subchannel.clone(),
                channel: channel.id,
                sockets: BTreeSet::new(),
                closed: false,
            },
        );
        tables.channels.insert(
            channel.id,
            ChannelNode {
                entity: channel.clone(),
                subchannels: BTreeSet::from([subchannel.id]),
                closed: false,
            },
        );
        (channel, subchannel)
    }

    /// Registers a socket under `parent`; `None` when the registry is
    /// full or the parent is gone (the connection is then not tracked).
    pub(crate) fn add_socket(
        &self,
        parent: SocketParent,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) -> Option<Arc<SocketEntity>> {
        let mut tables = self.write();
        if tables.sockets.len() >= self.max_sockets {
            drop(tables);
            self.untracked_sockets.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let id = self.next_id();
        let children = match parent {
            SocketParent::Server(server) => &mut tables.servers.get_mut(&server)?.sockets,
            SocketParent::Listener(server) => &mut tables.servers.get_mut(&server)?.listeners,
            SocketParent::Subchannel(sub) => &mut tables.subchannels.get_mut(&sub)?.sockets,
        };
        children.insert(id);
        let entity = Arc::new(SocketEntity::new(id, local, remote));
        tables.sockets.insert(
            id,
            SocketNode {
                entity: entity.clone(),
                parent,
            },
        );
        Some(entity)
    }

    /// A socket's connection closed: it leaves, and a closed parent with no
    /// child left leaves with it.
    pub(crate) fn remove_socket(&self, id: i64) {
        let mut tables = self.write();
        let Some(node) = tables.sockets.remove(&id) else {
            return;
        };
        match node.parent {
            SocketParent::Server(server) | SocketParent::Listener(server) => {
                if let Some(parent) = tables.servers.get_mut(&server) {
                    parent.sockets.remove(&id);
                    parent.listeners.remove(&id);
                }
                tables.remove_server_if_done(server);
            }
            SocketParent::Subchannel(sub) => {
                if let Some(parent) = tables.subchannels.get_mut(&sub) {
                    parent.sockets.remove(&id);
                }
                tables.remove_subchannel_if_done(sub);
            }
        }
    }

    /// A server's handler was dropped.
    pub(crate) fn close_server(&self, id: i64) {
        let mut tables = self.write();
        if let Some(node) = tables.servers.get_mut(&id) {
            node.closed = true;
        }
        tables.remove_server_if_done(id);
    }

    /// A channel's handler was dropped: it and its subchannel are closed.
    pub(crate) fn close_channel(&self, id: i64) {
        let mut tables = self.write();
        let Some(node) = tables.channels.get_mut(&id) else {
            return;
        };
        node.closed = true;
        let subchannels: Vec<i64> = node.subchannels.iter().copied().collect();
        for sub in subchannels {
            if let Some(node) = tables.subchannels.get_mut(&sub) {
                node.closed = true;
            }
            tables.remove_subchannel_if_done(sub);
        }
        tables.remove_channel_if_done(id);
    }

    pub(crate) fn servers(&self, start: i64, max: i64) -> Page<proto::Server> {
        let tables = self.read();
        page(tables.servers.keys(), start, max, |id| tables.server(id))
    }

    pub(crate) fn server(&self, id: i64) -> Option<proto::Server> {
        self.read().server(id)
    }

    /// The server's sockets (not its listeners), or `None` for an unknown
    /// server.
    pub(crate) fn server_sockets(
        &self,
        server: i64,
        start: i64,
        max: i64,
    ) -> Option<Page<proto::SocketRef>> {
        let tables = self.read();
        let node = tables.servers.get(&server)?;
        Some(page(node.sockets.iter(), start, max, |id| {
            tables.sockets.get(&id).map(|s| s.entity.reference())
        }))
    }

    pub(crate) fn top_channels(&self, start: i64, max: i64) -> Page<proto::Channel> {
        let tables = self.read();
        page(tables.channels.keys(), start, max, |id| tables.channel(id))
    }

    pub(crate) fn channel(&self, id: i64) -> Option<proto::Channel> {
        self.read().channel(id)
    }

    pub(crate) fn subchannel(&self, id: i64) -> Option<proto::Subchannel> {
        let tables = self.read();
        let node = tables.subchannels.get(&id)?;
        Some(proto::Subchannel {
            r#ref: Some(proto::SubchannelRef {
                subchannel_id: id,
                name: String::new(),
            }),
            data: Some(node.entity.channel_data()),
            channel_ref: Vec::new(),
            subchannel_ref: Vec::new(),
            socket_ref: tables.socket_refs(&node.sockets),
        })
    }

    pub(crate) fn socket(&self, id: i64) -> Option<proto::Socket> {
        let entity = self.read().sockets.get(&id)?.entity.clone();
        Some(entity.view())
    }

    /// How many entities of each kind are registered: (servers, channels,
    /// subchannels, sockets).
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize, usize, usize) {
        let tables = self.read();
        (
            tables.servers.len(),
            tables.channels.len(),
            tables.subchannels.len(),
            tables.sockets.len(),
        )
    }
}

impl Tables {
    fn socket_refs(&self, ids: &BTreeSet<i64>) -> Vec<proto::SocketRef> {
        ids.iter()
            .filter_map(|id| self.sockets.get(id))
            .map(|node| node.entity.reference())
            .collect()
    }

    fn server(&self, id: i64) -> Option<proto::Server> {
        let node = self.servers.get(&id)?;
        Some(proto::Server {
            r#ref: Some(proto::ServerRef {
                server_id: id,
                name: node.entity.name.clone(),
            }),
            data: Some(node.entity.server_data()),
            listen_socket: self.socket_refs(&node.listeners),
        })
    }

    fn channel(&self, id: i64) -> Option<proto::Channel> {
        let node = self.channels.get(&id)?;
        Some(proto::Channel {
            r#ref: Some(proto::ChannelRef {
                channel_id: id,
                name: node.entity.name.clone(),
            }),
            data: Some(node.entity.channel_data()),
            channel_ref: Vec::new(),
            subchannel_ref: node
                .subchannels
                .iter()
                .filter_map(|sub| self.subchannels.get(sub))
                .map(|sub| proto::SubchannelRef {
                    subchannel_id: sub.entity.id,
                    name: String::new(),
                })
                .collect(),
            socket_ref: Vec::new(),
        })
    }

    fn remove_server_if_done(&mut self, id: i64) {
        if self
            .servers
            .get(&id)
            .is_some_and(|node| node.closed && node.sockets.is_empty() && node.listeners.is_empty())
        {
            self.servers.remove(&id);
        }
    }

    fn remove_subchannel_if_done(&mut self, id: i64) {
        let Some(node) = self.subchannels.get(&id) else {
            return;
        };
        if !(node.closed && node.sockets.is_empty()) {
            return;
        }
        let channel = node.channel;
        self.subchannels.remove(&id);
        if let Some(parent) = self.channels.get_mut(&channel) {
            parent.subchannels.remove(&id);
        }
        self.remove_channel_if_done(channel);
    }

    fn remove_channel_if_done(&mut self, id: i64) {
        if self
            .channels
            .get(&id)
            .is_some_and(|node| node.closed && node.subchannels.is_empty())
        {
            self.channels.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> Option<SocketAddr> {
        Some(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    #[test]
    fn past_the_cap_sockets_are_counted_not_tracked() {
        let registry = Registry::with_max_sockets(2);
        let server = registry.add_server(String::new());
        let parent = SocketParent::Server(server.id);
        let first = registry.add_socket(parent, addr(1), addr(2)).unwrap();
        let _second = registry.add_socket(parent, addr(1), addr(3)).unwrap();
        assert!(registry.add_socket(parent, addr(1), addr(4)).is_none());
        assert_eq!(registry.untracked_sockets(), 1);
        registry.remove_socket(first.id);
        assert!(registry.add_socket(parent, addr(1), addr(5)).is_some());
        assert_eq!(registry.counts(), (1, 0, 0, 2));
    }

    #[test]
    fn a_closed_channel_stays_while_its_subchannel_has_a_socket() {
        let registry = Registry::new();
        let (channel, subchannel) = registry.add_channel("dns:///x");
        let socket = registry
            .add_socket(SocketParent::Subchannel(subchannel.id), addr(1), addr(2))
            .unwrap();
        registry.close_channel(channel.id);
        assert_eq!(registry.counts(), (0, 1, 1, 1), "kept for its socket");
        assert!(registry.subchannel(subchannel.id).is_some());
        registry.remove_socket(socket.id);
        assert_eq!(registry.counts(), (0, 0, 0, 0), "all gone with the socket");
        // Removing again, or closing again, is a no-op.
        registry.remove_socket(socket.id);
        registry.close_channel(channel.id);
    }

    #[test]
    fn a_closed_server_stays_while_it_has_sockets_and_listeners() {
        let registry = Registry::new();
        let server = registry.add_server("s".to_owned());
        let listener = registry
            .add_socket(SocketParent::Listener(server.id), addr(80), None)
            .unwrap();
        let conn = registry
            .add_socket(SocketParent::Server(server.id), addr(80), addr(9))
            .unwrap();
        // Listening sockets are not among the server's sockets.
        let page = registry.server_sockets(server.id, 0, 0).unwrap();
        assert_eq!(page.entries.len(), 1);
        assert_eq!(page.entries[0].socket_id, conn.id);
        assert_eq!(page.entries[0].name, "", "grpc-go names no connection");
        let described = registry.server(server.id).unwrap();
        assert_eq!(described.listen_socket[0].name, "127.0.0.1:80");
        registry.close_server(server.id);
        registry.remove_socket(conn.id);
        assert!(registry.server(server.id).is_some(), "its listener is open");
        registry.remove_socket(listener.id);
        assert!(registry.server(server.id).is_none());
        assert_eq!(registry.counts(), (0, 0, 0, 0));
    }

    #[test]
    fn a_socket_of_a_gone_parent_is_not_tracked() {
        let registry = Registry::new();
        assert!(
            registry
                .add_socket(SocketParent::Server(42), addr(1), addr(2))
                .is_none()
        );
        assert_eq!(registry.counts(), (0, 0, 0, 0));
    }
}
