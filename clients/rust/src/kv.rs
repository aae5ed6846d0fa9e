//! A subvolume's key space (service KV): keys, ranges and their pages.

use std::collections::VecDeque;

use bytes::Bytes;
use futures_core::Stream;

use crate::error::{Error, Result};
use crate::files::Files;
use crate::lease::{LeaseId, Leases};
use crate::pb;
use crate::rpc::Rpc;
use crate::txn::{Transaction, TransactionOptions, Txn};
use crate::validate;
use crate::watch::{FileEvent, WatchOptions, Watcher};

/// When a write is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The server's default: durable unless cowkvd runs with --async-default.
    #[default]
    Default,
    /// After the log sync that covers it: survives any crash.
    Durable,
    /// After it is visible; durable by the next sync, in commit order.
    Async,
}

impl Durability {
    pub(crate) fn proto(self) -> i32 {
        match self {
            Durability::Default => pb::Durability::Default as i32,
            Durability::Durable => pb::Durability::Durable as i32,
            Durability::Async => pb::Durability::Async as i32,
        }
    }
}

/// One key with its value and revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key, 1..1024 bytes.
    pub key: Bytes,
    /// The value; empty for keys-only reads.
    pub value: Bytes,
    /// Revision of the write that created the key.
    pub create_revision: u64,
    /// Revision of its last write.
    pub mod_revision: u64,
    /// Writes since it was created; 1 = just created.
    pub version: u64,
}

impl From<pb::KeyValue> for KeyValue {
    fn from(m: pb::KeyValue) -> Self {
        KeyValue {
            key: m.key,
            value: m.value,
            create_revision: m.create_revision,
            mod_revision: m.mod_revision,
            version: m.version,
        }
    }
}

/// A key read with the store revision the read saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetResult {
    pub kv: KeyValue,
    /// The store revision of the read (in a transaction: its read revision).
    pub revision: u64,
}

impl From<pb::GetResponse> for GetResult {
    fn from(m: pb::GetResponse) -> Self {
        GetResult { kv: m.kv.unwrap_or_default().into(), revision: m.revision }
    }
}

/// What a range delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteRangeResult {
    /// Keys deleted.
    pub deleted: u64,
    /// The delete's revision (the revision read at when nothing was deleted).
    pub revision: u64,
}

/// The keys a range read covers and how to read them: `[start, end)` (empty
/// = open) or every key with a prefix, in order or reversed, a page at a time.
///
/// ```
/// let r = cowkv::Range::prefix("user/").page_size(100).reverse();
/// let r = cowkv::Range::between("a", "m").limit(10);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Range {
    pub(crate) start: Bytes,
    pub(crate) end: Bytes,
    pub(crate) prefix: Bytes,
    pub(crate) limit: u64,
    pub(crate) page_size: u64,
    pub(crate) reverse: bool,
    pub(crate) keys_only: bool,
    pub(crate) count_only: bool,
    pub(crate) snapshot: String,
    pub(crate) revision: u64,
}

fn b(x: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(x.as_ref())
}

