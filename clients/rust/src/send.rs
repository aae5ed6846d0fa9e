//! Send and receive of read-only snapshots (docs/api.md "Subvolumes";
//! docs/operations.md "Backup and restore"): [`crate::Client::send`],
//! [`crate::Client::send_to`], [`crate::Client::receive`],
//! [`crate::Client::receive_from`], partial receives and their abort.
//!
//! A send stream is bytes in order. [`SendStream`] hands out its chunks as
//! they arrive; a receive reads a stream of chunks (or an `AsyncRead`) and
//! sends it on in pieces of at most [`RECEIVE_CHUNK_BYTES`] through a
//! channel of two messages, so a stream piped from one server to another
//! never sits whole in memory.
//!
//! ```no_run
//! # async fn f(a: cowkv::Client, b: cowkv::Client) -> cowkv::Result<()> {
//! use cowkv::{ReceiveOptions, SendOptions};
//! let s = a.send("snap2", SendOptions::new().parent("snap1")).await?;
//! let r = b.receive(s.into_stream(), ReceiveOptions::new().name("copy")).await?;
//! assert_eq!(b.digest("copy").await?, a.digest("snap2").await?);
//! # Ok(()) }
//! ```

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{Error, Result};
use crate::pb;
use crate::rpc::Rpc;

/// Bytes per ReceiveRequest (the server takes at most 4 MiB per message).
pub const RECEIVE_CHUNK_BYTES: usize = 1 << 20;

/// What one send did (its last message).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendStats {
    pub records: u64,
    pub bytes: u64,
    pub items: u64,
    pub deletes: u64,
    pub clones: u64,
    pub data_bytes: u64,
    pub nodes_read: u64,
    pub subtrees_skipped: u64,
}

/// What one receive made (a dry run: the name it would have had, id 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiveResult {
    pub name: String,
    pub id: u64,
    /// The stream was incremental; `parent` is the local parent it applied to.
    pub incremental: bool,
    pub parent: String,
    pub records: u64,
    pub bytes: u64,
    pub items: u64,
    pub deletes: u64,
    pub clones: u64,
    pub data_bytes: u64,
}

/// A resumable receive that stopped before its end: give `token` to the
/// sender's [`SendOptions::resume_token`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartialReceive {
    pub name: String,
    pub token: String,
    pub records: u64,
    pub bytes: u64,
    pub uuid: String,
    pub generation: u64,
    pub parent_uuid: String,
    /// A receive is writing to it now.
    pub in_use: bool,
}

impl From<pb::PartialReceive> for PartialReceive {
    fn from(p: pb::PartialReceive) -> Self {
        PartialReceive {
            name: p.name,
            token: p.token,
            records: p.records,
            bytes: p.bytes,
            uuid: p.uuid,
            generation: p.generation,
            parent_uuid: p.parent_uuid,
            in_use: p.in_use,
        }
    }
}

/// Options of [`crate::Client::send`].
#[derive(Debug, Clone, Default)]
pub struct SendOptions {
    pub(crate) parent: String,
    pub(crate) resume_token: String,
}

impl SendOptions {
    pub fn new() -> Self {
        Self::default()
    }
    /// Send only the difference from this older read-only snapshot of the
    /// lineage, which the receiver holds.
    pub fn parent(mut self, parent: impl Into<String>) -> Self {
        self.parent = parent.into();
        self
    }
    /// Send the rest of the stream a resumable receive stopped in (a
    /// [`PartialReceive`]'s token); the snapshot may then be "".
    pub fn resume_token(mut self, token: impl Into<String>) -> Self {
        self.resume_token = token.into();
        self
    }
}

/// Options of [`crate::Client::receive`].
#[derive(Debug, Clone, Default)]
pub struct ReceiveOptions {
    pub(crate) name: String,
    pub(crate) resumable: bool,
    pub(crate) dry_run: bool,
}

impl ReceiveOptions {
    pub fn new() -> Self {
        Self::default()
    }
    /// The new subvolume's name (default: the snapshot's name at the sender).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Keep what arrived if the receive fails or is cut (a [`PartialReceive`]).
    /// Continuation streams always are.
    pub fn resumable(mut self) -> Self {
        self.resumable = true;
        self
    }
    /// Check the stream and write nothing.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
}

/// The chunks of one send stream, in order. Dropping it cancels the call.
pub struct SendStream {
    inner: tonic::Streaming<pb::SendResponse>,
    stats: Option<SendStats>,
    done: bool,
}

impl SendStream {
    pub(crate) fn new(inner: tonic::Streaming<pb::SendResponse>) -> Self {
        SendStream { inner, stats: None, done: false }
    }

