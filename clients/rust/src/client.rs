//! The client: a connection to cowkvd, subvolumes and snapshots, Admin.

use std::collections::BTreeMap;
use std::time::Duration;

use prost::Message;

use crate::error::Result;
use crate::kv::Subvolume;
use crate::options::Options;
use crate::pb;
use crate::rpc::Rpc;
use crate::send::{PartialReceive, ReceiveOptions, ReceiveResult, SendOptions, SendStats, SendStream};
use crate::validate;

/// What the store knows about one subvolume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubvolumeInfo {
    /// Never reused.
    pub id: u64,
    pub name: String,
    /// The subvolume this is a snapshot of; 0 for a plain one.
    pub parent_id: u64,
    /// Engine generation of its root (when it last changed).
    pub generation: u64,
    /// Generation of the last snapshot taken of it (0 = none).
    pub last_snapshot: u64,
    pub created_unix_ms: u64,
    /// A read-only snapshot: every write is [`crate::Error::ReadOnly`].
    pub read_only: bool,
}

impl From<pb::SubvolumeInfo> for SubvolumeInfo {
    fn from(m: pb::SubvolumeInfo) -> Self {
        SubvolumeInfo {
            id: m.id,
            name: m.name,
            parent_id: m.parent_id,
            generation: m.generation,
            last_snapshot: m.last_snapshot,
            created_unix_ms: m.created_unix_ms,
            read_only: m.read_only,
        }
    }
}

/// The result of an online check; findings are data, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    pub ok: bool,
    pub problems: Vec<String>,
    pub generation: u64,
    pub fsid: String,
    pub nodesize: u32,
    pub total_bytes: u64,
    pub trees: u64,
    pub nodes: u64,
    pub items: u64,
    pub extents: u64,
    pub used_bytes: u64,
    /// A commit raced the first run; this is the second, with commits held back.
    pub rechecked: bool,
}

/// Versions of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInfo {
    pub version: String,
    /// "cowkv.v1".
    pub api: String,
    pub grpc_version: String,
    pub protobuf_version: String,
    pub nodesize: u32,
}

/// A connection to one cowkvd. Cheap to clone (clones share the connection);
/// every method is `&self` and safe to call from many tasks at once.
///
/// ```no_run
/// # async fn f() -> cowkv::Result<()> {
/// let client = cowkv::Client::connect(cowkv::Options::new("127.0.0.1:7420"))?;
/// client.create_subvolume("data").await?;
/// let sv = client.subvolume("data")?;
/// sv.put("k", "v").await?;
/// client.snapshot("data", "data@2026-11-22", true).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    rpc: Rpc,
    options: Options,
}

impl Client {
    /// Sets up a channel to cowkvd. It connects lazily, on the first call, so
    /// this fails only on a bad address or unreadable TLS files
    /// ([`crate::Error::Transport`]); an unreachable server shows as
    /// [`crate::Error::Unavailable`] on the first call. Needs a Tokio runtime.
    pub fn connect(options: Options) -> Result<Client> {
        if let Some(r) = &options.retry_unavailable {
            r.check()?;
        }
        Ok(Client { rpc: Rpc::new(&options)?, options })
    }

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

    /// The options it was made with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// A handle on a subvolume (or snapshot) by name; no call is made. ""
    /// is "default". A bad name is refused here ([`crate::Error::InvalidArgument`]).
    pub fn subvolume(&self, name: &str) -> Result<Subvolume> {
        Subvolume::new(self.rpc.clone(), name)
    }

    /// Creates an empty subvolume; AlreadyExists if the name is taken.
    pub async fn create_subvolume(&self, name: &str) -> Result<SubvolumeInfo> {
        validate::subvolume_name("create", "name", name)?;
        let req = pb::CreateSubvolumeRequest { name: name.into() };
        Ok(Rpc::unary("create", self.rpc.subvolumes().create(self.rpc.request(req, None))).await?.into())
    }

    /// Every live subvolume and snapshot, "default" included, in id order.
    pub async fn list_subvolumes(&self) -> Result<Vec<SubvolumeInfo>> {
        let req = pb::ListSubvolumesRequest::default();
        let r = self
            .rpc
            .idempotent("list", self.rpc.deadline, |t| {
                let mut c = self.rpc.subvolumes();
                let r = self.rpc.request_exact(req.clone(), t);
                async move { c.list(r).await }
            })
            .await?;
        Ok(r.subvolumes.into_iter().map(SubvolumeInfo::from).collect())
    }