impl Range {
    /// Every key.
    pub fn all() -> Range {
        Range::default()
    }
    /// Keys in `[start, end)`; an empty bound is open.
    pub fn between(start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Range {
        Range { start: b(start), end: b(end), ..Range::default() }
    }
    /// Keys from `start` (inclusive) to the last.
    pub fn from(start: impl AsRef<[u8]>) -> Range {
        Range { start: b(start), ..Range::default() }
    }
    /// Exactly the keys that start with `prefix`.
    pub fn prefix(prefix: impl AsRef<[u8]>) -> Range {
        Range { prefix: b(prefix), ..Range::default() }
    }
    /// Sets the first key (inclusive).
    pub fn start(mut self, start: impl AsRef<[u8]>) -> Range {
        self.start = b(start);
        self
    }
    /// Sets the exclusive end.
    pub fn end(mut self, end: impl AsRef<[u8]>) -> Range {
        self.end = b(end);
        self
    }
    /// At most this many keys in all (0 = no cap; for a page: its limit).
    pub fn limit(mut self, n: u64) -> Range {
        self.limit = n;
        self
    }
    /// At most this many keys per call (0 = the server's page limit, 10,000).
    pub fn page_size(mut self, n: u64) -> Range {
        self.page_size = n;
        self
    }
    /// Largest keys first.
    pub fn reverse(mut self) -> Range {
        self.reverse = true;
        self
    }
    /// Sets the order.
    pub fn reversed(mut self, reverse: bool) -> Range {
        self.reverse = reverse;
        self
    }
    /// Keys and revisions without values.
    pub fn keys_only(mut self) -> Range {
        self.keys_only = true;
        self
    }
    /// Only count (for `range_page`, `Op::range`).
    pub fn count_only(mut self) -> Range {
        self.count_only = true;
        self
    }
    /// Reads this read-only snapshot of the subvolume instead of the live one:
    /// one consistent view across pages.
    pub fn snapshot(mut self, name: impl Into<String>) -> Range {
        self.snapshot = name.into();
        self
    }

    /// Reads the range as it was at `revision`, from the subvolume's
    /// history (every page at it; 0 = the latest): [`Error::Compacted`]
    /// below what the history keeps, [`Error::FutureRevision`] past the
    /// current revision.
    pub fn at_revision(mut self, revision: u64) -> Range {
        self.revision = revision;
        self
    }

    pub(crate) fn has_bounds(&self) -> bool {
        !self.start.is_empty() || !self.end.is_empty() || !self.prefix.is_empty()
    }

    pub(crate) fn validate(&self, op: &'static str) -> Result<()> {
        validate::bound(op, "start", &self.start)?;
        validate::bound(op, "end", &self.end)?;
        validate::bound(op, "prefix", &self.prefix)?;
        if !self.prefix.is_empty() && (!self.start.is_empty() || !self.end.is_empty()) {
            return Err(Error::invalid(op, "prefix: start and end must be empty with a prefix"));
        }
        if !self.snapshot.is_empty() {
            validate::subvolume_name(op, "snapshot", &self.snapshot)?;
        }
        Ok(())
    }

    pub(crate) fn to_proto(&self, subvolume: &str) -> pb::RangeRequest {
        pb::RangeRequest {
            subvolume: subvolume.to_string(),
            start: self.start.clone(),
            end: self.end.clone(),
            prefix: self.prefix.clone(),
            limit: 0,
            reverse: self.reverse,
            keys_only: self.keys_only,
            count_only: self.count_only,
            page_token: Bytes::new(),
            snapshot: self.snapshot.clone(),
            revision: self.revision,
        }
    }

    pub(crate) fn to_op(&self) -> pb::RangeOp {
        pb::RangeOp {
            start: self.start.clone(),
            end: self.end.clone(),
            prefix: self.prefix.clone(),
            limit: self.limit,
            reverse: self.reverse,
            keys_only: self.keys_only,
            count_only: self.count_only,
        }
    }
}

/// One page of a range read ([`Subvolume::range_page`]).
#[derive(Debug, Clone)]
pub struct RangePage {
    /// The keys of this page, in order.
    pub kvs: Vec<KeyValue>,
    /// Keys in the range from this page's start: exact with count-only or
    /// when the page holds the rest of the range; otherwise a lower bound.
    pub count: u64,
    /// More keys follow this page.
    pub more: bool,
    /// The store revision the read saw.
    pub revision: u64,
    /// Pass to the next `range_page` call; empty when `more` is false.
    pub next_page_token: Bytes,
}

impl From<pb::RangeResponse> for RangePage {
    fn from(r: pb::RangeResponse) -> Self {
        RangePage {
            kvs: r.kvs.into_iter().map(KeyValue::from).collect(),
            count: r.count,
            more: r.more,
            revision: r.revision,
            next_page_token: r.next_page_token,
        }
    }
}

/// Where a range iterator gets its pages: a subvolume or a transaction.
#[derive(Clone)]
pub(crate) enum PageSource {
    Subvolume(Rpc),
    Transaction(Rpc, u64),
}

impl PageSource {
    async fn fetch(&self, req: pb::RangeRequest) -> Result<pb::RangeResponse> {
        match self {
            PageSource::Subvolume(rpc) => {
                rpc.idempotent("range", rpc.deadline, |t| {
                    let mut c = rpc.kv();
                    let r = rpc.request_exact(req.clone(), t);
                    async move { c.range(r).await }
                })
                .await
            }
            PageSource::Transaction(rpc, handle) => {
                let m = pb::TxnRangeRequest { handle: *handle, range: Some(req) };
                Rpc::unary("range", rpc.kv().txn_range(rpc.request(m, None))).await
            }
        }
    }
}

/// The keys of a range, fetched one page per call as iteration advances.
///
/// ```no_run
/// # async fn f(sv: cowkv::Subvolume) -> cowkv::Result<()> {
/// let mut it = sv.range(cowkv::Range::prefix("user/"));
/// while let Some(kv) = it.next().await? {
///     println!("{:?} = {:?}", kv.key, kv.value);
/// }
/// # Ok(()) }
/// ```
///
/// Pages of a live subvolume are each consistent at their own revision; read
/// a read-only snapshot for one view across pages.
pub struct RangeIter {
    source: PageSource,
    next: pb::RangeRequest,
    limit: u64,
    page_size: u64,
    buffer: VecDeque<KeyValue>,
    yielded: u64,
    done: bool,
    revision: Option<u64>,
    pages: u32,
    error: Option<Error>,
}

impl RangeIter {
    pub(crate) fn new(source: PageSource, range: &Range, subvolume: &str, op: &'static str) -> RangeIter {
        let error = range.validate(op).err();
        RangeIter {
            source,
            next: range.to_proto(subvolume),
            limit: range.limit,
            page_size: range.page_size,
            buffer: VecDeque::new(),
            yielded: 0,
            done: false,
            revision: None,
            pages: 0,
            error,
        }
    }

