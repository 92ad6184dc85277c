//! TLS and mTLS: certificates made at test time with rcgen (a CA, a server
//! certificate for `127.0.0.1` / `localhost`, a client certificate signed
//! by the CA), a tonic server with `ServerTlsConfig` on a caller's
//! incoming stream, and client endpoints with `ClientTlsConfig`.
//!
//! tonic wraps each connection the incoming stream yields in TLS and puts
//! both the IO's own `ConnectInfo` and `TlsConnectInfo<ConnectInfo>` in the
//! request extensions; `peer_certs()` reads only
//! `TlsConnectInfo<TcpConnectInfo>`, so it works only when the accepted IO
//! is a plain `TcpStream` (tonic 0.14's `src/request.rs`; `TlsConnectInfo`
//! has no public constructor, so no wrapper of the IO can rebuild it).

use std::net::SocketAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tonic::service::Routes;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, Server, ServerTlsConfig};

use super::{Incoming, ServerLayer, ServerTask, serve};
use crate::{Echo, EchoServer};

/// A PEM certificate and its PEM private key.
#[derive(Debug, Clone)]
pub struct Pem {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
}

impl Pem {
    /// As a tonic identity (certificate + key).
    pub fn identity(&self) -> Identity {
        Identity::from_pem(&self.cert, &self.key)
    }
}

/// A test PKI: a CA and the server and client certificates it signed
/// (ECDSA P-256, made fresh by [`TestCerts::generate`]).
#[derive(Debug, Clone)]
pub struct TestCerts {
    /// The CA's certificate (its key is dropped after signing).
    pub ca: String,
    /// The server's: SANs `localhost` and `127.0.0.1`, EKU serverAuth.
    pub server: Pem,
    /// The client's: CN `test-client`, EKU clientAuth.
    pub client: Pem,
}

impl TestCerts {
    /// Makes a CA and signs a server and a client certificate with it.
    pub fn generate() -> Self {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "tonic-hotpath test CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().expect("CA key");
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);

        let server = leaf(
            &["localhost", "127.0.0.1"],
            "localhost",
            ExtendedKeyUsagePurpose::ServerAuth,
            &issuer,
        );
        let client = leaf(
            &[],
            "test-client",
            ExtendedKeyUsagePurpose::ClientAuth,
            &issuer,
        );
        Self {
            ca: ca.pem(),
            server,
            client,
        }
    }

    /// The CA certificate, for trust.
    pub fn ca_certificate(&self) -> Certificate {
        Certificate::from_pem(&self.ca)
    }

    /// mTLS server: the server identity, client certificates required and
    /// verified against the CA.
    pub fn server_mtls(&self) -> ServerTlsConfig {
        self.server_tls().client_ca_root(self.ca_certificate())
    }

    /// TLS server without client authentication.
    pub fn server_tls(&self) -> ServerTlsConfig {
        ServerTlsConfig::new().identity(self.server.identity())
    }

    /// Client trusting the CA and presenting the client certificate.
    pub fn client_mtls(&self) -> ClientTlsConfig {
        self.client_tls().identity(self.client.identity())
    }

    /// Client trusting the CA, presenting no certificate.
    pub fn client_tls(&self) -> ClientTlsConfig {
        ClientTlsConfig::new().ca_certificate(self.ca_certificate())
    }

    /// A self-signed client identity that no [`TestCerts`] CA signed.
    pub fn untrusted_client() -> Pem {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "untrusted-client");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("self-signed certificate");
        Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// A leaf certificate for `sans` with common name `cn`, signed by `issuer`.
fn leaf(
    sans: &[&str],
    cn: &str,
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'_, KeyPair>,
) -> Pem {
    let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
    let mut params = CertificateParams::new(sans).expect("leaf params");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, issuer).expect("leaf certificate");
    Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}

/// The echo service `echo` behind `layer`, served with `tls` (e.g.
/// [`TestCerts::server_mtls`]) on `incoming`: tonic performs the TLS
/// handshake on each connection `incoming` yields.
pub fn spawn_tls<L, E, I>(layer: L, echo: E, tls: ServerTlsConfig, incoming: I) -> ServerTask
where
    L: ServerLayer<Routes>,
    E: Echo,
    I: Incoming,
{
    let server = Server::builder()
        .tls_config(tls)
        .expect("server TLS config");
    serve(server, layer, Routes::new(EchoServer::new(echo)), incoming)
}

/// An endpoint for `https://127.0.0.1:{port}` with `tls` (e.g.
/// [`TestCerts::client_mtls`]); connect it with `connect()`, or with
/// `connect_with_connector(c)` for a caller's connector (tonic runs TLS
/// over the connector's IO for an `https` URI).
pub fn tls_endpoint(addr: SocketAddr, tls: ClientTlsConfig) -> Endpoint {
    Endpoint::from_shared(format!("https://{addr}"))
        .expect("valid endpoint uri")
        .tls_config(tls)
        .expect("client TLS config")
}
