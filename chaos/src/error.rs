//! The fault suite's errors.

#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    #[error("{op}: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("{op}: {source}")]
    Client {
        op: String,
        #[source]
        source: ferrite_client::ClientError,
    },
    #[error("{0}")]
    Cluster(String),
}
