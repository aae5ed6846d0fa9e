//! Watch (KV.Watch, etcd's watch): the changes of a key or a range as they
//! become durable, in revision order, as a `futures` [`Stream`].
//!
//! ```no_run
//! # async fn f(sv: cowkv::Subvolume) -> cowkv::Result<()> {
//! use futures_util::StreamExt;
//! use cowkv::WatchOptions;
//! let mut w = sv.watch("cfg/", WatchOptions::new().prefix().prev_kv()).await?; // created
//! while let Some(ev) = w.next().await {
//!     let ev = ev?; // Error::Compacted { .. }, Error::SubvolumeDeleted, Error::SlowReader, ...
//!     println!("{:?} {:?} @{}", ev.kind, ev.kv.key, ev.revision());
//! }
//! # Ok(()) }
//! ```
//!
//! Each watcher has a stream of its own (one bidirectional KV.Watch call),
//! driven by a Tokio task: simple, and a slow reader of one watcher never
//! holds back another. All events of one revision are handed over together
//! (a fragmented revision is joined first); the task stops reading while
//! the reader is behind, so the server sees a slow reader as one. The
//! stream ends (None) after [`Watcher::cancel`]; dropping the watcher ends
//! it too. The server ends a watcher by itself only with a reason: a last
//! `Err` item whose variant says why, never text to parse.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;
use tokio::sync::{mpsc, oneshot};
use tonic::Code;

use crate::error::{Error, ErrorInfo, Result};
use crate::kv::KeyValue;
use crate::pb;
use crate::rpc::Rpc;
use crate::validate;

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The key was written (created or changed).
    Put,
    /// The key was deleted (a delete, a delete-range, or its lease's end).
    Delete,
}

/// One change of one key (etcd's mvccpb.Event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    pub kind: EventKind,
    /// The key as the change left it; for a delete only `key` and
    /// `mod_revision` (the delete's revision).
    pub kv: KeyValue,
    /// The key before the change (prev_kv watchers; None when it was absent).
    pub prev_kv: Option<KeyValue>,
}

impl WatchEvent {
    /// The revision of the change.
    pub fn revision(&self) -> u64 {
        self.kv.mod_revision
    }
}

/// One change of the file tree (a file watcher's event,
/// [`crate::Subvolume::watch_files`]; docs/api.md "File watchers").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEvent {
    pub kind: pb::file_watch_event::Type,
    pub revision: u64,
    pub ino: u64,
    /// Relative to the subvolume root, no leading "/"; a data or attribute
    /// change names one of the inode's names.
    pub path: String,
    /// The other path of a rename or exchange ("" otherwise).
    pub new_path: String,
    /// The paths were too long to record (both empty): rescan.
    pub paths_lost: bool,
}

/// An item a [`Watcher`] yields: [`WatchEvent`] (key watchers) or
/// [`FileEvent`] (file watchers). Implemented by these two only.
pub trait WatchItem: Sized + Send + Unpin + 'static {
    #[doc(hidden)]
    fn take_from(r: &mut pb::WatchResponse) -> Vec<Self>;
}

impl WatchItem for WatchEvent {
    fn take_from(r: &mut pb::WatchResponse) -> Vec<Self> {
        std::mem::take(&mut r.events).into_iter().map(event_from).collect()
    }
}

impl WatchItem for FileEvent {
    fn take_from(r: &mut pb::WatchResponse) -> Vec<Self> {
        std::mem::take(&mut r.file_events)
            .into_iter()
            .map(|f| FileEvent {
                kind: pb::file_watch_event::Type::try_from(f.r#type).unwrap_or(pb::file_watch_event::Type::Unspecified),
                revision: f.revision,
                ino: f.ino,
                path: f.path,
                new_path: f.new_path,
                paths_lost: f.paths_lost,
            })
            .collect()
    }
}

/// A file watcher's create: `prefix` ("" or "/": every path); of the
/// options only `start_revision` and `progress_notify` apply.
pub(crate) fn file_create_request(subvolume: &str, prefix: &str, o: &WatchOptions) -> Result<pb::WatchCreateRequest> {
    let op = "watch_files";
    if o.prefix || o.end.is_some() || o.prev_kv || o.no_put || o.no_delete {
        return Err(Error::invalid(op, "only start_revision and progress_notify apply to a file watcher"));
    }
    if prefix.len() > validate::MAX_PATH_BYTES {
        return Err(Error::invalid(op, format!("prefix: {} bytes > {}", prefix.len(), validate::MAX_PATH_BYTES)));
    }
    Ok(pb::WatchCreateRequest {
        subvolume: subvolume.to_string(),
        start_revision: o.start_revision,
        progress_notify: o.progress_notify,
        files: Some(pb::FileWatchCreate { prefix: prefix.to_string() }),
        ..Default::default()
    })
}

/// What to watch and how ([`crate::Subvolume::watch`]); a builder.
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    prefix: bool,
    end: Option<Bytes>,
    start_revision: u64,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
    progress_notify: bool,
}

