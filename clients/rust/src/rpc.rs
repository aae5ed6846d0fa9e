//! The channel, the five service clients, deadlines and the bearer token:
//! shared by the Client and everything it hands out. Every RPC goes through
//! [`Rpc::unary`] (or the streaming helpers), which turn a gRPC status into
//! an [`Error`].

use std::future::Future;
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::error::{Error, Result};
use crate::options::{Options, MAX_MESSAGE_BYTES};
use crate::pb;
use crate::retry::UnavailableRetry;

/// Adds `authorization: Bearer <token>` when a token is set.
#[derive(Clone)]
pub(crate) struct Auth(Option<MetadataValue<Ascii>>);

impl Interceptor for Auth {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

type Svc = InterceptedService<Channel, Auth>;

#[derive(Clone)]
pub(crate) struct Rpc {
    channel: Channel,
    auth: Auth,
    pub deadline: Option<Duration>,
    pub stream_deadline: Option<Duration>,
    pub retry: Option<UnavailableRetry>,
    /// The KV.Watch streams the client's watchers share (one set per connection).
    pub watches: std::sync::Arc<crate::watch_stream::WatchMux>,
}

impl Rpc {
    pub fn new(opts: &Options) -> Result<Rpc> {
        let scheme = if opts.tls.is_some() { "https" } else { "http" };
        let mut ep = Endpoint::from_shared(format!("{scheme}://{}", opts.address))
            .map_err(|e| Error::Transport(format!("bad address {:?}: {e}", opts.address)))?
            .tcp_nodelay(true);
        if let Some(tls) = &opts.tls {
            let mut cfg = ClientTlsConfig::new();
            match &tls.ca_file {
                Some(path) => {
                    let pem = std::fs::read(path)
                        .map_err(|e| Error::Transport(format!("cannot read {}: {e}", path.display())))?;
                    cfg = cfg.ca_certificate(Certificate::from_pem(pem));
                }
                None => cfg = cfg.with_native_roots(),
            }
            if let Some(d) = &tls.domain {
                cfg = cfg.domain_name(d.clone());
            }
            ep = ep.tls_config(cfg).map_err(|e| Error::Transport(format!("TLS: {e}")))?;
        }
        let auth = match &opts.token {
            Some(t) if !t.is_empty() => Some(
                format!("Bearer {t}").parse().map_err(|_| Error::invalid("connect", "token: not valid in a header"))?,
            ),
            _ => None,
        };
        Ok(Rpc {
            channel: ep.connect_lazy(),
            auth: Auth(auth),
            deadline: opts.deadline,
            stream_deadline: opts.stream_deadline,
            retry: opts.retry_unavailable,
            watches: Default::default(),
        })
    }

    fn svc(&self) -> Svc {
        InterceptedService::new(self.channel.clone(), self.auth.clone())
    }

    pub fn kv(&self) -> pb::kv_client::KvClient<Svc> {
        pb::kv_client::KvClient::new(self.svc())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    pub fn subvolumes(&self) -> pb::subvolumes_client::SubvolumesClient<Svc> {
        pb::subvolumes_client::SubvolumesClient::new(self.svc())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    pub fn files(&self) -> pb::files_client::FilesClient<Svc> {
        pb::files_client::FilesClient::new(self.svc())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    pub fn admin(&self) -> pb::admin_client::AdminClient<Svc> {
        pb::admin_client::AdminClient::new(self.svc())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    pub fn lease(&self) -> pb::lease_client::LeaseClient<Svc> {
        pb::lease_client::LeaseClient::new(self.svc())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// A copy whose calls, unary and streaming, have the deadline `d`
    /// (the per-call `timeout` of Client, Subvolume, Files, Leases and the
    /// request builders).
    pub fn with_timeout(&self, d: Duration) -> Rpc {
        Rpc { deadline: Some(d), stream_deadline: Some(d), ..self.clone() }
    }

    /// A request with the unary deadline (or `timeout`) in its grpc-timeout.
    pub fn request<T>(&self, msg: T, timeout: Option<Duration>) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        if let Some(d) = timeout.or(self.deadline) {
            req.set_timeout(d);
        }
        req
    }

    /// A request with exactly this timeout (None = no deadline).
    pub fn request_exact<T>(&self, msg: T, timeout: Option<Duration>) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        if let Some(d) = timeout {
            req.set_timeout(d);
        }
        req
    }

    /// A request with the streaming deadline.
    pub fn stream_request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        if let Some(d) = self.stream_deadline {
            req.set_timeout(d);
        }
        req
    }

    /// One call of an idempotent read (crate::retry::RETRIED_METHODS): with
    /// the client's retry policy, an UNAVAILABLE answer is retried after a
    /// random wait, each attempt getting what is left of the deadline
    /// (`total`: the call's whole deadline, None = none) as its own. `call`
    /// makes the attempt's call with the timeout it is given.
    pub async fn idempotent<R, F, Fut>(&self, op: &'static str, total: Option<Duration>, mut call: F) -> Result<R>
    where
        F: FnMut(Option<Duration>) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<R>, tonic::Status>>,
    {
        let Some(policy) = self.retry else {
            return Rpc::unary(op, call(total)).await;
        };
        let end = total.map(|d| std::time::Instant::now() + d);
        let left = || end.map(|e| e.saturating_duration_since(std::time::Instant::now()));
        let mut attempt = 1;
        loop {
            match call(left()).await {
                Err(s) if s.code() == tonic::Code::Unavailable && attempt < policy.max_attempts => {
                    let wait = policy.bound(attempt).mul_f64(crate::txn::jitter());
                    if left().is_some_and(|l| l <= wait) {
                        return Err(Error::from_status(&s, op));
                    }
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                r => return r.map(|r| r.into_inner()).map_err(|s| Error::from_status(&s, op)),
            }
        }
    }

    /// Awaits one call; a status becomes the matching Error named after `op`.
    pub async fn unary<R, F>(op: &'static str, fut: F) -> Result<R>
    where
        F: Future<Output = std::result::Result<tonic::Response<R>, tonic::Status>>,
    {
        fut.await.map(|r| r.into_inner()).map_err(|s| Error::from_status(&s, op))
    }
}
