//! Transactions: one-shot conditional ones (etcd-style compare / then / else)
//! and interactive ones (begin, recorded reads, buffered writes, commit), and
//! the retry policy of [`crate::Subvolume::transaction`].

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::kv::{Durability, GetResult, KeyValue, PageSource, Range, RangeIter};
use crate::pb;
use crate::rpc::Rpc;
use crate::validate;

fn b(x: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(x.as_ref())
}

// ---- Compares and ops of a one-shot Txn ----

/// One condition of a one-shot transaction, on one key.
///
/// ```
/// use cowkv::Compare;
/// let c = [Compare::value("owner").eq("alice"), Compare::version("n").gt(2), Compare::missing("lock")];
/// ```
#[derive(Debug, Clone)]
pub struct Compare(pub(crate) pb::Compare);

/// The left side of a value compare.
pub struct ValueTarget(Bytes);
/// The left side of a number compare (version, create or mod revision).
pub struct NumberTarget(Bytes, pb::compare::Target);

impl Compare {
    /// The key's value (memcmp order); an absent key never matches.
    pub fn value(key: impl AsRef<[u8]>) -> ValueTarget {
        ValueTarget(b(key))
    }
    /// Writes since the key was created (0 when absent).
    pub fn version(key: impl AsRef<[u8]>) -> NumberTarget {
        NumberTarget(b(key), pb::compare::Target::Version)
    }
    /// Revision that created the key (0 when absent).
    pub fn create_revision(key: impl AsRef<[u8]>) -> NumberTarget {
        NumberTarget(b(key), pb::compare::Target::CreateRevision)
    }
    /// Revision of the key's last write (0 when absent).
    pub fn mod_revision(key: impl AsRef<[u8]>) -> NumberTarget {
        NumberTarget(b(key), pb::compare::Target::ModRevision)
    }
    /// Holds when the key exists.
    pub fn exists(key: impl AsRef<[u8]>) -> Compare {
        Compare::existence(key, true)
    }
    /// Holds when the key does not exist.
    pub fn missing(key: impl AsRef<[u8]>) -> Compare {
        Compare::existence(key, false)
    }
    fn existence(key: impl AsRef<[u8]>, exists: bool) -> Compare {
        Compare(pb::Compare {
            key: b(key),
            target: pb::compare::Target::Exists as i32,
            op: pb::compare::Op::Equal as i32,
            exists,
            ..Default::default()
        })
    }
}

macro_rules! ops {
    ($ty:ty, $arg:ty) => {
        impl $ty {
            /// key's side == operand
            pub fn eq(self, v: $arg) -> Compare {
                self.make(pb::compare::Op::Equal, v)
            }
            /// key's side != operand
            pub fn ne(self, v: $arg) -> Compare {
                self.make(pb::compare::Op::NotEqual, v)
            }
            /// key's side < operand
            pub fn lt(self, v: $arg) -> Compare {
                self.make(pb::compare::Op::Less, v)
            }
            /// key's side > operand
            pub fn gt(self, v: $arg) -> Compare {
                self.make(pb::compare::Op::Greater, v)
            }
        }
    };
}

impl ValueTarget {
    fn make(self, op: pb::compare::Op, v: impl AsRef<[u8]>) -> Compare {
        Compare(pb::Compare {
            key: self.0,
            target: pb::compare::Target::Value as i32,
            op: op as i32,
            value: b(v),
            ..Default::default()
        })
    }
}
ops!(ValueTarget, impl AsRef<[u8]>);

impl NumberTarget {
    fn make(self, op: pb::compare::Op, n: u64) -> Compare {
        Compare(pb::Compare { key: self.0, target: self.1 as i32, op: op as i32, number: n, ..Default::default() })
    }
}
ops!(NumberTarget, u64);

/// One operation of a one-shot transaction's branch.
#[derive(Debug, Clone)]
pub struct Op(pub(crate) pb::RequestOp);

