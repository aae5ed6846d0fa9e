//! Leases (service Lease, etcd's lease API) of one subvolume.
//!
//! ```no_run
//! # async fn f(sv: cowkv::Subvolume) -> cowkv::Result<()> {
//! let leases = sv.leases();
//! let g = leases.grant(10, 0).await?;                 // TTL 10 s; id 0 = the server picks
//! sv.put_with_lease("svc/a", "1", g.id, cowkv::Durability::Default).await?;
//! let keeper = leases.keep_alive(g.id);               // renews every TTL/3 in a task
//! let info = leases.time_to_live(g.id, true).await?;  // info.keys = [svc/a]
//! keeper.stop().await?;                               // or drop it
//! leases.revoke(g.id).await?;                         // deletes svc/a in one revision
//! # Ok(()) }
//! ```
//!
//! A key put with a lease is deleted when the lease is revoked or expires; a
//! put without one detaches the key (etcd). An unknown lease (or one whose
//! deadline passed) is [`Error::NotFound`] (ErrorInfo reason LEASE_NOT_FOUND).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tonic::Code;

use crate::error::{Error, ErrorInfo, Result};
use crate::kv::Durability;
use crate::pb;
use crate::rpc::Rpc;
use crate::validate;

/// A lease id (int64; a server-picked one is a random positive int64).
pub type LeaseId = i64;

/// A granted lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The lease's id (the one asked for, or the server's pick).
    pub id: LeaseId,
    /// The TTL granted, in seconds.
    pub ttl: i64,
}

/// A lease's TTLs and keys ([`Leases::time_to_live`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    pub id: LeaseId,
    /// Seconds left, rounded up; 0 once the deadline passed until expiry runs.
    pub ttl: i64,
    /// The TTL it was granted with, in seconds.
    pub granted_ttl: i64,
    /// The attached keys, sorted (only when asked for).
    pub keys: Vec<Bytes>,
}

/// The shortest pause between two renewals of [`Leases::keep_alive`].
const MIN_KEEP_ALIVE_INTERVAL: Duration = Duration::from_millis(100);

fn lease_gone(operation: &'static str, id: LeaseId) -> Error {
    Error::NotFound(ErrorInfo {
        code: Some(Code::NotFound),
        message: format!("lease {id} not found (the KeepAlive stream answered ttl 0)"),
        operation,
        ..Default::default()
    })
}

/// The leases of one subvolume ([`crate::Subvolume::leases`]). Cheap to clone.
#[derive(Clone)]
pub struct Leases {
    rpc: Rpc,
    subvolume: String,
}

impl std::fmt::Debug for Leases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Leases({:?})", self.subvolume)
    }
}

impl Leases {
    /// A copy of this handle whose calls have the deadline `d` (the
    /// grpc-timeout the server enforces and the client's timer, which
    /// ends the call with [`crate::Error::DeadlineExceeded`]), unary and
    /// streaming alike, instead of the client's defaults
    /// ([`crate::Options::deadline`], [`crate::Options::stream_deadline`]):
    /// `sv.timeout(Duration::from_millis(200)).get("k").await`. No call is made.
    pub fn timeout(&self, d: std::time::Duration) -> Self {
        let mut c = self.clone();
        c.rpc = c.rpc.with_timeout(d);
        c
    }

    pub(crate) fn new(rpc: Rpc, subvolume: String) -> Leases {
        Leases { rpc, subvolume }
    }

    /// A new lease of `ttl` seconds (1..9,000,000,000) with this `id` (>= 1;
    /// 0 = the server picks). [`Error::AlreadyExists`] for an id in use.
    pub async fn grant(&self, ttl: i64, id: LeaseId) -> Result<LeaseGrant> {
        self.grant_with(ttl, id, Durability::Default).await
    }

    /// [`Leases::grant`] with a durability.
    pub async fn grant_with(&self, ttl: i64, id: LeaseId, durability: Durability) -> Result<LeaseGrant> {
        validate::lease_ttl("lease-grant", ttl)?;
        validate::lease_id("lease-grant", id)?;
        let req = pb::LeaseGrantRequest { subvolume: self.subvolume.clone(), ttl, id, durability: durability.proto() };
        let m = Rpc::unary("lease-grant", self.rpc.lease().grant(self.rpc.request(req, None))).await?;
        Ok(LeaseGrant { id: m.id, ttl: m.ttl })
    }

    /// Deletes the lease and every key attached to it, in one revision
    /// (returned; the current revision if no key was left).
    /// [`Error::NotFound`] if there is no such lease.
    pub async fn revoke(&self, id: LeaseId) -> Result<u64> {
        self.revoke_with(id, Durability::Default).await
    }

    /// [`Leases::revoke`] with a durability.
    pub async fn revoke_with(&self, id: LeaseId, durability: Durability) -> Result<u64> {
        let req = pb::LeaseRevokeRequest { subvolume: self.subvolume.clone(), id, durability: durability.proto() };
        Ok(Rpc::unary("lease-revoke", self.rpc.lease().revoke(self.rpc.request(req, None))).await?.revision)
    }

    /// Renews the lease once, on a KeepAlive stream of its own (under the
    /// unary deadline); returns the restarted TTL in seconds.
    /// [`Error::NotFound`] if the lease is gone.
    pub async fn keep_alive_once(&self, id: LeaseId) -> Result<i64> {
        let op = "lease-keep-alive";
        let req = pb::LeaseKeepAliveRequest { subvolume: self.subvolume.clone(), id };
        let reqs = futures_util::stream::iter([req]);
        let mut stream = Rpc::unary(op, self.rpc.lease().keep_alive(self.rpc.request(reqs, None))).await?;
        let m = stream.message().await.map_err(|s| Error::from_status(&s, op))?;
        match m {
            Some(m) if m.ttl > 0 => Ok(m.ttl),
            Some(_) => Err(lease_gone(op, id)),
            None => Err(Error::Internal(ErrorInfo {
                code: None,
                message: "the KeepAlive stream ended without an answer".into(),
                operation: op,
                ..Default::default()
            })),
        }
    }