    /// The next key, fetching a page when the buffer runs out; None at the end.
    pub async fn next(&mut self) -> Result<Option<KeyValue>> {
        if let Some(e) = self.error.take() {
            self.done = true;
            return Err(e);
        }
        if self.limit > 0 && self.yielded >= self.limit {
            return Ok(None);
        }
        while self.buffer.is_empty() {
            if self.done {
                return Ok(None);
            }
            self.fetch_page().await?;
        }
        self.yielded += 1;
        Ok(self.buffer.pop_front())
    }

    async fn fetch_page(&mut self) -> Result<()> {
        let remaining = if self.limit > 0 { self.limit - self.yielded } else { 0 };
        let page = match (remaining, self.page_size) {
            (0, p) => p,
            (r, 0) => r,
            (r, p) => r.min(p),
        };
        let mut req = self.next.clone();
        req.limit = page;
        let resp = self.source.fetch(req).await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        self.pages += 1;
        self.revision = Some(resp.revision);
        self.buffer.extend(resp.kvs.into_iter().map(KeyValue::from));
        if resp.more && !resp.next_page_token.is_empty() {
            self.next.page_token = resp.next_page_token;
        } else {
            self.done = true;
        }
        Ok(())
    }

    /// The store revision of the last page read.
    pub fn revision(&self) -> Option<u64> {
        self.revision
    }

    /// Pages fetched so far.
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// Every remaining key.
    pub async fn collect(mut self) -> Result<Vec<KeyValue>> {
        let mut out = Vec::new();
        while let Some(kv) = self.next().await? {
            out.push(kv);
        }
        Ok(out)
    }