impl Op {
    /// Writes a key.
    pub fn put(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Op {
        Op::put_with_lease(key, value, 0)
    }
    /// Writes a key attached to `lease` (0 = none: detached from any lease).
    pub fn put_with_lease(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, lease: i64) -> Op {
        Op(pb::RequestOp { op: Some(pb::request_op::Op::Put(pb::PutOp { key: b(key), value: b(value), lease })) })
    }
    /// Deletes a key (an absent key is fine: `deleted` is 0).
    pub fn delete(key: impl AsRef<[u8]>) -> Op {
        Op(pb::RequestOp { op: Some(pb::request_op::Op::Delete(pb::DeleteOp { key: b(key) })) })
    }
    /// Deletes the keys in `[start, end)` (empty = open).
    pub fn delete_range(start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Op {
        Op(pb::RequestOp {
            op: Some(pb::request_op::Op::DeleteRange(pb::DeleteRangeOp { start: b(start), end: b(end) })),
        })
    }
    /// Reads a range (no paging: its `limit` applies); it sees the state
    /// before the Txn's writes. `Range::count_only` counts.
    pub fn range(range: Range) -> Op {
        Op(pb::RequestOp { op: Some(pb::request_op::Op::Range(range.to_op())) })
    }
    /// Reads one key (a range of exactly that key).
    pub fn get(key: impl AsRef<[u8]>) -> Op {
        let k = key.as_ref();
        let mut end = k.to_vec();
        end.push(0);
        Op::range(Range::between(k, end).limit(1))
    }

    fn validate(&self, op: &'static str) -> Result<()> {
        match &self.0.op {
            Some(pb::request_op::Op::Put(p)) => {
                validate::key(op, &p.key)?;
                validate::value(op, &p.value)
            }
            Some(pb::request_op::Op::Delete(d)) => validate::key(op, &d.key),
            Some(pb::request_op::Op::DeleteRange(d)) => {
                validate::bound(op, "start", &d.start)?;
                validate::bound(op, "end", &d.end)
            }
            _ => Ok(()),
        }
    }
}

/// The result of one [`Op`] of the branch that ran, in the same position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// A put (the transaction's revision applies).
    Put,
    /// A delete or delete_range: keys removed.
    Delete { deleted: u64 },
    /// A range or get.
    Range { kvs: Vec<KeyValue>, count: u64, more: bool },
}

/// What a one-shot transaction did.
#[derive(Debug, Clone)]
pub struct TxnResult {
    /// Every compare held and the `then` branch ran.
    pub succeeded: bool,
    /// The revision of its writes, or the one it read at if it wrote nothing.
    pub revision: u64,
    /// One per op of the branch that ran.
    pub responses: Vec<OpResult>,
}

/// A one-shot conditional transaction: if every compare holds run the `then`
/// ops, else the `otherwise` ops, atomically under one revision. A compare
/// that does not hold is not an error: `succeeded` is false.
///
/// ```no_run
/// # async fn f(sv: cowkv::Subvolume) -> cowkv::Result<()> {
/// use cowkv::{Compare, Op};
/// let r = sv.txn()
///     .when([Compare::value("owner").eq("alice"), Compare::missing("lock")])
///     .then([Op::put("lock", "alice")])
///     .otherwise([Op::get("lock")])
///     .commit().await?;
/// # Ok(()) }
/// ```
pub struct Txn {
    rpc: Rpc,
    req: pb::TxnRequest,
    error: Option<Error>,
}

impl Txn {
    /// This request's deadline, instead of the client's default (the call
    /// ends with [`crate::Error::DeadlineExceeded`] when it passes).
    pub fn timeout(mut self, d: std::time::Duration) -> Self {
        self.rpc = self.rpc.with_timeout(d);
        self
    }

    pub(crate) fn new(rpc: Rpc, subvolume: String) -> Txn {
        Txn { rpc, req: pb::TxnRequest { subvolume, ..Default::default() }, error: None }
    }

    /// Conditions; all must hold for `then` (none = always).
    pub fn when(mut self, compares: impl IntoIterator<Item = Compare>) -> Txn {
        for c in compares {
            if let Err(e) = validate::key("txn", &c.0.key) {
                self.error.get_or_insert(e);
            }
            self.req.compare.push(c.0);
        }
        self
    }

    /// Ops run when every compare holds.
    pub fn then(mut self, ops: impl IntoIterator<Item = Op>) -> Txn {
        for o in ops {
            if let Err(e) = o.validate("txn") {
                self.error.get_or_insert(e);
            }
            self.req.success.push(o.0);
        }
        self
    }

