//! The KV.Watch streams a client's watchers share (as the Go client's
//! watch_stream.go and etcd's clientv3 do).
//!
//! A stream carries up to [`MAX_WATCHERS_PER_STREAM`] watchers (the
//! server's bound), of any subvolume, each with a client-chosen id unique on
//! the stream (never reused, so a late response for a removed watcher is
//! recognised and dropped). One Tokio task per stream reads the responses,
//! joins a fragmented revision and hands each whole revision to its watcher
//! without ever waiting: a watcher whose reader falls
//! [`crate::Options::watch_queue_bytes`]-ish behind (or more than
//! [`QUEUED_BATCHES`] revisions) ends with [`crate::Error::SlowReader`] and is
//! cancelled on the server, and the others go on. Requests go out through an
//! unbounded channel (creates and cancels only: one per watcher each). A
//! stream closes with its last watcher; a stream that fails ends every
//! watcher on it with the same error, and the next watch opens a new one.
//!
//! Invariants (under `Shared::state`):
//!  1. `watchers.len()` (creating ones included) <= MAX_WATCHERS_PER_STREAM.
//!  2. A dead stream is not in the mux and takes no new watcher.
//!  3. A watcher is in `watchers` until its end is decided (the server's
//!     cancel, the client's cancel or drop, slow reader, stream failure);
//!     its channel then holds its last item (an error) or is closed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, ErrorInfo, Result};
use crate::pb;
use crate::rpc::Rpc;

/// The server's bound of watchers per stream (docs/api.md "Watch").
pub const MAX_WATCHERS_PER_STREAM: usize = 1000;
/// A watcher's bound of unread revisions.
pub const QUEUED_BATCHES: usize = 4096;
/// A watcher's bound of unread event bytes (keys and values, about; one
/// larger revision is still handed over whole).
pub const QUEUED_BYTES: usize = 16 << 20;

/// What a watcher's channel carries: a whole revision's responses (raw,
/// turned into events by the watcher) or the error that ended it.
pub(crate) type Item = Result<Vec<pb::WatchResponse>>;

/// The reader's side of a watcher's queue: the channel and what it holds.
pub(crate) struct Queue {
    pub rx: mpsc::UnboundedReceiver<Item>,
    pub counts: Arc<Counts>,
}

/// Unread revisions and bytes of one watcher (Relaxed: bounds, not order).
#[derive(Default)]
pub(crate) struct Counts {
    pub batches: AtomicUsize,
    pub bytes: AtomicUsize,
    /// The latest store revision the server reported to this watcher.
    pub revision: AtomicU64,
}

struct Entry {
    tx: mpsc::UnboundedSender<Item>,
    counts: Arc<Counts>,
    created: Option<oneshot::Sender<Result<pb::WatchResponse>>>,
    fragments: Vec<pb::WatchResponse>,
}

struct State {
    watchers: HashMap<i64, Option<Entry>>, // None: reserved, not yet added
    next_id: i64,
    dead: bool,
}

/// One shared stream.
pub(crate) struct Shared {
    state: Mutex<State>,
    requests: mpsc::UnboundedSender<pb::WatchRequest>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
}

/// A client's set of streams; cloned with the Rpc (one per connection).
#[derive(Default)]
pub(crate) struct WatchMux {
    streams: Mutex<Vec<Arc<Shared>>>,
}

