//! The `grpc.channelz.v1.Channelz` service over the process's registry.

use tonic::{Request, Response, Status};

use super::proto;
use super::proto::channelz_server::{Channelz, ChannelzServer};
use super::registry::registry;

/// The `grpc.channelz.v1.Channelz` service: answers from the process's
/// channelz registry (every [`ServerEntry`](super::ServerEntry) and
/// [`ChannelEntry`](super::ChannelEntry) alive, and their sockets).
///
/// Pagination and errors are grpc-go's: a listing returns the entities
/// with ids at or above `start_*_id`, at most `max_results` of them (50
/// when 0), sorted by id, with `end` set when none is left after them;
/// `GetServer`, `GetChannel`, `GetSubchannel` and `GetSocket` answer
/// `NOT_FOUND` for an id that is not (or no longer) registered;
/// `GetServerSockets` of an unknown server is an empty last page, as in
/// grpc-go.
///
/// ```
/// use tonic_hotpath::channelz::ChannelzService;
///
/// let routes = tonic::service::Routes::new(ChannelzService::server());
/// # let _ = routes;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ChannelzService;

impl ChannelzService {
    /// How many sockets the process's registry tracks at once. Past it,
    /// new connections are not tracked (their calls still count on their
    /// server or channel) and [`untracked_sockets`](Self::untracked_sockets)
    /// counts them.
    pub const MAX_SOCKETS: usize = super::registry::MAX_SOCKETS;

    /// The encoded `FileDescriptorSet` of `grpc/channelz/v1/channelz.proto`
    /// and its imports, for a reflection service of the application's own
    /// (see [`Admin::without_reflection`](super::Admin::without_reflection)).
    ///
    /// ```
    /// use tonic_hotpath::channelz::ChannelzService;
    ///
    /// let reflection = tonic_reflection::server::Builder::configure()
    ///     .register_encoded_file_descriptor_set(ChannelzService::FILE_DESCRIPTOR_SET)
    ///     .build_v1()?;
    /// # let _ = reflection;
    /// # Ok::<(), tonic_reflection::server::Error>(())
    /// ```
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("generated/channelz_descriptor.bin");

    /// The service, ready for `Server::builder().add_service(..)`.
    pub fn server() -> ChannelzServer<Self> {
        ChannelzServer::new(Self)
    }

    /// How many connections were not tracked because
    /// [`MAX_SOCKETS`](Self::MAX_SOCKETS) sockets were registered when they
    /// opened.
    ///
    /// ```
    /// use tonic_hotpath::channelz::ChannelzService;
    ///
    /// assert_eq!(ChannelzService::untracked_sockets(), 0);
    /// ```
    pub fn untracked_sockets() -> u64 {
        registry().untracked_sockets()
    }
}

fn not_found(what: &str, id: i64) -> Status {
    Status::not_found(format!("requested {what} {id} not found"))
}

#[tonic::async_trait]
impl Channelz for ChannelzService {
    async fn get_top_channels(
        &self,
        request: Request<proto::GetTopChannelsRequest>,
    ) -> Result<Response<proto::GetTopChannelsResponse>, Status> {
        let request = request.into_inner();
        let page = registry().top_channels(request.start_channel_id, request.max_results);
        Ok(Response::new(proto::GetTopChannelsResponse {
            channel: page.entries,
            end: page.end,
        }))
    }

    async fn get_servers(
        &self,
        request: Request<proto::GetServersRequest>,
    ) -> Result<Response<proto::GetServersResponse>, Status> {
        let request = request.into_inner();
        let page = registry().servers(request.start_server_id, request.max_results);
        Ok(Response::new(proto::GetServersResponse {
            server: page.entries,
            end: page.end,
        }))
    }

    async fn get_server(
        &self,
        request: Request<proto::GetServerRequest>,
    ) -> Result<Response<proto::GetServerResponse>, Status> {
        let id = request.into_inner().server_id;
        let server = registry()
            .server(id)
            .ok_or_else(|| not_found("server", id))?;
        Ok(Response::new(proto::GetServerResponse {
            server: Some(server),
        }))
    }

    async fn get_server_sockets(
        &self,
        request: Request<proto::GetServerSocketsRequest>,
    ) -> Result<Response<proto::GetServerSocketsResponse>, Status> {
        let request = request.into_inner();
        let page = registry().server_sockets(
            request.server_id,
            request.start_socket_id,
            request.max_results,
        );
        Ok(Response::new(match page {
            Some(page) => proto::GetServerSocketsResponse {
                socket_ref: page.entries,
                end: page.end,
            },
            None => proto::GetServerSocketsResponse {
                socket_ref: Vec::new(),
                end: true,
            },
        }))
    }

    async fn get_channel(
        &self,
        request: Request<proto::GetChannelRequest>,
    ) -> Result<Response<proto::GetChannelResponse>, Status> {
        let id = request.into_inner().channel_id;
        let channel = registry()
            .channel(id)
            .ok_or_else(|| not_found("channel", id))?;
        Ok(Response::new(proto::GetChannelResponse {
            channel: Some(channel),
        }))
    }

    async fn get_subchannel(
        &self,
        request: Request<proto::GetSubchannelRequest>,
    ) -> Result<Response<proto::GetSubchannelResponse>, Status> {
        let id = request.into_inner().subchannel_id;
        let subchannel = registry()
            .subchannel(id)
            .ok_or_else(|| not_found("sub channel", id))?;
        Ok(Response::new(proto::GetSubchannelResponse {
            subchannel: Some(subchannel),
        }))
    }

    async fn get_socket(
        &self,
        request: Request<proto::GetSocketRequest>,
    ) -> Result<Response<proto::GetSocketResponse>, Status> {
        let id = request.into_inner().socket_id;
        let socket = registry()
            .socket(id)
            .ok_or_else(|| not_found("socket", id))?;
        Ok(Response::new(proto::GetSocketResponse {
            socket: Some(socket),
        }))
    }
}