    /// Ops run otherwise.
    pub fn otherwise(mut self, ops: impl IntoIterator<Item = Op>) -> Txn {
        for o in ops {
            if let Err(e) = o.validate("txn") {
                self.error.get_or_insert(e);
            }
            self.req.failure.push(o.0);
        }
        self
    }

    /// When the writes are acknowledged.
    pub fn durability(mut self, d: Durability) -> Txn {
        self.req.durability = d.proto();
        self
    }

    /// Sends the transaction.
    pub async fn commit(self) -> Result<TxnResult> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let r = Rpc::unary("txn", self.rpc.kv().txn(self.rpc.request(self.req, None))).await?;
        let responses = r
            .responses
            .into_iter()
            .map(|op| match op.result {
                Some(pb::response_op::Result::Delete(d)) => OpResult::Delete { deleted: d.deleted },
                Some(pb::response_op::Result::Range(rr)) => OpResult::Range {
                    kvs: rr.kvs.into_iter().map(KeyValue::from).collect(),
                    count: rr.count,
                    more: rr.more,
                },
                _ => OpResult::Put,
            })
            .collect();
        Ok(TxnResult { succeeded: r.succeeded, revision: r.revision, responses })
    }
}

// ---- Interactive transactions ----

/// Options of an interactive transaction.
#[derive(Debug, Clone, Default)]
pub struct TransactionOptions {
    /// The server aborts the handle after this long without a call on it
    /// (0 = the server's default, 30 s; at most 600,000).
    pub lease_ms: u64,
    /// When the commit is acknowledged.
    pub durability: Durability,
    /// How [`crate::Subvolume::transaction`] retries conflicts.
    pub retry: RetryPolicy,
}

const OPEN: u8 = 0;
const COMMITTED: u8 = 1;
const ABORTED: u8 = 2;

struct TxInner {
    rpc: Rpc,
    handle: u64,
    read_revision: u64,
    lease_ms: u64,
    durability: Durability,
    state: AtomicU8,
}

impl Drop for TxInner {
    fn drop(&mut self) {
        // An open transaction dropped without commit or abort: release the
        // server's handle in the background (best effort; the lease would too).
        if self.state.load(Ordering::Acquire) == OPEN {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let rpc = self.rpc.clone();
                let handle = self.handle;
                rt.spawn(async move {
                    let req = rpc.request(pb::AbortRequest { handle }, None);
                    let _ = rpc.kv().abort(req).await;
                });
            }
        }
    }
}

/// An interactive transaction on one subvolume (KV.Begin .. Commit/Abort).
///
/// Reads (`get`, `range`) see the latest state plus this transaction's own
/// writes and are recorded; writes (`put`, `delete`, `delete_range`) are
/// buffered until [`Transaction::commit`], which validates the reads
/// ([`Error::Conflict`] if one changed, [`Error::TooOld`] past the conflict
/// window). Every call goes to the server, which knows whether the handle is
/// open: a call on a finished transaction is [`Error::NotFound`] (an expired
/// one [`Error::Conflict`]), as in every cowkv client. Clones share the
/// handle; dropping the last clone of an open transaction aborts it in the
/// background.
#[derive(Clone)]
pub struct Transaction(Arc<TxInner>);

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Transaction({})", self.0.handle)
    }
}

impl Transaction {
    pub(crate) async fn begin(rpc: Rpc, subvolume: &str, o: &TransactionOptions) -> Result<Transaction> {
        validate::lease("begin", o.lease_ms)?;
        let req = pb::BeginRequest { subvolume: subvolume.to_string(), lease_ms: o.lease_ms };
        let r = Rpc::unary("begin", rpc.kv().begin(rpc.request(req, None))).await?;
        Ok(Transaction(Arc::new(TxInner {
            rpc,
            handle: r.handle,
            read_revision: r.read_revision,
            lease_ms: r.lease_ms,
            durability: o.durability,
            state: AtomicU8::new(OPEN),
        })))
    }