impl WatchMux {
    /// Creates a watcher on a stream with room (opening one if needed) and
    /// waits, up to `deadline`, for the server's answer to its create.
    pub async fn create(
        self: &Arc<Self>,
        rpc: &Rpc,
        mut create: pb::WatchCreateRequest,
        deadline: Option<std::time::Duration>,
    ) -> Result<(Arc<Shared>, i64, pb::WatchResponse, Queue)> {
        let (shared, id) = self.reserve(rpc);
        let (tx, rx) = mpsc::unbounded_channel();
        let counts = Arc::new(Counts::default());
        let (created_tx, created_rx) = oneshot::channel();
        {
            let mut st = shared.state.lock().unwrap();
            if st.dead {
                return Err(ended("the watch stream ended"));
            }
            let entry = Entry { tx, counts: counts.clone(), created: Some(created_tx), fragments: Vec::new() };
            st.watchers.insert(id, Some(entry));
        }
        create.watch_id = id;
        let req = pb::WatchRequest { request_union: Some(pb::watch_request::RequestUnion::CreateRequest(create)) };
        let _ = shared.requests.send(req); // a failed stream answers through `created`
        let answer = match deadline {
            Some(d) => match tokio::time::timeout(d, created_rx).await {
                Ok(a) => a,
                Err(_) => {
                    self.remove(&shared, id, true);
                    return Err(Error::DeadlineExceeded(ErrorInfo {
                        code: Some(tonic::Code::DeadlineExceeded),
                        message: "the server did not create the watcher in time".into(),
                        operation: "watch",
                        ..Default::default()
                    }));
                }
            },
            None => created_rx.await,
        };
        let created = answer.unwrap_or_else(|_| Err(ended("the watch stream ended")))?;
        if created.canceled {
            self.remove(&shared, id, false);
            return Err(crate::watch::cancel_error(&created));
        }
        counts.revision.fetch_max(created.revision, Ordering::Relaxed);
        Ok((shared, id, created, Queue { rx, counts }))
    }

    /// A live stream with room and the id reserved there, opening a stream
    /// (and its task) when none has room.
    fn reserve(self: &Arc<Self>, rpc: &Rpc) -> (Arc<Shared>, i64) {
        let mut streams = self.streams.lock().unwrap();
        {
            for s in streams.iter() {
                let mut st = s.state.lock().unwrap();
                if !st.dead && st.watchers.len() < MAX_WATCHERS_PER_STREAM {
                    st.next_id += 1;
                    let id = st.next_id;
                    st.watchers.insert(id, None);
                    return (s.clone(), id);
                }
            }
        }
        let (req_tx, req_rx) = mpsc::unbounded_channel::<pb::WatchRequest>();
        let (stop_tx, stop_rx) = oneshot::channel();
        let mut watchers = HashMap::new();
        watchers.insert(1, None);
        let shared = Arc::new(Shared {
            state: Mutex::new(State { watchers, next_id: 1, dead: false }),
            requests: req_tx,
            stop: Mutex::new(Some(stop_tx)),
        });
        streams.push(shared.clone());
        tokio::spawn(run(Arc::downgrade(self), shared.clone(), rpc.clone(), req_rx, stop_rx));
        (shared, 1)
    }

    /// Drops watcher `id` (its cancel or drop, or an end the task decided);
    /// with `cancel`, the server is told. The stream closes with its last
    /// watcher.
    pub fn remove(&self, shared: &Arc<Shared>, id: i64, cancel: bool) {
        let last = {
            let mut st = shared.state.lock().unwrap();
            if st.dead || st.watchers.remove(&id).is_none() {
                return;
            }
            st.dead = st.watchers.is_empty();
            st.dead
        };
        if last {
            self.drop_stream(shared);
            shared.stop.lock().unwrap().take(); // ends the task, which drops the call
            return;
        }
        if cancel {
            let c = pb::WatchCancelRequest { watch_id: id };
            let _ = shared
                .requests
                .send(pb::WatchRequest { request_union: Some(pb::watch_request::RequestUnion::CancelRequest(c)) });
        }
    }

    fn drop_stream(&self, shared: &Arc<Shared>) {
        self.streams.lock().unwrap().retain(|s| !Arc::ptr_eq(s, shared));
    }
}

fn ended(message: &str) -> Error {
    Error::Unavailable(ErrorInfo { code: None, message: message.into(), operation: "watch", ..Default::default() })
}