    /// The next chunk (never empty), None after the last, or the call's error.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>> {
        while !self.done {
            let m = match self.inner.message().await {
                Ok(Some(m)) => m,
                Ok(None) => {
                    self.done = true;
                    if self.stats.is_none() {
                        let st = tonic::Status::internal("the stream ended without its stats message");
                        return Err(Error::from_status(&st, "send"));
                    }
                    break;
                }
                Err(s) => {
                    self.done = true;
                    return Err(Error::from_status(&s, "send"));
                }
            };
            if let Some(s) = m.stats {
                self.stats = Some(SendStats {
                    records: s.records,
                    bytes: s.bytes,
                    items: s.items,
                    deletes: s.deletes,
                    clones: s.clones,
                    data_bytes: s.data_bytes,
                    nodes_read: s.nodes_read,
                    subtrees_skipped: s.subtrees_skipped,
                });
            }
            if !m.chunk.is_empty() {
                return Ok(Some(m.chunk));
            }
        }
        Ok(None)
    }

    /// What the send did, once [`SendStream::next_chunk`] returned None.
    pub fn stats(&self) -> Option<SendStats> {
        self.stats
    }

    /// The chunks as a `Stream` (e.g. for another server's receive).
    pub fn into_stream(self) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
        futures_util::stream::unfold(Some(self), |s| async move {
            let mut s = s?;
            match s.next_chunk().await {
                Ok(Some(c)) => Some((Ok(c), Some(s))),
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        })
    }

    /// Writes the rest of the stream to `w`; returns the send's stats.
    pub async fn write_to(mut self, w: &mut (impl AsyncWrite + Unpin)) -> Result<SendStats> {
        while let Some(c) = self.next_chunk().await? {
            w.write_all(&c).await.map_err(Error::user)?;
        }
        w.flush().await.map_err(Error::user)?;
        Ok(self.stats.unwrap_or_default())
    }
}

pub(crate) async fn send(rpc: &Rpc, snapshot: &str, o: SendOptions) -> Result<SendStream> {
    if !snapshot.is_empty() || o.resume_token.is_empty() {
        crate::validate::subvolume_name("send", "snapshot", snapshot)?;
    }
    if !o.parent.is_empty() {
        crate::validate::subvolume_name("send", "parent", &o.parent)?;
    }
    let req = pb::SendRequest { snapshot: snapshot.into(), parent: o.parent, resume_token: o.resume_token };
    let inner = Rpc::unary("send", rpc.subvolumes().send(rpc.stream_request(req))).await?;
    Ok(SendStream::new(inner))
}

/// Runs one Receive call over `source`'s chunks. An error from `source`
/// cancels the call (the call's future is dropped) and is returned as it is.
pub(crate) async fn receive<S, E>(rpc: &Rpc, source: S, o: ReceiveOptions) -> Result<ReceiveResult>
where
    S: Stream<Item = std::result::Result<Bytes, E>> + Send,
    E: Into<Error>,
{
    if !o.name.is_empty() {
        crate::validate::subvolume_name("receive", "name", &o.name)?;
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::ReceiveRequest>(2);
    let reqs = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut subv = rpc.subvolumes();
    let call = subv.receive(rpc.stream_request(reqs));
    tokio::pin!(call);
    let first = pb::ReceiveRequest { name: o.name, dry_run: o.dry_run, resumable: o.resumable, chunk: Bytes::new() };
    let pump = pump(source, first, tx);
    tokio::pin!(pump);
    let r = tokio::select! {
        r = &mut call => r,
        p = &mut pump => {
            p?; // a source error: returning drops (cancels) the call
            call.await
        }
    };
    let m = r.map_err(|s| Error::from_status(&s, "receive"))?.into_inner();
    Ok(ReceiveResult {
        name: m.name,
        id: m.id,
        incremental: m.incremental,
        parent: m.parent,
        records: m.records,
        bytes: m.bytes,
        items: m.items,
        deletes: m.deletes,
        clones: m.clones,
        data_bytes: m.data_bytes,
    })
}

/// Sends `source`'s bytes into `tx` in pieces of at most RECEIVE_CHUNK_BYTES,
/// the options in the first message; ends (dropping `tx`) at its end. A
/// closed channel means the call ended: Ok, the call's answer says why.
async fn pump<S, E>(
    source: S,
    first: pb::ReceiveRequest,
    tx: tokio::sync::mpsc::Sender<pb::ReceiveRequest>,
) -> Result<()>
where
    S: Stream<Item = std::result::Result<Bytes, E>> + Send,
    E: Into<Error>,
{
    tokio::pin!(source);
    let mut first = Some(first);
    while let Some(item) = source.next().await {
        let mut b = item.map_err(Into::into)?;
        while !b.is_empty() {
            let piece = b.split_to(b.len().min(RECEIVE_CHUNK_BYTES));
            let msg = match first.take() {
                Some(f) => pb::ReceiveRequest { chunk: piece, ..f },
                None => pb::ReceiveRequest { chunk: piece, ..Default::default() },
            };
            if tx.send(msg).await.is_err() {
                return Ok(());
            }
        }
    }
    if let Some(f) = first {
        let _ = tx.send(f).await;
    }
    Ok(())
}

/// The chunks of an `AsyncRead`, RECEIVE_CHUNK_BYTES at a time.
pub(crate) fn reader_chunks<R: AsyncRead + Send + Unpin>(r: R) -> impl Stream<Item = Result<Bytes>> + Send {
    futures_util::stream::unfold(Some(r), |r| async move {
        let mut r = r?;
        let mut buf = vec![0u8; RECEIVE_CHUNK_BYTES];
        let mut n = 0;
        while n < buf.len() {
            match r.read(&mut buf[n..]).await {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) => return Some((Err(Error::user(e)), None)),
            }
        }
        if n == 0 {
            return None;
        }
        buf.truncate(n);
        Some((Ok(Bytes::from(buf)), Some(r)))
    })
}
