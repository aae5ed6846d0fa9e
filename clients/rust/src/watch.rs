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
//! The watchers of one client share KV.Watch streams (up to 1,000 each,
//! any subvolume), as etcd's clientv3 does: one Tokio task per stream hands
//! each watcher its responses without waiting, so a slow reader of one
//! watcher never holds back another; it ends alone with
//! [`Error::SlowReader`] once 4,096 revisions or about 16 MiB of its events
//! are unread (crate::watch_stream). All events of one revision are handed
//! over together (a fragmented revision is joined first). The watcher ends
//! (None) after [`Watcher::cancel`]; dropping it ends it too; either
//! cancels only its id on the shared stream. A failed stream ends every
//! watcher on it with the same error. The server ends a watcher by itself only with a reason: a last
//! `Err` item whose variant says why, never text to parse.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;
use tonic::Code;

use crate::error::{Error, ErrorInfo, Result};
use crate::kv::KeyValue;
use crate::pb;
use crate::rpc::Rpc;
use crate::validate;
use crate::watch_stream::{size_of_response, Queue, Shared, WatchMux};

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

/// One watcher: a [`Stream`] of [`WatchEvent`]s ([`crate::Subvolume::watch`]),
/// or of [`FileEvent`]s for a file watcher ([`crate::Subvolume::watch_files`]).
/// Watchers of one client share KV.Watch streams (module `watch_stream`).
pub struct Watcher<E = WatchEvent> {
    id: i64,
    mux: Arc<WatchMux>,
    shared: Arc<Shared>,
    queue: Queue,
    pending: VecDeque<E>,
    done: bool,
}

impl<E> std::fmt::Debug for Watcher<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").field("id", &self.id).field("done", &self.done).finish()
    }
}

impl<E> Watcher<E> {
    /// The watcher's id on its stream.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The latest store revision the server reported to this watcher.
    pub fn revision(&self) -> u64 {
        self.queue.counts.revision.load(Ordering::Relaxed)
    }

    /// Ends the watcher (the server is told; the stream it shares goes on
    /// for the others): it then yields None (events not yet read are
    /// dropped). Idempotent; dropping the watcher does the same.
    pub fn cancel(&mut self) {
        self.mux.remove(&self.shared, self.id, true);
        self.pending.clear();
        self.done = true;
        self.queue.rx.close();
    }
}

impl<E> Drop for Watcher<E> {
    fn drop(&mut self) {
        self.mux.remove(&self.shared, self.id, true);
    }
}

impl<E: WatchItem> Stream for Watcher<E> {
    type Item = Result<E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Poll::Ready(Some(Ok(ev)));
            }
            if self.done {
                return Poll::Ready(None);
            }
            match self.queue.rx.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    self.done = true;
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Err(e))) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(Some(Ok(batch))) => {
                    let bytes: usize = batch.iter().map(size_of_response).sum();
                    self.queue.counts.batches.fetch_sub(1, Ordering::Relaxed);
                    self.queue.counts.bytes.fetch_sub(bytes, Ordering::Relaxed);
                    for mut r in batch {
                        let evs = E::take_from(&mut r);
                        self.pending.extend(evs);
                    }
                }
            }
        }
    }
}

/// Creates a watcher on one of the client's shared streams and waits
/// (under the client's unary deadline) for the server's answer.
pub(crate) async fn start<E: WatchItem>(rpc: Rpc, create: pb::WatchCreateRequest) -> Result<Watcher<E>> {
    let mux = rpc.watches.clone();
    let (shared, id, _created, queue) = mux.create(&rpc, create, rpc.deadline).await?;
    Ok(Watcher { id, mux, shared, queue, pending: VecDeque::new(), done: false })
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