impl WatchOptions {
    /// The key alone, from the next change.
    pub fn new() -> WatchOptions {
        WatchOptions::default()
    }
    /// Every key that starts with the key.
    pub fn prefix(mut self) -> Self {
        self.prefix = true;
        self
    }
    /// The keys in [key, end) (`[0]`: every key from key on).
    pub fn range_end(mut self, end: impl AsRef<[u8]>) -> Self {
        self.end = Some(Bytes::copy_from_slice(end.as_ref()));
        self
    }
    /// Start at an older revision, served from the history
    /// ([`Error::Compacted`] if it is gone); 0 = the next change.
    pub fn start_revision(mut self, rev: u64) -> Self {
        self.start_revision = rev;
        self
    }
    /// Each event carries the key before the change.
    pub fn prev_kv(mut self) -> Self {
        self.prev_kv = true;
        self
    }
    /// Leave put events out.
    pub fn no_put(mut self) -> Self {
        self.no_put = true;
        self
    }
    /// Leave delete events out.
    pub fn no_delete(mut self) -> Self {
        self.no_delete = true;
        self
    }
    /// Ask for empty responses now and then while nothing changes
    /// ([`Watcher::revision`] then advances).
    pub fn progress_notify(mut self) -> Self {
        self.progress_notify = true;
        self
    }
}

/// etcd's GetPrefixRangeEnd: the end of the keys starting with `prefix`
/// (`[0]`, every key, for a prefix of 0xff bytes).
pub fn prefix_end(prefix: &[u8]) -> Bytes {
    let mut end = prefix.to_vec();
    while end.last() == Some(&0xff) {
        end.pop();
    }
    match end.last_mut() {
        Some(b) => *b += 1,
        None => return Bytes::from_static(&[0]),
    }
    Bytes::from(end)
}

pub(crate) fn create_request(subvolume: &str, key: &[u8], o: &WatchOptions) -> Result<pb::WatchCreateRequest> {
    let op = "watch";
    if o.prefix && o.end.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(Error::invalid(op, "give prefix or range_end, not both"));
    }
    let end = if o.prefix { prefix_end(key) } else { o.end.clone().unwrap_or_default() };
    if end.is_empty() {
        validate::key(op, key)?;
    } else if key.len() > validate::MAX_KEY_BYTES {
        return Err(Error::invalid(op, format!("key: {} bytes > {}", key.len(), validate::MAX_KEY_BYTES)));
    }
    let mut filters = Vec::new();
    if o.no_put {
        filters.push(pb::watch_create_request::FilterType::Noput as i32);
    }
    if o.no_delete {
        filters.push(pb::watch_create_request::FilterType::Nodelete as i32);
    }
    Ok(pb::WatchCreateRequest {
        subvolume: subvolume.to_string(),
        key: Bytes::copy_from_slice(key),
        range_end: end,
        start_revision: o.start_revision,
        progress_notify: o.progress_notify,
        filters,
        prev_kv: o.prev_kv,
        watch_id: 0,
        files: None, // a key watcher
    })
}

/// Whole revisions of events, or the error that ended the watcher.
type Batch<E> = Result<Vec<E>>;

/// Batches the task may hold for a reader that is behind.
const QUEUED_BATCHES: usize = 16;

/// One watcher: a [`Stream`] of [`WatchEvent`]s ([`crate::Subvolume::watch`]),
/// or of [`FileEvent`]s for a file watcher ([`crate::Subvolume::watch_files`]).
#[derive(Debug)]
pub struct Watcher<E = WatchEvent> {
    id: i64,
    rx: mpsc::Receiver<Batch<E>>,
    pending: VecDeque<E>,
    stop: Option<oneshot::Sender<()>>,
    /// The latest store revision the server reported (Relaxed: a lone value).
    revision: Arc<AtomicU64>,
    done: bool,
}

impl<E> Watcher<E> {
    /// The watcher's id on its stream.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The latest store revision the server reported on the stream.
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::Relaxed)
    }

    /// Ends the watcher and its stream: the stream then yields None (events
    /// not yet read are dropped). Idempotent.
    pub fn cancel(&mut self) {
        self.stop.take();
        self.pending.clear();
        self.done = true;
        self.rx.close();
    }
}

impl<E: WatchItem> Stream for Watcher<E> {
    type Item = Result<E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(ev) = self.pending.pop_front() {
            return Poll::Ready(Some(Ok(ev)));
        }
        if self.done {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                self.done = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(Ok(batch))) => {
                self.pending.extend(batch);
                Poll::Ready(self.pending.pop_front().map(Ok))
            }
        }
    }
}