    /// The server's handle.
    pub fn handle(&self) -> u64 {
        self.0.handle
    }
    /// The revision the transaction reads at.
    pub fn read_revision(&self) -> u64 {
        self.0.read_revision
    }
    /// The lease the server granted, ms.
    pub fn lease_ms(&self) -> u64 {
        self.0.lease_ms
    }
    /// Neither committed nor aborted (through this client) yet.
    pub fn is_open(&self) -> bool {
        self.0.state.load(Ordering::Acquire) == OPEN
    }

    fn rpc(&self) -> &Rpc {
        &self.0.rpc
    }

    /// The key with its revisions and the read revision; [`Error::NotFound`] if absent.
    pub async fn get_kv(&self, key: impl AsRef<[u8]>) -> Result<GetResult> {
        let key = key.as_ref();
        validate::key("get", key)?;
        let req = pb::TxnGetRequest { handle: self.0.handle, key: b(key) };
        Ok(Rpc::unary("get", self.rpc().kv().txn_get(self.rpc().request(req, None))).await?.into())
    }

    /// The key's value, or None if absent (the absence is recorded too).
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        match self.get_kv(key).await {
            Ok(r) => Ok(Some(r.kv.value)),
            Err(Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The keys of a range, paged (own writes included; `snapshot` must be unset).
    pub fn range(&self, range: Range) -> RangeIter {
        RangeIter::new(PageSource::Transaction(self.rpc().clone(), self.0.handle), &range, "", "range")
    }

    /// Buffers a write.
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        validate::key("put", key)?;
        validate::value("put", value)?;
        let req = pb::TxnPutRequest { handle: self.0.handle, key: b(key), value: b(value) };
        Rpc::unary("put", self.rpc().kv().txn_put(self.rpc().request(req, None))).await?;
        Ok(())
    }

    /// Buffers the delete of one key.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        validate::key("delete", key)?;
        let req = pb::TxnDeleteRequest { handle: self.0.handle, key: b(key), ..Default::default() };
        Rpc::unary("delete", self.rpc().kv().txn_delete(self.rpc().request(req, None))).await?;
        Ok(())
    }

    /// Buffers the delete of `[start, end)` (empty end = through the last key).
    pub async fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let (start, end) = (start.as_ref(), end.as_ref());
        validate::bound("delete-range", "start", start)?;
        validate::bound("delete-range", "end", end)?;
        let req = pb::TxnDeleteRequest { handle: self.0.handle, key: b(start), range: true, end: b(end) };
        Rpc::unary("delete-range", self.rpc().kv().txn_delete(self.rpc().request(req, None))).await?;
        Ok(())
    }

    /// Validates and applies the transaction with its durability; returns
    /// the revision. The handle is finished whatever the outcome.
    pub async fn commit(&self) -> Result<u64> {
        self.commit_with(self.0.durability).await
    }

    /// [`Transaction::commit`] with a durability.
    pub async fn commit_with(&self, durability: Durability) -> Result<u64> {
        let req = pb::CommitRequest { handle: self.0.handle, durability: durability.proto() };
        let r = Rpc::unary("commit", self.rpc().kv().commit(self.rpc().request(req, None))).await;
        self.0.state.store(if r.is_ok() { COMMITTED } else { ABORTED }, Ordering::Release);
        Ok(r?.revision)
    }

    /// Drops the transaction and its buffered writes.
    pub async fn abort(&self) -> Result<()> {
        self.0.state.store(ABORTED, Ordering::Release);
        let req = pb::AbortRequest { handle: self.0.handle };
        Rpc::unary("abort", self.rpc().kv().abort(self.rpc().request(req, None))).await?;
        Ok(())
    }
}

// ---- Retry ----

/// How [`crate::Subvolume::run_in_transaction`] retries a transaction that failed
/// with [`Error::Conflict`] or [`Error::TooOld`]: at most `max_attempts` runs
/// in all, waiting a random time in `[d/2, d]` before retry n (0-based), with
/// `d = min(max_backoff, base_backoff * 2^n)`, so contending clients spread
/// out. The defaults (10 attempts, 10 ms doubling to 1 s) are those of every
/// cowkv client (docs/api.md, "Retrying transactions").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Runs of the transaction in all (1 = never retry).
    pub max_attempts: u32,
    /// The wait bound before the first retry.
    pub base_backoff: Duration,
    /// The largest wait bound.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 10 attempts, waits of 10 ms doubling up to 1 s.
    fn default() -> Self {
        RetryPolicy { max_attempts: 10, base_backoff: Duration::from_millis(10), max_backoff: Duration::from_secs(1) }
    }
}