    /// A list filtered and sorted by the server (btrfs's `subvolume list
    /// -r -s --sort`): `.read_only()`, `.snapshots_only()`, `.sort("-gen")`,
    /// then `.send().await`.
    pub fn list_subvolumes_with(&self) -> ListSubvolumes {
        ListSubvolumes { rpc: self.rpc.clone(), req: pb::ListSubvolumesRequest::default() }
    }

    /// Waits until deleted subvolumes' trees are dropped and their space is
    /// free (btrfs `subvolume sync`): the given ids, or every subvolume
    /// deleted before the call (`ids` empty). Returns the ids it waited for
    /// (an id dropped already is not listed). NotFound for an id that never
    /// was a subvolume, FailedPrecondition for a live one; DeadlineExceeded
    /// (naming the ids still pending) when the client's deadline comes first.
    pub async fn sync_subvolumes(&self, ids: &[u64]) -> Result<Vec<u64>> {
        // The server stops first, so its answer names what is pending.
        let timeout_ms = self.rpc.deadline.map_or(0, |d| {
            let ms = d.as_millis() as u64;
            ms.saturating_sub((ms / 10).min(500)).max(1)
        });
        let req = pb::SyncSubvolumesRequest { ids: ids.to_vec(), timeout_ms };
        Ok(Rpc::unary("sync-subvolumes", self.rpc.subvolumes().sync(self.rpc.request(req, None))).await?.synced)
    }

    /// One subvolume; NotFound if no subvolume has the name.
    pub async fn show_subvolume(&self, name: &str) -> Result<SubvolumeInfo> {
        validate::subvolume_name("show", "name", name)?;
        let req = pb::ShowSubvolumeRequest { name: name.into() };
        Ok(self
            .rpc
            .idempotent("show", self.rpc.deadline, |t| {
                let mut c = self.rpc.subvolumes();
                let r = self.rpc.request_exact(req.clone(), t);
                async move { c.show(r).await }
            })
            .await?
            .into())
    }

    /// Renames a subvolume; its id, contents and snapshots stay.
    pub async fn rename_subvolume(&self, name: &str, new_name: &str) -> Result<()> {
        validate::subvolume_name("rename", "name", name)?;
        validate::subvolume_name("rename", "new_name", new_name)?;
        let req = pb::RenameSubvolumeRequest { name: name.into(), new_name: new_name.into() };
        Rpc::unary("rename", self.rpc.subvolumes().rename(self.rpc.request(req, None))).await?;
        Ok(())
    }

    /// Deletes a subvolume by exact name ("default": FailedPrecondition).
    pub async fn delete_subvolume(&self, name: &str) -> Result<()> {
        validate::subvolume_name("delete", "name", name)?;
        let req = pb::DeleteSubvolumeRequest { name: name.into() };
        Rpc::unary("delete", self.rpc.subvolumes().delete(self.rpc.request(req, None))).await?;
        Ok(())
    }

    /// Snapshots `source` as `name` (O(1)); a read-only snapshot refuses
    /// every write with [`crate::Error::ReadOnly`].
    pub async fn snapshot(&self, source: &str, name: &str, read_only: bool) -> Result<SubvolumeInfo> {
        validate::subvolume_name("snapshot", "source", source)?;
        validate::subvolume_name("snapshot", "name", name)?;
        let req = pb::SnapshotRequest { source: source.into(), name: name.into(), read_only };
        Ok(Rpc::unary("snapshot", self.rpc.subvolumes().snapshot(self.rpc.request(req, None))).await?.into())
    }