    /// The keys as a `futures` Stream (for `StreamExt` combinators).
    pub fn into_stream(self) -> impl Stream<Item = Result<KeyValue>> + Send {
        futures_util::stream::unfold(Some(self), |it| async move {
            let mut it = it?;
            match it.next().await {
                Ok(Some(kv)) => Some((Ok(kv), Some(it))),
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        })
    }
}

/// A handle on one subvolume or snapshot, by name: its key space and (through
/// [`Subvolume::files`]) its file tree. Making one calls nothing; a missing
/// subvolume shows as [`Error::NotFound`] on the first call. Cheap to clone.
#[derive(Clone)]
pub struct Subvolume {
    rpc: Rpc,
    name: String,
}

impl std::fmt::Debug for Subvolume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subvolume({:?})", self.name)
    }
}

impl Subvolume {
    pub(crate) fn new(rpc: Rpc, name: &str) -> Result<Subvolume> {
        if !name.is_empty() {
            validate::subvolume_name("subvolume", "subvolume", name)?;
        }
        Ok(Subvolume { rpc, name: name.to_string() })
    }

    /// The name ("" = "default").
    pub fn name(&self) -> &str {
        &self.name
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

    /// The subvolume's file tree.
    pub fn files(&self) -> Files {
        Files::new(self.rpc.clone(), self.name.clone())
    }

    /// The subvolume's leases (etcd's lease API).
    pub fn leases(&self) -> Leases {
        Leases::new(self.rpc.clone(), self.name.clone())
    }

    /// Watches `key` (with [`WatchOptions::prefix`] every key starting with
    /// it, with [`WatchOptions::range_end`] a range): returns once the server
    /// created the watcher, so every later change is seen; a refused create
    /// is its error ([`Error::NotFound`] for an unknown subvolume,
    /// [`Error::InvalidArgument`], ...). The [`Watcher`] is a `Stream` of
    /// events (crate::watch has the whole contract). Needs a Tokio runtime.
    pub async fn watch(&self, key: impl AsRef<[u8]>, opts: WatchOptions) -> Result<Watcher> {
        let create = crate::watch::create_request(&self.name, key.as_ref(), &opts)?;
        crate::watch::start(self.rpc.clone(), create).await
    }

    /// Watches the file tree at `prefix` and below ("" or "/": every path;
    /// a rename or exchange whose either path is under it), like inotify:
    /// returns once the server created the watcher, a [`Stream`] of
    /// [`FileEvent`]s ending as a key watcher does. Of the options only
    /// `start_revision` (replays what was recorded; `Error::Compacted`
    /// before it) and `progress_notify` apply. A read-only snapshot is
    /// `Error::ReadOnly` (FAILED_PRECONDITION; docs/api.md "File watchers").
    ///
    /// [`Stream`]: futures_core::Stream
    pub async fn watch_files(&self, prefix: &str, opts: WatchOptions) -> Result<Watcher<FileEvent>> {
        let create = crate::watch::file_create_request(&self.name, prefix, &opts)?;
        crate::watch::start(self.rpc.clone(), create).await
    }

    /// Drops the history of revisions below `revision` (etcd's Compact):
    /// reads at it still work, a watcher must start after it
    /// ([`Error::Compacted`]). Returns the subvolume's compact revision.
    pub async fn compact(&self, revision: u64) -> Result<u64> {
        let req =
            pb::CompactRequest { subvolume: self.name.clone(), revision, durability: Durability::Default.proto() };
        Ok(Rpc::unary("compact", self.rpc.kv().compact(self.rpc.request(req, None))).await?.compact_revision)
    }

    /// The key with its revisions and the read's revision; [`Error::NotFound`] if absent.
    pub async fn get_kv(&self, key: impl AsRef<[u8]>) -> Result<GetResult> {
        self.get_at_revision(key, 0).await
    }

    /// The key as it was at `revision`, from the subvolume's history (0 = the
    /// latest), and the revision read at: [`Error::NotFound`] if absent then,
    /// [`Error::Compacted`] (with its compact revision) below what the
    /// history keeps, [`Error::FutureRevision`] past the current revision.
    pub async fn get_at_revision(&self, key: impl AsRef<[u8]>, revision: u64) -> Result<GetResult> {
        let key = key.as_ref();
        validate::key("get", key)?;
        let req = pb::GetRequest { subvolume: self.name.clone(), key: b(key), revision };
        let r = self
            .rpc
            .idempotent("get", self.rpc.deadline, |t| {
                let mut c = self.rpc.kv();
                let r = self.rpc.request_exact(req.clone(), t);
                async move { c.get(r).await }
            })
            .await?;
        Ok(r.into())
    }

    /// The key's value, or None if it is absent.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        match self.get_kv(key).await {
            Ok(r) => Ok(Some(r.kv.value)),
            Err(Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes a key; returns the write's revision ([`Error::ReadOnly`] on a snapshot).
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<u64> {
        self.put_with(key, value, Durability::Default).await
    }

    /// [`Subvolume::put`] with a durability.
    pub async fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        durability: Durability,
    ) -> Result<u64> {
        self.put_with_lease(key, value, 0, durability).await
    }

    /// [`Subvolume::put_with`], attaching the key to `lease` ([`Subvolume::leases`]);
    /// lease 0 = none: the put detaches the key from any lease, as etcd's.
    /// [`Error::NotFound`] for an unknown lease (nothing is written).
    pub async fn put_with_lease(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        lease: LeaseId,
        durability: Durability,
    ) -> Result<u64> {
        let (key, value) = (key.as_ref(), value.as_ref());
        validate::key("put", key)?;
        validate::value("put", value)?;
        let req = pb::PutRequest {
            subvolume: self.name.clone(),
            key: b(key),
            value: b(value),
            durability: durability.proto(),
            lease,
        };
        Ok(Rpc::unary("put", self.rpc.kv().put(self.rpc.request(req, None))).await?.revision)
    }

    /// Deletes a key; returns the revision. [`Error::NotFound`] if absent.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<u64> {
        self.delete_with(key, Durability::Default).await
    }