impl RetryPolicy {
    /// One attempt, no retry.
    pub fn none() -> Self {
        RetryPolicy { max_attempts: 1, base_backoff: Duration::ZERO, max_backoff: Duration::ZERO }
    }

    /// The wait bound d before retry number `retry` (0-based).
    pub fn cap(&self, retry: u32) -> Duration {
        let scaled = self.base_backoff.checked_mul(1u32.checked_shl(retry).unwrap_or(u32::MAX));
        scaled.unwrap_or(self.max_backoff).min(self.max_backoff)
    }

    /// How long to wait before retrying after `err` on retry number `retry`
    /// (0-based: the first run failed), or None to give up and return `err`.
    /// `random` is in [0, 1).
    pub fn next_backoff(&self, err: &Error, retry: u32, random: f64) -> Option<Duration> {
        if !err.is_retryable_transaction() || retry + 1 >= self.max_attempts {
            return None;
        }
        let d = self.cap(retry);
        Some(d / 2 + (d - d / 2).mul_f64(random.clamp(0.0, 1.0)))
    }

    /// Runs `attempt` until it succeeds, retrying as the policy says with
    /// `sleep` between attempts (a seam for tests).
    pub async fn run<T, F, Fut, S, SFut>(
        &self,
        mut attempt: F,
        mut sleep: S,
        mut random: impl FnMut() -> f64,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
        S: FnMut(Duration) -> SFut,
        SFut: Future<Output = ()>,
    {
        let mut n = 0;
        loop {
            match attempt().await {
                Ok(v) => return Ok(v),
                Err(e) => match self.next_backoff(&e, n, random()) {
                    Some(d) => {
                        sleep(d).await;
                        n += 1;
                    }
                    None => return Err(e),
                },
            }
        }
    }
}

/// A uniform random number in [0, 1) for backoff jitter (xorshift seeded from
/// the clock and a counter; not for anything else).
pub(crate) fn jitter() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9E37_79B9_7F4A_7C15)
            | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorInfo;
    use std::cell::{Cell, RefCell};

    fn conflict() -> Error {
        Error::Conflict(ErrorInfo {
            code: Some(tonic::Code::Aborted),
            message: "conflict".into(),
            operation: "commit",
            ..Default::default()
        })
    }

    fn p() -> RetryPolicy {
        RetryPolicy { max_attempts: 5, base_backoff: Duration::from_millis(10), max_backoff: Duration::from_millis(50) }
    }

    fn block<T>(f: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
    }

    #[test]
    fn cap_doubles_up_to_the_maximum() {
        let p = p();
        let ms = |n| Duration::from_millis(n);
        assert_eq!([p.cap(0), p.cap(1), p.cap(2), p.cap(3), p.cap(100)], [ms(10), ms(20), ms(40), ms(50), ms(50)]);
        assert_eq!(RetryPolicy::default().cap(1000), Duration::from_secs(1));
        assert_eq!(RetryPolicy::default().cap(0), ms(10));
        assert_eq!(RetryPolicy::default().max_attempts, 10);
    }

    #[test]
    fn backoff_is_between_half_the_cap_and_the_cap() {
        let p = p();
        assert_eq!(p.next_backoff(&conflict(), 2, 0.0), Some(Duration::from_millis(20)));
        assert_eq!(p.next_backoff(&conflict(), 2, 0.5), Some(Duration::from_millis(30)));
        for _ in 0..1000 {
            let r = jitter();
            assert!((0.0..1.0).contains(&r));
            let d = p.next_backoff(&conflict(), 2, r).unwrap();
            assert!(d <= p.cap(2) && d >= p.cap(2) / 2, "{d:?}");
        }
    }

    /// The one retry rule (docs/api.md "Retrying transactions"), from
    /// clients/conformance/retry_rule.json: the default policy runs a body
    /// that always conflicts max_attempts times and waits within the bounds.
    #[test]
    fn default_policy_keeps_the_retry_rule() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance/retry_rule.json");
        let rule: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let ms = |v: &serde_json::Value| Duration::from_millis(v.as_u64().unwrap());
        let d = RetryPolicy::default();
        assert_eq!(d.max_attempts as u64, rule["max_attempts"].as_u64().unwrap());
        assert_eq!((d.base_backoff, d.max_backoff), (ms(&rule["first_wait_ms"]), ms(&rule["max_wait_ms"])));
        let waits = rule["waits_ms"].as_array().unwrap();
        for _ in 0..5 {
            let calls = Cell::new(0u64);
            let slept = RefCell::new(Vec::new());
            let r: Result<()> = block(d.run(
                || {
                    calls.set(calls.get() + 1);
                    async { Err(conflict()) }
                },
                |x| {
                    slept.borrow_mut().push(x);
                    async {}
                },
                jitter,
            ));
            assert!(matches!(r, Err(Error::Conflict(_))));
            assert_eq!(calls.get(), d.max_attempts as u64);
            assert_eq!(slept.borrow().len(), waits.len());
            for (i, (got, b)) in slept.borrow().iter().zip(waits).enumerate() {
                let (lo, hi) = (ms(&b[0]), ms(&b[1]));
                assert!(*got >= lo && *got <= hi, "wait {}: {got:?} not in [{lo:?}, {hi:?}]", i + 1);
            }
        }
    }

    #[test]
    fn retries_conflicts_then_returns() {
        let calls = Cell::new(0);
        let slept = RefCell::new(Vec::new());
        let r = block(p().run(
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move {
                    if n < 3 {
                        Err(conflict())
                    } else {
                        Ok("ok")
                    }
                }
            },
            |d| {
                slept.borrow_mut().push(d);
                async {}
            },
            || 1.0,
        ));
        assert_eq!(r.unwrap(), "ok");
        assert_eq!(calls.get(), 3);
        assert_eq!(*slept.borrow(), vec![Duration::from_millis(10), Duration::from_millis(20)]);
    }

    #[test]
    fn too_old_is_retried_too() {
        let calls = Cell::new(0);
        let r = block(p().run(
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move {
                    if n == 1 {
                        Err(Error::TooOld(ErrorInfo {
                            code: Some(tonic::Code::OutOfRange),
                            message: "too old".into(),
                            operation: "commit",
                            ..Default::default()
                        }))
                    } else {
                        Ok(7)
                    }
                }
            },
            |_| async {},
            || 0.0,
        ));
        assert_eq!(r.unwrap(), 7);
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn gives_up_after_max_retries_with_the_last_conflict() {
        let calls = Cell::new(0);
        let slept = RefCell::new(Vec::new());
        let r: Result<()> = block(p().run(
            || {
                calls.set(calls.get() + 1);
                async { Err(conflict()) }
            },
            |d| {
                slept.borrow_mut().push(d);
                async {}
            },
            || 1.0,
        ));
        assert!(matches!(r, Err(Error::Conflict(_))));
        assert_eq!(calls.get(), 5);
        assert_eq!(slept.borrow().len(), 4);
        assert_eq!(slept.borrow()[3], Duration::from_millis(50));
    }

    #[test]
    fn other_errors_return_at_once() {
        for e in [
            Error::NotFound(ErrorInfo {
                code: Some(tonic::Code::NotFound),
                message: "no".into(),
                operation: "get",
                ..Default::default()
            }),
            Error::user("my own error"),
            Error::invalid("put", "bad"),
        ] {
            let calls = Cell::new(0);
            let e = RefCell::new(Some(e));
            let r: Result<()> = block(p().run(
                || {
                    calls.set(calls.get() + 1);
                    let err = e.borrow_mut().take().unwrap();
                    async move { Err(err) }
                },
                |_| async {},
                || 0.0,
            ));
            assert!(r.is_err());
            assert_eq!(calls.get(), 1);
        }
    }

    #[test]
    fn none_never_retries() {
        let calls = Cell::new(0);
        let r: Result<()> = block(RetryPolicy::none().run(
            || {
                calls.set(calls.get() + 1);
                async { Err(conflict()) }
            },
            |_| async {},
            || 0.0,
        ));
        assert!(matches!(r, Err(Error::Conflict(_))));
        assert_eq!(calls.get(), 1);
    }
}