    /// The send stream of the read-only `snapshot` (module [`crate::send`]
    /// docs): the whole of it, or with [`SendOptions::parent`] its
    /// difference from that older read-only snapshot; with
    /// [`SendOptions::resume_token`] (a [`PartialReceive`]'s at the
    /// receiver) the rest of the stream that receive stopped in, `snapshot`
    /// then "". NotFound for an unknown snapshot, FailedPrecondition for a
    /// writable one, InvalidArgument (reason RESUME_TOKEN) for a damaged
    /// token, NotFound (RESUME_MISMATCH) for one whose snapshots are not
    /// here; later errors come from [`SendStream::next_chunk`]. The stream
    /// deadline ([`crate::Options::stream_deadline`], or [`Client::timeout`])
    /// bounds the whole stream.
    pub async fn send(&self, snapshot: &str, opts: SendOptions) -> Result<SendStream> {
        crate::send::send(&self.rpc, snapshot, opts).await
    }

    /// Writes the whole send stream (as [`Client::send`]) to `w` (a file);
    /// returns the send's stats. On error `w` holds a prefix.
    pub async fn send_to(
        &self,
        w: &mut (impl tokio::io::AsyncWrite + Unpin),
        snapshot: &str,
        opts: SendOptions,
    ) -> Result<SendStats> {
        self.send(snapshot, opts).await?.write_to(w).await
    }

    /// Receives a send stream of chunks (another server's
    /// [`SendStream::into_stream`], or any stream of `Result<Bytes, E>`) into a
    /// new read-only subvolume, which appears only once the whole stream
    /// arrived and verified. Errors: DataLoss (reason STREAM_CORRUPT) for a
    /// damaged or truncated stream, NotFound / FailedPrecondition
    /// (PARENT_MISMATCH) for an incremental stream whose parent is missing
    /// or differs, AlreadyExists for a taken name (PARTIAL_RECEIVE: a
    /// partial receive's), RESUME_MISMATCH for a continuation that does not
    /// fit. An error from `source` cancels the call (a resumable receive
    /// keeps what arrived) and is returned as it is.
    pub async fn receive<S, E>(&self, source: S, opts: ReceiveOptions) -> Result<ReceiveResult>
    where
        S: futures_core::Stream<Item = std::result::Result<bytes::Bytes, E>> + Send,
        E: Into<crate::Error>,
    {
        crate::send::receive(&self.rpc, source, opts).await
    }

    /// [`Client::receive`] reading a stream from `r` (a file), 1 MiB at a
    /// time; a read error is [`crate::Error::User`].
    pub async fn receive_from(
        &self,
        r: impl tokio::io::AsyncRead + Send + Unpin,
        opts: ReceiveOptions,
    ) -> Result<ReceiveResult> {
        self.receive(crate::send::reader_chunks(r), opts).await
    }

    /// The partial receives this server keeps, each with its resume token.
    pub async fn partial_receives(&self) -> Result<Vec<PartialReceive>> {
        let req = pb::PartialReceivesRequest {};
        let m =
            Rpc::unary("partial_receives", self.rpc.subvolumes().partial_receives(self.rpc.request(req, None))).await?;
        Ok(m.partial.into_iter().map(Into::into).collect())
    }

    /// Drops a partial receive: NotFound (RESUME_MISMATCH) if there is none,
    /// FailedPrecondition (PARTIAL_RECEIVE) while a receive writes to it.
    pub async fn abort_receive(&self, name: &str) -> Result<()> {
        validate::subvolume_name("abort_receive", "name", name)?;
        let req = pb::AbortReceiveRequest { name: name.into() };
        Rpc::unary("abort_receive", self.rpc.subvolumes().abort_receive(self.rpc.request(req, None))).await?;
        Ok(())
    }

    /// SHA-256 (64 hex digits) over a subvolume's items and file data:
    /// equal for a sent snapshot and its received copy.
    pub async fn digest(&self, name: &str) -> Result<String> {
        validate::subvolume_name("digest", "name", name)?;
        let req = pb::DigestSubvolumeRequest { name: name.into() };
        Ok(Rpc::unary("digest", self.rpc.subvolumes().digest(self.rpc.request(req, None))).await?.sha256)
    }

    /// Commits the engine transaction: everything written before survives a
    /// crash. Returns the commit's generation.
    pub async fn sync(&self) -> Result<u64> {
        let r = Rpc::unary("sync", self.rpc.admin().sync(self.rpc.request(pb::SyncRequest {}, None))).await?;
        Ok(r.generation)
    }

