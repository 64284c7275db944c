//! The transport's errors that are not a socket's `io::Error`: what is
//! wrong with a listener's TLS material, found when the broker starts.

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// PEM text that holds no usable key or certificate.
    #[error("TLS {what}: {reason}")]
    Pem { what: &'static str, reason: String },
    /// What rustls refused while the server's TLS was assembled.
    #[error("TLS {op}: {source}")]
    Tls { op: &'static str, source: rustls::Error },
}