/// The stream's task: hands each response to its watcher until the stream
/// ends (every watcher then ends with the error) or its last watcher left.
async fn run(
    mux: std::sync::Weak<WatchMux>,
    shared: Arc<Shared>,
    rpc: Rpc,
    requests: mpsc::UnboundedReceiver<pb::WatchRequest>,
    mut stop: oneshot::Receiver<()>,
) {
    let reqs = futures_util::stream::unfold(requests, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    // No deadline on the call: the stream lives as long as its watchers (a
    // create that gets no answer ends at its own deadline).
    let mut kv = rpc.kv();
    let opened = tokio::select! {
        r = kv.watch(tonic::Request::new(reqs)) => r,
        _ = &mut stop => return,
    };
    let mut stream = match opened {
        Ok(r) => r.into_inner(),
        Err(s) => return fail(&mux, &shared, || Error::from_status(&s, "watch")),
    };
    loop {
        let m = tokio::select! {
            m = stream.message() => m,
            _ = &mut stop => return,
        };
        let r = match m {
            Ok(Some(r)) => r,
            Ok(None) => return fail(&mux, &shared, || ended("the watch stream ended")),
            Err(s) => return fail(&mux, &shared, || Error::from_status(&s, "watch")),
        };
        if r.watch_id < 0 {
            continue; // a progress answer for the whole stream: not asked for
        }
        if let Some((id, cancel)) = deliver(&shared, r) {
            if let Some(m) = mux.upgrade() {
                m.remove(&shared, id, cancel);
            }
        }
    }
}

/// Hands one response to its watcher; Some((id, cancel)) when that ends
/// the watcher (the server's cancel: nothing to cancel; too slow: cancel).
fn deliver(shared: &Shared, mut r: pb::WatchResponse) -> Option<(i64, bool)> {
    let mut st = shared.state.lock().unwrap();
    let id = r.watch_id;
    let Some(Some(e)) = st.watchers.get_mut(&id) else {
        return None; // removed by the client already, or not yet added
    };
    if let Some(created) = e.created.take() {
        let canceled = r.canceled;
        let _ = created.send(Ok(r));
        return canceled.then_some((id, false));
    }
    e.counts.revision.fetch_max(r.revision, Ordering::Relaxed);
    if r.canceled {
        if r.cancel_code != pb::WatchCancelCode::WatchCancelClient as i32 {
            let _ = e.tx.send(Err(crate::watch::cancel_error(&r)));
        }
        return Some((id, false));
    }
    if r.events.is_empty() && r.file_events.is_empty() {
        return None; // progress: the revision advanced
    }
    let fragment = r.fragment;
    e.fragments.push(std::mem::take(&mut r));
    if fragment {
        return None;
    }
    let batch = std::mem::take(&mut e.fragments);
    let bytes: usize = batch.iter().map(size_of_response).sum();
    let c = &e.counts;
    let behind = c.batches.load(Ordering::Relaxed) >= QUEUED_BATCHES
        || (c.bytes.load(Ordering::Relaxed) > 0 && c.bytes.load(Ordering::Relaxed) + bytes > QUEUED_BYTES);
    if behind {
        let info = ErrorInfo {
            code: None,
            message: "the watcher's events were read slower than they came (client queue full)".into(),
            operation: "watch",
            reason: "SLOW_READER".into(),
            ..Default::default()
        };
        let _ = e.tx.send(Err(Error::SlowReader(info)));
        return Some((id, true));
    }
    c.batches.fetch_add(1, Ordering::Relaxed);
    c.bytes.fetch_add(bytes, Ordering::Relaxed);
    if e.tx.send(Ok(batch)).is_err() {
        return Some((id, true)); // the watcher was dropped
    }
    None
}

/// The bytes a response's events hold (keys and values), for the bound.
pub(crate) fn size_of_response(r: &pb::WatchResponse) -> usize {
    let kv = |k: &Option<pb::KeyValue>| k.as_ref().map_or(0, |k| k.key.len() + k.value.len() + 32);
    let ev: usize = r.events.iter().map(|e| kv(&e.kv) + kv(&e.prev_kv)).sum();
    let fev: usize = r.file_events.iter().map(|f| f.path.len() + f.new_path.len() + 32).sum();
    ev + fev
}

/// Ends every watcher of a stream that ended under them with the same error.
fn fail(mux: &std::sync::Weak<WatchMux>, shared: &Arc<Shared>, err: impl Fn() -> Error) {
    let ws = {
        let mut st = shared.state.lock().unwrap();
        st.dead = true;
        std::mem::take(&mut st.watchers)
    };
    if let Some(m) = mux.upgrade() {
        m.drop_stream(shared);
    }
    for e in ws.into_values().flatten() {
        match e.created {
            Some(created) => {
                let _ = created.send(Err(err()));
            }
            None => {
                let _ = e.tx.send(Err(err()));
            }
        }
    }
}