    /// Every engine and server counter, by the field names of StatsResponse.
    pub async fn stats(&self) -> Result<BTreeMap<String, u64>> {
        let r = self
            .rpc
            .idempotent("stats", self.rpc.deadline, |t| {
                let mut c = self.rpc.admin();
                let r = self.rpc.request_exact(pb::StatsRequest {}.clone(), t);
                async move { c.stats(r).await }
            })
            .await?;
        Ok(stats_map(&r))
    }

    /// Online read-only verification; `timeout` overrides the default deadline.
    pub async fn check(&self, timeout: Option<Duration>) -> Result<CheckResult> {
        let r = Rpc::unary("check", self.rpc.admin().check(self.rpc.request(pb::CheckRequest {}, timeout))).await?;
        Ok(CheckResult {
            ok: r.ok,
            problems: r.problems,
            generation: r.generation,
            fsid: r.fsid,
            nodesize: r.nodesize,
            total_bytes: r.total_bytes,
            trees: r.trees,
            nodes: r.nodes,
            items: r.items,
            extents: r.extents,
            used_bytes: r.used_bytes,
            rechecked: r.rechecked,
        })
    }

    /// Versions of the server, the API and its libraries.
    pub async fn version(&self) -> Result<VersionInfo> {
        let r = self
            .rpc
            .idempotent("version", self.rpc.deadline, |t| {
                let mut c = self.rpc.admin();
                let r = self.rpc.request_exact(pb::VersionRequest {}.clone(), t);
                async move { c.version(r).await }
            })
            .await?;
        Ok(VersionInfo {
            version: r.version,
            api: r.api,
            grpc_version: r.grpc_version,
            protobuf_version: r.protobuf_version,
            nodesize: r.nodesize,
        })
    }
}

/// StatsResponse as name -> value, decoded from its wire form so that a
/// counter added to the proto needs no change here: every field is a varint,
/// and the names come from the field numbers of the generated message.
fn stats_map(r: &pb::StatsResponse) -> BTreeMap<String, u64> {
    let names = stats_field_names();
    let buf = r.encode_to_vec();
    let mut out: BTreeMap<String, u64> = names.values().map(|n| (n.to_string(), 0)).collect();
    let mut i = 0;
    while i < buf.len() {
        let (tag, n) = varint(&buf[i..]);
        i += n;
        let (value, n) = varint(&buf[i..]);
        i += n;
        if tag & 7 != 0 {
            break; // not a varint field: stop rather than misread
        }
        if let Some(name) = names.get(&(tag >> 3)) {
            out.insert(name.to_string(), value);
        }
    }
    out
}

fn varint(b: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    (v, b.len())
}

include!(concat!(env!("OUT_DIR"), "/stats_fields.rs"));

/// A subvolume list request, from [`Client::list_subvolumes_with`].
#[must_use = "a ListSubvolumes does nothing until .send().await"]
pub struct ListSubvolumes {
    rpc: Rpc,
    req: pb::ListSubvolumesRequest,
}

impl ListSubvolumes {
    /// This request's deadline, instead of the client's default (the call
    /// ends with [`crate::Error::DeadlineExceeded`] when it passes).
    pub fn timeout(mut self, d: std::time::Duration) -> Self {
        self.rpc = self.rpc.with_timeout(d);
        self
    }

    /// Only read-only subvolumes (`-r`).
    pub fn read_only(mut self) -> Self {
        self.req.read_only = true;
        self
    }
    /// Only snapshots, parent_id != 0 (`-s`).
    pub fn snapshots_only(mut self) -> Self {
        self.req.snapshots_only = true;
        self
    }
    /// A sort key "[+|-]FIELD" (gen, ogen, rootid, path; "-" descending,
    /// ties by id); several keys apply in order. An unknown key is
    /// InvalidArgument naming it.
    pub fn sort(mut self, key: impl Into<String>) -> Self {
        self.req.sort.push(key.into());
        self
    }
    /// Sends it.
    pub async fn send(self) -> Result<Vec<SubvolumeInfo>> {
        let r = self
            .rpc
            .idempotent("list", self.rpc.deadline, |t| {
                let mut c = self.rpc.subvolumes();
                let r = self.rpc.request_exact(self.req.clone(), t);
                async move { c.list(r).await }
            })
            .await?;
        Ok(r.subvolumes.into_iter().map(SubvolumeInfo::from).collect())
    }
}