/// Opens the stream, sends the create and waits (under the client's unary
/// deadline) for the server's answer; then hands the stream to a task.
pub(crate) async fn start<E: WatchItem>(rpc: Rpc, create: pb::WatchCreateRequest) -> Result<Watcher<E>> {
    let op = "watch";
    let (req_tx, req_rx) = mpsc::channel::<pb::WatchRequest>(1);
    let reqs = futures_util::stream::unfold(req_rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let first = pb::WatchRequest { request_union: Some(pb::watch_request::RequestUnion::CreateRequest(create)) };
    req_tx.send(first).await.expect("the receiver is alive");
    let mut client = rpc.kv();
    // No deadline on the call: the stream lives as long as the watcher.
    let handshake = async {
        let mut stream =
            client.watch(tonic::Request::new(reqs)).await.map_err(|s| Error::from_status(&s, op))?.into_inner();
        let created = stream.message().await.map_err(|s| Error::from_status(&s, op))?;
        Ok::<_, Error>((stream, created))
    };
    let (stream, created) = match rpc.deadline {
        Some(d) => tokio::time::timeout(d, handshake).await.map_err(|_| {
            Error::DeadlineExceeded(ErrorInfo {
                code: Some(Code::DeadlineExceeded),
                message: "the server did not create the watcher in time".into(),
                operation: op,
                ..Default::default()
            })
        })??,
        None => handshake.await?,
    };
    let Some(created) = created else {
        return Err(Error::Unavailable(ErrorInfo {
            code: None,
            message: "the stream ended before the watcher was created".into(),
            operation: op,
            ..Default::default()
        }));
    };
    if created.canceled {
        return Err(cancel_error(&created));
    }
    let revision = Arc::new(AtomicU64::new(created.revision));
    let (tx, rx) = mpsc::channel(QUEUED_BATCHES);
    let (stop_tx, stop_rx) = oneshot::channel();
    tokio::spawn(run(stream, req_tx, tx, stop_rx, revision.clone()));
    Ok(Watcher { id: created.watch_id, rx, pending: VecDeque::new(), stop: Some(stop_tx), revision, done: false })
}

/// The task: reads responses, joins fragments, hands whole revisions over;
/// ends on a stop (or a dropped watcher), which drops the stream (the call
/// is cancelled), or when the server ends the watcher.
async fn run<E: WatchItem>(
    mut stream: tonic::Streaming<pb::WatchResponse>,
    _requests: mpsc::Sender<pb::WatchRequest>, // held: dropping it half-closes, which ends the stream
    tx: mpsc::Sender<Batch<E>>,
    mut stop: oneshot::Receiver<()>,
    revision: Arc<AtomicU64>,
) {
    let mut events = Vec::new();
    loop {
        let m = tokio::select! {
            m = stream.message() => m,
            _ = &mut stop => return,
        };
        let mut r = match m {
            Ok(Some(r)) => r,
            Ok(None) => {
                let end = Error::Unavailable(ErrorInfo {
                    code: None,
                    message: "the watch stream ended".into(),
                    operation: "watch",
                    ..Default::default()
                });
                let _ = tx.send(Err(end)).await;
                return;
            }
            Err(s) => {
                let _ = tx.send(Err(Error::from_status(&s, "watch"))).await;
                return;
            }
        };
        revision.fetch_max(r.revision, Ordering::Relaxed);
        if r.canceled {
            if r.cancel_code != pb::WatchCancelCode::WatchCancelClient as i32 {
                let _ = tx.send(Err(cancel_error(&r))).await;
            }
            return;
        }
        events.extend(E::take_from(&mut r));
        if events.is_empty() || r.fragment {
            continue;
        }
        let batch = std::mem::take(&mut events);
        tokio::select! {
            sent = tx.send(Ok(batch)) => if sent.is_err() { return },
            _ = &mut stop => return,
        }
    }
}

fn event_from(e: pb::WatchEvent) -> WatchEvent {
    let kind = if e.r#type == pb::watch_event::EventType::Delete as i32 { EventKind::Delete } else { EventKind::Put };
    WatchEvent { kind, kv: e.kv.map(KeyValue::from).unwrap_or_else(empty_kv), prev_kv: e.prev_kv.map(KeyValue::from) }
}

fn empty_kv() -> KeyValue {
    KeyValue::from(pb::KeyValue::default())
}

/// The error of a watcher the server ended: its cancel code decides the
/// variant, never its text.
pub(crate) fn cancel_error(r: &pb::WatchResponse) -> Error {
    let code = (r.error_code != 0).then(|| Code::from_i32(r.error_code));
    let info = ErrorInfo {
        code,
        message: r.cancel_reason.clone(),
        operation: "watch",
        reason: r.error_reason.clone(),
        ..Default::default()
    };
    // COMPACTED, SUBVOLUME_DELETED, SLOW_READER: the spec's class.
    if let Some((class, _)) = crate::spec::Class::of_watch_cancel(r.cancel_code) {
        return match Error::from_class(class, info) {
            Error::Compacted { info, .. } => Error::Compacted { info, compact_revision: r.compact_revision },
            e => e,
        };
    }
    // REFUSED, SERVER: the error a call would have given.
    let status = tonic::Status::new(code.unwrap_or(Code::Unknown), r.cancel_reason.clone());
    if info.reason.is_empty() {
        Error::from_status(&status, "watch")
    } else {
        Error::from_reason(&status, info)
    }
}
