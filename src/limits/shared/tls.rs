//! TLS to Redis (`rediss://`, feature `limits-redis-tls`): the settings of
//! [`RedisBackendBuilder`](super::RedisBackendBuilder) (a CA, a client
//! certificate), checked before connecting, and handed to redis-rs's own
//! rustls support.

use std::fmt;

use redis::{ClientTlsConfig, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::error::{RedisBackendError, RedisBackendErrorKind};

/// The TLS settings given in code (none: the system's roots, no client
/// certificate).
#[derive(Clone, Default)]
pub(super) struct TlsSettings {
    /// The CA certificates to trust instead of the system's (PEM).
    pub(super) ca: Option<Vec<u8>>,
    /// A client certificate (chain) and its private key (PEM).
    pub(super) client: Option<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field(
                "ca",
                &if self.ca.is_some() {
                    "given"
                } else {
                    "the system's roots"
                },
            )
            .field(
                "client_certificate",
                &self.client.as_ref().map(|_| "given (key redacted)"),
            )
            .finish()
    }
}

impl TlsSettings {
    /// Whether anything was given.
    pub(super) fn is_set(&self) -> bool {
        self.ca.is_some() || self.client.is_some()
    }

    /// The certificates for redis-rs, after checking that each PEM holds
    /// what it should (a clear error now rather than a failed handshake
    /// later).
    pub(super) fn certificates(&self) -> Result<TlsCertificates, RedisBackendError> {
        if let Some(ca) = &self.ca {
            certificates_in(ca, "the CA certificate (`tls_ca_certificate`)")?;
        }
        if let Some((cert, key)) = &self.client {
            certificates_in(cert, "the client certificate (`tls_client_certificate`)")?;
            PrivateKeyDer::from_pem_slice(key).map_err(|error| {
                tls_error(format!(
                    "the client key (`tls_client_certificate`) is not a PEM private key \
                     (PKCS#8, PKCS#1 or SEC1): {error}"
                ))
            })?;
        }
        Ok(TlsCertificates {
            client_tls: self.client.as_ref().map(|(cert, key)| ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
            root_cert: self.ca.clone(),
        })
    }
}

/// Checks that `pem` holds at least one certificate, and only valid ones.
fn certificates_in(pem: &[u8], what: &str) -> Result<(), RedisBackendError> {
    let mut count = 0;
    for certificate in CertificateDer::pem_slice_iter(pem) {
        certificate.map_err(|error| tls_error(format!("{what} is not valid PEM: {error}")))?;
        count += 1;
    }
    if count == 0 {
        return Err(tls_error(format!(
            "{what} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)"
        )));
    }
    Ok(())
}

fn tls_error(message: String) -> RedisBackendError {
    RedisBackendError::new(RedisBackendErrorKind::Tls, message)
}

/// Makes rustls's ring provider the process's default where the
/// application has installed none (redis-rs builds its TLS settings with
/// the process's default provider). An application that installed its own
/// keeps it.
pub(super) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have installed one meanwhile: either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_that_holds_no_certificate_or_key_is_a_tls_error_naming_it() {
        let settings = TlsSettings {
            ca: Some(b"not a certificate".to_vec()),
            client: None,
        };
        let error = settings.certificates().unwrap_err();
        assert_eq!(error.kind(), RedisBackendErrorKind::Tls);
        assert!(error.to_string().contains("the CA certificate"), "{error}");

        let settings = TlsSettings {
            ca: None,
            client: Some((Vec::new(), b"-----BEGIN PRIVATE KEY-----\n".to_vec())),
        };
        let error = settings.certificates().unwrap_err();
        assert!(
            error.to_string().contains("the client certificate"),
            "{error}"
        );
        assert!(format!("{settings:?}").contains("redacted"));
    }
}
