//! Optional TLS on the protocol listener (rustls, ring provider).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading certificate chain {path}: {message}")]
    Certs { path: String, message: String },
    #[error("reading private key {path}: {message}")]
    Key { path: String, message: String },
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// A server configuration for the certificate chain and key in two PEM
/// files. Each shard runs the TLS state machine of its own connections.
pub fn server_config(
    cert_file: &Path,
    key_file: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Certs {
            path: cert_file.display().to_string(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Certs {
            path: cert_file.display().to_string(),
            message: "no certificate in the file".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| TlsError::Key {
        path: key_file.display().to_string(),
        message: e.to_string(),
    })?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    Ok(Arc::new(config))
}
