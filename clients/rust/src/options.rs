//! How to reach cowkvd: address, TLS, bearer token, default deadlines.

use std::path::PathBuf;
use std::time::Duration;

/// cowkvd's default listen address.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:7420";
/// Deadline of a unary call unless set (gRPC sets none by itself).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);
/// Deadline of a streaming file read or write unless set.
pub const DEFAULT_STREAM_DEADLINE: Duration = Duration::from_secs(600);
/// The server's message limit, both directions (docs/api.md, "Limits").
pub const MAX_MESSAGE_BYTES: usize = 20 << 20;

/// TLS settings.
#[derive(Debug, Clone, Default)]
pub struct Tls {
    /// PEM file of the certificates to trust; None = the system's roots.
    pub ca_file: Option<PathBuf>,
    /// The server name to expect when it differs from the address's host.
    pub domain: Option<String>,
}

/// Connection options for [`crate::Client::connect`].
///
/// ```no_run
/// # use std::time::Duration;
/// let opts = cowkv::Options::new("127.0.0.1:7420")
///     .token("s3cret")                         // cowkvd --auth-token-file
///     .deadline(Some(Duration::from_secs(10)));
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// "host:port" of cowkvd.
    pub address: String,
    /// TLS, or None for plaintext.
    pub tls: Option<Tls>,
    /// Sent as `authorization: Bearer <token>` on every call.
    pub token: Option<String>,
    /// Deadline of each unary call; None = none.
    pub deadline: Option<Duration>,
    /// Deadline of each streaming file read or write; None = none.
    pub stream_deadline: Option<Duration>,
    /// Retry the idempotent reads that fail UNAVAILABLE with this policy
    /// (None = off, the default; docs/api.md "Retrying UNAVAILABLE").
    pub retry_unavailable: Option<crate::UnavailableRetry>,
}

impl Default for Options {
    fn default() -> Self {
        Options::new(DEFAULT_ADDRESS)
    }
}

impl Options {
    /// Every default and this address.
    pub fn new(address: impl Into<String>) -> Self {
        Options {
            address: address.into(),
            tls: None,
            token: None,
            deadline: Some(DEFAULT_DEADLINE),
            stream_deadline: Some(DEFAULT_STREAM_DEADLINE),
            retry_unavailable: None,
        }
    }

    /// Sends this bearer token (cowkvd --auth-token-file).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Uses TLS with these settings.
    pub fn tls(mut self, tls: Tls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Deadline of each unary call (default 30 s; None = none).
    pub fn deadline(mut self, d: Option<Duration>) -> Self {
        self.deadline = d;
        self
    }

    /// Retry the idempotent reads ([`crate::RETRIED_METHODS`]) that fail
    /// UNAVAILABLE with this policy (off by default): the client's own loop,
    /// tonic having no service-config retries.
    pub fn retry_unavailable(mut self, policy: crate::UnavailableRetry) -> Self {
        self.retry_unavailable = Some(policy);
        self
    }

    /// Deadline of each streaming file read or write (default 10 min).
    pub fn stream_deadline(mut self, d: Option<Duration>) -> Self {
        self.stream_deadline = d;
        self
    }
}