    /// Keeps the lease alive in a background task, on one KeepAlive stream
    /// (no deadline): it renews now and then every TTL/3 after each answer,
    /// until [`KeepAlive::stop`] or the handle is dropped. Needs a Tokio
    /// runtime.
    pub fn keep_alive(&self, id: LeaseId) -> KeepAlive {
        let ttl = Arc::new(AtomicI64::new(0));
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = tokio::spawn(run_keep_alive(self.rpc.clone(), self.subvolume.clone(), id, ttl.clone(), stop_rx));
        KeepAlive { id, ttl, stop: Some(stop_tx), task: Some(task) }
    }

    /// The lease's remaining and granted TTL, and with `keys` its attached
    /// keys. [`Error::NotFound`] if there is no such lease.
    pub async fn time_to_live(&self, id: LeaseId, keys: bool) -> Result<LeaseInfo> {
        let req = pb::LeaseTimeToLiveRequest { subvolume: self.subvolume.clone(), id, keys };
        let m = self
            .rpc
            .idempotent("lease-time-to-live", self.rpc.deadline, |t| {
                let mut c = self.rpc.lease();
                let r = self.rpc.request_exact(req.clone(), t);
                async move { c.time_to_live(r).await }
            })
            .await?;
        Ok(LeaseInfo { id: m.id, ttl: m.ttl, granted_ttl: m.granted_ttl, keys: m.keys })
    }

    /// The ids of the subvolume's leases, in increasing order.
    pub async fn list(&self) -> Result<Vec<LeaseId>> {
        let req = pb::LeaseLeasesRequest { subvolume: self.subvolume.clone() };
        Ok(self
            .rpc
            .idempotent("lease-list", self.rpc.deadline, |t| {
                let mut c = self.rpc.lease();
                let r = self.rpc.request_exact(req.clone(), t);
                async move { c.leases(r).await }
            })
            .await?
            .ids)
    }
}

/// A running background keep-alive ([`Leases::keep_alive`]). Dropping it
/// stops the task as [`KeepAlive::stop`] does, without waiting.
#[derive(Debug)]
pub struct KeepAlive {
    id: LeaseId,
    /// The last answer's TTL; written by the task only (Relaxed: a lone value, no ordering with other memory).
    ttl: Arc<AtomicI64>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<()>>>,
}

impl KeepAlive {
    /// The lease kept alive.
    pub fn id(&self) -> LeaseId {
        self.id
    }

    /// The TTL of the last answer, in seconds (0 before the first).
    pub fn ttl(&self) -> i64 {
        self.ttl.load(Ordering::Relaxed)
    }

    /// True once the task has ended by itself (the lease was found gone, or
    /// the stream failed): [`KeepAlive::stop`] then returns why.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops renewing, closes the stream and waits for the task. Ok when it
    /// was still running; else why it ended: [`Error::NotFound`] when the
    /// lease was found gone, or the stream's error.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(()); // the task may have ended already
        }
        match self.task.take() {
            Some(t) => t.await.unwrap_or_else(|e| {
                Err(Error::Internal(ErrorInfo {
                    code: None,
                    message: format!("keep-alive task: {e}"),
                    operation: "lease-keep-alive",
                    ..Default::default()
                }))
            }),
            None => Ok(()),
        }
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        // Dropping the sender wakes the task's stop branch (as a send would).
        self.stop.take();
    }
}

/// The keep-alive task: one request, wait for its answer, sleep TTL/3,
/// again; ends Ok on a stop (or a dropped handle), Err when the lease is
/// gone or the stream fails.
async fn run_keep_alive(
    rpc: Rpc,
    subvolume: String,
    id: LeaseId,
    ttl: Arc<AtomicI64>,
    mut stop: oneshot::Receiver<()>,
) -> Result<()> {
    let op = "lease-keep-alive";
    let req = pb::LeaseKeepAliveRequest { subvolume, id };
    let (tx, rx) = mpsc::channel::<pb::LeaseKeepAliveRequest>(1);
    let reqs = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    tx.send(req.clone()).await.expect("the receiver is alive");
    let mut client = rpc.lease();
    // No deadline: the stream lives as long as the keep-alive.
    let call = client.keep_alive(tonic::Request::new(reqs));
    let mut stream = tokio::select! {
        r = call => r.map_err(|s| Error::from_status(&s, op))?.into_inner(),
        _ = &mut stop => return Ok(()),
    };
    loop {
        let m = tokio::select! {
            m = stream.message() => m.map_err(|s| Error::from_status(&s, op))?,
            _ = &mut stop => return Ok(()),
        };
        let Some(m) = m else {
            return Err(Error::Unavailable(ErrorInfo {
                code: None,
                message: "the KeepAlive stream ended".into(),
                operation: op,
                ..Default::default()
            }));
        };
        if m.ttl <= 0 {
            return Err(lease_gone(op, id));
        }
        ttl.store(m.ttl, Ordering::Relaxed);
        let wait = (Duration::from_secs(m.ttl as u64) / 3).max(MIN_KEEP_ALIVE_INTERVAL);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = &mut stop => return Ok(()),
        }
        if tx.send(req.clone()).await.is_err() {
            return Err(Error::Unavailable(ErrorInfo {
                code: None,
                message: "the KeepAlive stream closed".into(),
                operation: op,
                ..Default::default()
            }));
        }
    }
}