    /// [`Subvolume::delete`] with a durability.
    pub async fn delete_with(&self, key: impl AsRef<[u8]>, durability: Durability) -> Result<u64> {
        let key = key.as_ref();
        validate::key("delete", key)?;
        let req = pb::DeleteRequest { subvolume: self.name.clone(), key: b(key), durability: durability.proto() };
        Ok(Rpc::unary("delete", self.rpc.kv().delete(self.rpc.request(req, None))).await?.revision)
    }

    /// Deletes every key of a range (its bounds or prefix) atomically, at most
    /// 10,000 per call. At least one bound is required, so that a call never
    /// empties the subvolume by accident (`Range::from([0])` does).
    pub async fn delete_range(&self, range: Range, durability: Durability) -> Result<DeleteRangeResult> {
        let op = "delete-range";
        range.validate(op)?;
        if !range.has_bounds() {
            return Err(Error::invalid(op, "give start, end or prefix"));
        }
        let req = pb::DeleteRangeRequest {
            subvolume: self.name.clone(),
            start: range.start,
            end: range.end,
            prefix: range.prefix,
            durability: durability.proto(),
        };
        let r = Rpc::unary(op, self.rpc.kv().delete_range(self.rpc.request(req, None))).await?;
        Ok(DeleteRangeResult { deleted: r.deleted, revision: r.revision })
    }

    /// The keys of a range, fetched a page at a time as iteration advances.
    pub fn range(&self, range: Range) -> RangeIter {
        RangeIter::new(PageSource::Subvolume(self.rpc.clone()), &range, &self.name, "range")
    }

    /// Exactly one Range call: the page at `page_token` (empty = the first).
    /// The range's `limit` is this page's limit. Prefer [`Subvolume::range`].
    pub async fn range_page(&self, range: Range, page_token: impl AsRef<[u8]>) -> Result<RangePage> {
        range.validate("range")?;
        let mut req = range.to_proto(&self.name);
        req.limit = range.limit;
        req.page_token = b(page_token);
        Ok(self
            .rpc
            .idempotent("range", self.rpc.deadline, |t| {
                let mut c = self.rpc.kv();
                let r = self.rpc.request_exact(req.clone(), t);
                async move { c.range(r).await }
            })
            .await?
            .into())
    }

