//! [`Admin`]: the admin services of grpc-go's `admin.Register` in one
//! call: channelz, reflection for it, and health if wanted.

use tonic::service::Routes;
use tonic::transport::server::Router;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

use super::service::ChannelzService;

/// Adds the admin services to a tonic server, as grpc-go's
/// `admin.Register` does: the channelz service, the reflection service
/// (`grpc.reflection.v1` and `v1alpha`, so that grpcurl and other tools
/// can `list` and `describe` channelz), and, when given a reporter, the
/// standard health service (`grpc.health.v1.Health`).
///
/// A server that already serves reflection for its own services should
/// call [`without_reflection`](Self::without_reflection) and register
/// [`ChannelzService::FILE_DESCRIPTOR_SET`] with its own reflection builder instead: two
/// reflection services cannot share a server.
///
/// ```no_run
/// use tonic::transport::Server;
/// use tonic_hotpath::channelz::{Admin, HealthReporter, ServerEntry};
/// use tonic_hotpath::stats::CombinedLayer;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = CombinedLayer::server().with(ServerEntry::new());
/// let health = HealthReporter::new();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let router = Server::builder()
///     .layer(layer.clone())
///     .add_routes(tonic::service::Routes::default());
/// Admin::new()
///     .with_health(health.clone())
///     .register(router)?
///     .serve_with_incoming(layer.incoming_tcp(listener))
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Admin {
    reflection: bool,
    health: Option<HealthReporter>,
}

/// The reflection service could not be built from the channelz
/// descriptors (a bug in this crate's generated files): tonic-reflection's
/// error, named here because it is what [`Admin::register`] and
/// [`Admin::into_routes`] return, so that a caller can name it without a
/// `tonic-reflection` dependency of its own.
pub type ReflectionError = tonic_reflection::server::Error;

impl Default for Admin {
    fn default() -> Self {
        Self::new()
    }
}

impl Admin {
    /// Channelz and reflection.
    pub fn new() -> Self {
        Self {
            reflection: true,
            health: None,
        }
    }

    /// Also serves `grpc.health.v1.Health`, answering from `reporter`.
    #[must_use]
    pub fn with_health(mut self, reporter: HealthReporter) -> Self {
        self.health = Some(reporter);
        self
    }

    /// Leaves the reflection service out.
    #[must_use]
    pub fn without_reflection(mut self) -> Self {
        self.reflection = false;
        self
    }

    /// Adds the services to `router`.
    ///
    /// # Errors
    ///
    /// Only if the reflection service cannot be built, which the crate's
    /// tests rule out.
    pub fn register<L>(self, router: Router<L>) -> Result<Router<L>, ReflectionError> {
        let health = self.health.is_some();
        let mut router = router.add_service(ChannelzService::server());
        if let Some(reporter) = self.health {
            router = router.add_service(health_server(reporter));
        }
        if self.reflection {
            router = router
                .add_service(reflection(health).build_v1()?)
                .add_service(reflection(health).build_v1alpha()?);
        }
        Ok(router)
    }

    /// The services as [`Routes`], for `Server::builder().add_routes(..)`
    /// or to serve beside other routes.
    ///
    /// # Errors
    ///
    /// As [`register`](Self::register).
    pub fn into_routes(self) -> Result<Routes, ReflectionError> {
        let health = self.health.is_some();
        let mut routes = Routes::new(ChannelzService::server());
        if let Some(reporter) = self.health {
            routes = routes.add_service(health_server(reporter));
        }
        if self.reflection {
            routes = routes
                .add_service(reflection(health).build_v1()?)
                .add_service(reflection(health).build_v1alpha()?);
        }
        Ok(routes)
    }
}

fn health_server(reporter: HealthReporter) -> HealthServer<HealthService> {
    HealthServer::new(HealthService::from_health_reporter(reporter))
}

/// The reflection builder: the channelz descriptors, and health's when
/// health is served, so that tools can `list` and `describe` every
/// service the admin routes serve (reflection lists itself too).
fn reflection(health: bool) -> tonic_reflection::server::Builder<'static> {
    let builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(ChannelzService::FILE_DESCRIPTOR_SET);
    if health {
        builder.register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    } else {
        builder
    }
}