    /// The exact number of keys in a range.
    pub async fn count(&self, range: Range) -> Result<u64> {
        self.range_page(range.count_only().limit(0), b"").await.map(|p| p.count)
    }

    /// A one-shot conditional transaction:
    /// `sv.txn().when([..]).then([..]).otherwise([..]).commit().await`.
    pub fn txn(&self) -> Txn {
        Txn::new(self.rpc.clone(), self.name.clone())
    }

    /// Begins an interactive transaction: commit it, or abort (dropping an
    /// open one aborts it in the background).
    pub async fn begin(&self) -> Result<Transaction> {
        self.begin_with(&TransactionOptions::default()).await
    }

    /// [`Subvolume::begin`] with a lease and durability.
    pub async fn begin_with(&self, options: &TransactionOptions) -> Result<Transaction> {
        Transaction::begin(self.rpc.clone(), &self.name, options).await
    }

    /// Runs `body` in a fresh transaction and commits it (unless the body
    /// committed or aborted it itself), retrying [`Error::Conflict`] and
    /// [`Error::TooOld`] with jittered exponential backoff
    /// ([`crate::RetryPolicy::default`]); returns what the body returned. Any
    /// other error aborts the transaction and is returned at once. The body
    /// may run more than once: keep side effects out of it.
    ///
    /// ```no_run
    /// # async fn f(sv: cowkv::Subvolume) -> cowkv::Result<()> {
    /// let n = sv.run_in_transaction(|tx| async move {
    ///     let n: u64 = match tx.get("counter").await? {
    ///         Some(v) => String::from_utf8_lossy(&v).parse().unwrap_or(0),
    ///         None => 0,
    ///     };
    ///     tx.put("counter", (n + 1).to_string()).await?;
    ///     Ok(n + 1)
    /// }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run_in_transaction<T, F, Fut>(&self, body: F) -> Result<T>
    where
        F: FnMut(Transaction) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.run_in_transaction_with(&TransactionOptions::default(), body).await
    }

    /// The old name of [`Subvolume::run_in_transaction`].
    #[deprecated(since = "0.2.0", note = "use run_in_transaction (the retry helper's name in every cowkv client)")]
    pub async fn transaction<T, F, Fut>(&self, body: F) -> Result<T>
    where
        F: FnMut(Transaction) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.run_in_transaction(body).await
    }

    /// The old name of [`Subvolume::run_in_transaction_with`].
    #[deprecated(since = "0.2.0", note = "use run_in_transaction_with")]
    pub async fn transaction_with<T, F, Fut>(&self, options: &TransactionOptions, body: F) -> Result<T>
    where
        F: FnMut(Transaction) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.run_in_transaction_with(options, body).await
    }

    /// [`Subvolume::run_in_transaction`] with options (lease, durability, retry policy).
    pub async fn run_in_transaction_with<T, F, Fut>(&self, options: &TransactionOptions, mut body: F) -> Result<T>
    where
        F: FnMut(Transaction) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut attempt = 0;
        loop {
            let result = async {
                let tx = self.begin_with(options).await?;
                match body(tx.clone()).await {
                    Ok(v) => {
                        if tx.is_open() {
                            tx.commit().await?;
                        }
                        Ok(v)
                    }
                    Err(e) => {
                        let _ = tx.abort().await;
                        Err(e)
                    }
                }
            }
            .await;
            match result {
                Err(e) => match options.retry.next_backoff(&e, attempt, crate::txn::jitter()) {
                    Some(d) => {
                        tokio::time::sleep(d).await;
                        attempt += 1;
                    }
                    None => return Err(e),
                },
                Ok(v) => return Ok(v),
            }
        }
    }
}
