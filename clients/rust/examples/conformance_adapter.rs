//! The Rust client's conformance adapter: executes one JSON op per line from
//! stdin through the crate's public API and answers on stdout
//! (clients/conformance/README.md, "Adapter protocol"). The driver,
//! clients/conformance/driver.py, owns servers, variables and matching;
//! tests/conformance.rs runs it with this adapter. Bytes arrive and leave as
//! base64. A panic (an unknown op or handle name) ends the process: the
//! driver fails that scenario and starts a new adapter for the next.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use cowkv::{
    Client, Compare, Durability, Error, Extent, Op, OpResult, Options, Range, ReceiveOptions, SendOptions, Subvolume,
    Transaction, TransactionOptions, WriteOptions, RENAME_EXCHANGE, RENAME_NOREPLACE,
};
use futures_util::StreamExt;
use serde_json::Value as Json;

/// A value of a canonical result, an argument or a variable.
#[derive(Clone, Debug, PartialEq)]
enum V {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<V>),
    Map(BTreeMap<String, V>),
}

impl V {
    fn map<const N: usize>(entries: [(&str, V); N]) -> V {
        V::Map(entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
    fn empty() -> V {
        V::Map(BTreeMap::new())
    }
    fn n(x: impl Into<i128>) -> V {
        V::Int(x.into())
    }
    fn get(&self, k: &str) -> Option<&V> {
        match self {
            V::Map(m) => m.get(k),
            _ => None,
        }
    }
}

fn from_json(j: &Json) -> V {
    match j {
        Json::Null => V::Null,
        Json::Bool(b) => V::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => V::Int(i as i128),
            (_, Some(u)) => V::Int(u as i128),
            _ => V::Float(n.as_f64().unwrap()),
        },
        Json::String(s) => V::Str(s.clone()),
        Json::Array(a) => V::List(a.iter().map(from_json).collect()),
        Json::Object(o) => V::Map(o.iter().map(|(k, v)| (k.clone(), from_json(v))).collect()),
    }
}

fn show(v: &V) -> String {
    match v {
        V::Bytes(b) if b.len() > 64 => format!("bytes({})", b.len()),
        V::Bytes(b) => format!("{:?}", String::from_utf8_lossy(b)),
        V::Str(s) if s.len() > 64 => format!("str({})", s.len()),
        V::Str(s) => format!("{s:?}"),
        V::List(l) => format!("[{}]", l.iter().map(show).collect::<Vec<_>>().join(", ")),
        V::Map(m) => {
            format!("{{{}}}", m.iter().map(|(k, v)| format!("{k}: {}", show(v))).collect::<Vec<_>>().join(", "))
        }
        V::Int(i) => i.to_string(),
        V::Float(f) => f.to_string(),
        V::Bool(b) => b.to_string(),
        V::Null => "null".into(),
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    STANDARD.decode(s).unwrap_or_else(|e| panic!("bad base64 ({e}): {s:.80?}"))
}

/// One client and the named handles of the current scenario.
#[derive(Default)]
struct Ctx {
    txs: HashMap<String, Transaction>,
    handles: HashMap<String, cowkv::FileHandle>,
    watches: HashMap<String, cowkv::Watcher>,
    file_watches: HashMap<String, cowkv::Watcher<cowkv::FileEvent>>,
    unnamed: Vec<Transaction>,
    client: Option<Client>,
}

type R = Result<V, Error>;

impl Ctx {
    /// A new client (a new connection) with these options, lazily.
    fn connect(&mut self, a: &V) -> R {
        self.client = None;
        let ms = nm(a, "deadline_ms");
        let deadline = if ms > 0 { Duration::from_millis(ms) } else { cowkv::DEFAULT_DEADLINE };
        let mut o = Options::new(s(a, "address")).deadline(Some(deadline));
        let token = s(a, "token");
        if !token.is_empty() {
            o = o.token(token);
        }
        self.client = Some(Client::connect(o)?);
        Ok(V::empty())
    }

    /// End of a scenario: watchers, transactions and handles dropped, client closed.
    fn reset(&mut self) {
        *self = Ctx::default();
    }

    fn cl(&self) -> &Client {
        self.client.as_ref().expect("no client: connect first")
    }

    fn sv(&self, a: &V) -> Result<Subvolume, Error> {
        self.cl().subvolume(&s(a, "sv"))
    }

    fn handle(&self, a: &V) -> cowkv::Result<cowkv::FileHandle> {
        let n = s(a, "h");
        Ok(self.handles.get(&n).cloned().unwrap_or_else(|| panic!("no handle named {n}")))
    }

    fn tx(&self, a: &V) -> Transaction {
        let n = s(a, "tx");
        self.txs.get(&n).cloned().unwrap_or_else(|| panic!("no transaction named {n}"))
    }

    async fn call(&mut self, op: &str, a: &V) -> R {
        let c = self.cl().clone();
        Ok(match op {
            "create_subvolume" => info(c.create_subvolume(&s(a, "name")).await?),
            "show_subvolume" => info(c.show_subvolume(&s(a, "name")).await?),
            "list_subvolumes" => {
                let mut q = c.list_subvolumes_with();
                if bl(a, "read_only") {
                    q = q.read_only();
                }
                if bl(a, "snapshots_only") {
                    q = q.snapshots_only();
                }
                for k in list(a, "sort") {
                    q = q.sort(match k {
                        V::Str(x) => x,
                        other => show(&other),
                    });
                }
                let names = q.send().await?.into_iter().map(|i| V::Str(i.name)).collect();
                V::map([("names", V::List(names))])
            }
            "sync_subvolumes" => {
                let ids: Vec<u64> = list(a, "ids")
                    .iter()
                    .map(|v| match v {
                        V::Int(n) => *n as u64,
                        other => panic!("ids: not a number: {}", show(other)),
                    })
                    .collect();
                let synced = c.sync_subvolumes(&ids).await?;
                V::map([("synced", V::List(synced.into_iter().map(V::n).collect()))])
            }
            "snapshot" => info(c.snapshot(&s(a, "source"), &s(a, "name"), bl(a, "read_only")).await?),
            "rename_subvolume" => {
                c.rename_subvolume(&s(a, "name"), &s(a, "new_name")).await?;
                V::empty()
            }
            "delete_subvolume" => {
                c.delete_subvolume(&s(a, "name")).await?;
                V::empty()
            }

            "get" => get_result(self.sv(a)?.get_at_revision(by(a, "key"), nm(a, "revision")).await?),
            "put" => {
                let rev = self.sv(a)?.put_with_lease(by(a, "key"), by(a, "value"), int(a, "lease"), dur(a)).await?;
                V::map([("revision", V::n(rev))])
            }
            "delete" => V::map([("revision", V::n(self.sv(a)?.delete_with(by(a, "key"), dur(a)).await?))]),
            "delete_range" => {
                let d = self.sv(a)?.delete_range(range(a), dur(a)).await?;
                V::map([("deleted", V::n(d.deleted)), ("revision", V::n(d.revision))])
            }
            "range" => {
                let r =
                    range(a).page_size(nm(a, "page_size")).snapshot(s(a, "snapshot")).at_revision(nm(a, "revision"));
                keys_values(&self.sv(a)?.range(r).collect().await?)
            }
            "range_page" => {
                let mut r = range(a).limit(nm(a, "limit")).snapshot(s(a, "snapshot"));
                if bl(a, "count_only") {
                    r = r.count_only();
                }
                let p = self.sv(a)?.range_page(r, by(a, "page_token")).await?;
                let mut m = keys_values(&p.kvs);
                if let V::Map(m) = &mut m {
                    m.insert("count".into(), V::n(p.count));
                    m.insert("more".into(), V::Bool(p.more));
                    m.insert("next_page_token".into(), V::Bytes(p.next_page_token.to_vec()));
                }
                m
            }
            "put_many" => {
                let sv = self.sv(a)?;
                let (prefix, count, value) = (s(a, "prefix"), nm(a, "count"), by(a, "value"));
                let rounds = if a.get("rounds").is_some() { nm(a, "rounds") } else { 1 };
                for _ in 0..rounds {
                    let mut start = 0;
                    while start < count {
                        let end = (start + PUT_MANY_BATCH).min(count);
                        let ops: Vec<Op> = (start..end).map(|i| Op::put(format!("{prefix}{i:06}"), &value)).collect();
                        sv.txn().then(ops).durability(dur(a)).commit().await?;
                        start = end;
                    }
                }
                V::empty()
            }
            "txn" => self.txn(a).await?,

            "begin" => {
                let o = TransactionOptions { lease_ms: nm(a, "lease_ms"), ..Default::default() };
                let tx = self.sv(a)?.begin_with(&o).await?;
                let r = V::map([("read_revision", V::n(tx.read_revision())), ("lease_ms", V::n(tx.lease_ms()))]);
                match a.get("as") {
                    Some(_) => {
                        self.txs.insert(s(a, "as"), tx);
                    }
                    None => self.unnamed.push(tx),
                }
                r
            }
            "tx_get" => get_result(self.tx(a).get_kv(by(a, "key")).await?),
            "tx_range" => keys_values(&self.tx(a).range(range(a).page_size(nm(a, "page_size"))).collect().await?),
            "tx_put" => {
                self.tx(a).put(by(a, "key"), by(a, "value")).await?;
                V::empty()
            }
            "tx_delete" => {
                self.tx(a).delete(by(a, "key")).await?;
                V::empty()
            }
            "tx_delete_range" => {
                self.tx(a).delete_range(by(a, "start"), by(a, "end")).await?;
                V::empty()
            }
            "commit" => V::map([("revision", V::n(self.tx(a).commit_with(dur(a)).await?))]),
            "abort" => {
                self.tx(a).abort().await?;
                V::empty()
            }
            "retry_txn_conflict_once" => {
                let sv = self.sv(a)?;
                let (key, interfere) = (by(a, "key"), by(a, "interfere"));
                let attempts = Arc::new(AtomicU32::new(0));
                sv.run_in_transaction(|tx| {
                    let (sv, key, interfere, attempts) = (sv.clone(), key.clone(), interfere.clone(), attempts.clone());
                    async move {
                        let n = attempts.fetch_add(1, Ordering::SeqCst) + 1;
                        let v: u64 = match tx.get(&key).await? {
                            Some(b) => String::from_utf8_lossy(&b).parse().expect("a decimal"),
                            None => 0,
                        };
                        if n == 1 {
                            sv.put(&key, &interfere).await?;
                        }
                        tx.put(&key, (v + 1).to_string()).await
                    }
                })
                .await?;
                V::map([("attempts", V::n(attempts.load(Ordering::SeqCst)))])
            }

            "stat" => stat(self.sv(a)?.files().stat(&s(a, "path")).await?),
            "mkdir" => stat(self.sv(a)?.files().mkdir_mode(&s(a, "path"), nm(a, "mode") as u32).await?),
            "create_file" => stat(self.sv(a)?.files().create_mode(&s(a, "path"), nm(a, "mode") as u32).await?),
            "write_file" => {
                let o = WriteOptions {
                    offset: nm(a, "offset"),
                    create: bl(a, "create"),
                    truncate: bl(a, "truncate"),
                    mode: 0,
                };
                let w = self.sv(a)?.files().write_with(&s(a, "path"), by(a, "data"), o).await?;
                V::map([("bytes_written", V::n(w.bytes_written)), ("size", V::n(w.stat.size))])
            }
            "read_file" => {
                let d = self.sv(a)?.files().read_range(&s(a, "path"), nm(a, "offset"), nm(a, "length")).await?;
                V::map([("size", V::n(d.len() as u64)), ("data", V::Bytes(d))])
            }
            "readdir" => {
                let e = self.sv(a)?.files().read_dir_paged(&s(a, "path"), nm(a, "page_size")).await?;
                V::map([("names", V::List(e.into_iter().map(|e| V::Str(e.name)).collect()))])
            }
            "rename" => {
                let mut flags = 0;
                if let Some(V::List(l)) = a.get("flags") {
                    for f in l {
                        flags |= match f {
                            V::Str(x) if x == "noreplace" => RENAME_NOREPLACE,
                            V::Str(x) if x == "exchange" => RENAME_EXCHANGE,
                            other => panic!("bad rename flag {}", show(other)),
                        };
                    }
                }
                self.sv(a)?.files().rename_flags(&s(a, "from"), &s(a, "to"), flags).await?;
                V::empty()
            }
            "link" => stat(self.sv(a)?.files().link(&s(a, "existing"), &s(a, "new_path")).await?),
            "symlink" => stat(self.sv(a)?.files().symlink(&s(a, "target"), &s(a, "path")).await?),
            "readlink" => V::map([("target", V::Str(self.sv(a)?.files().read_link(&s(a, "path")).await?))]),
            "unlink" => {
                self.sv(a)?.files().unlink(&s(a, "path")).await?;
                V::empty()
            }
            "rmdir" => {
                self.sv(a)?.files().rmdir(&s(a, "path")).await?;
                V::empty()
            }
            "truncate" => stat(self.sv(a)?.files().truncate(&s(a, "path"), nm(a, "size")).await?),
            "fsync" => {
                let f = self.sv(a)?.files();
                f.fsync_range(&s(a, "path"), bl(a, "datasync"), nm(a, "offset"), nm(a, "length")).await?;
                V::empty()
            }
            "open_handle" | "create_tmpfile" => {
                let f = self.sv(a)?.files();
                let h = if op == "open_handle" {
                    f.open_handle(&s(a, "path"), nm(a, "lease_ms")).await?
                } else {
                    f.create_tmpfile(&s(a, "dir"), nm(a, "mode") as u32, 0).await?
                };
                let out = V::map([
                    ("ino", V::n(h.ino)),
                    ("lease_ms", V::n(h.lease_ms)),
                    ("stat", stat(h.opened_stat.clone())),
                ]);
                self.handles.insert(s(a, "as"), h);
                out
            }
            "handle_stat" => stat(self.handle(a)?.stat().await?),
            "handle_read" => {
                let d = self.handle(a)?.read(nm(a, "offset"), nm(a, "length")).await?;
                V::map([("size", V::n(d.len() as u64)), ("data", V::Bytes(d))])
            }
            "handle_write" => {
                let w = self.handle(a)?.write(by(a, "data"), nm(a, "offset")).await?;
                V::map([("bytes_written", V::n(w.bytes_written))])
            }
            "handle_link" => stat(self.handle(a)?.link(&s(a, "new_path")).await?),
            "close_handle" => {
                let h = self.handles.remove(&s(a, "h")).expect("close_handle: unknown handle");
                h.close().await?;
                V::empty()
            }
            "fallocate" => {
                let mut mode = 0;
                for m in list(a, "mode") {
                    mode |= match m {
                        V::Str(x) if x == "keep_size" => cowkv::FALLOC_FL_KEEP_SIZE,
                        V::Str(x) if x == "punch_hole" => cowkv::FALLOC_FL_PUNCH_HOLE | cowkv::FALLOC_FL_KEEP_SIZE,
                        V::Str(x) if x == "zero_range" => cowkv::FALLOC_FL_ZERO_RANGE,
                        other => panic!("fallocate mode {}", show(&other)),
                    };
                }
                stat(self.sv(a)?.files().fallocate(&s(a, "path"), nm(a, "offset"), nm(a, "length"), mode).await?)
            }
            "set_attr" => stat(set_attr(self.sv(a)?.files().set_attr(&s(a, "path")), a).send().await?),
            "set_xattr" => {
                let flags = match s(a, "flags").as_str() {
                    "create" => cowkv::XATTR_CREATE,
                    "replace" => cowkv::XATTR_REPLACE,
                    _ => 0,
                };
                self.sv(a)?.files().set_xattr(&s(a, "path"), &s(a, "name"), by(a, "value"), flags).await?;
                V::empty()
            }
            "get_xattr" => V::map([(
                "value",
                V::Bytes(self.sv(a)?.files().get_xattr(&s(a, "path"), &s(a, "name")).await?.to_vec()),
            )]),
            "list_xattrs" => {
                let names = self.sv(a)?.files().list_xattrs(&s(a, "path")).await?;
                V::map([("names", V::List(names.into_iter().map(V::Str).collect()))])
            }
            "remove_xattr" => {
                self.sv(a)?.files().remove_xattr(&s(a, "path"), &s(a, "name")).await?;
                V::empty()
            }
            "link_many" => {
                let f = self.sv(a)?.files();
                let (existing, prefix) = (s(a, "existing"), s(a, "prefix"));
                for i in 0..nm(a, "count") {
                    let dir = format!("{prefix}{:04}", i / LINKS_PER_DIR);
                    if i % LINKS_PER_DIR == 0 {
                        f.mkdir(&dir).await?;
                    }
                    f.link(&existing, &format!("{dir}/{i:06}")).await?;
                }
                V::empty()
            }
            "clone" => {
                let f = self.sv(a)?.files();
                f.clone_range(
                    &s(a, "src_path"),
                    nm(a, "src_offset"),
                    &s(a, "dst_path"),
                    nm(a, "dst_offset"),
                    nm(a, "length"),
                )
                .await?;
                V::empty()
            }
            "fiemap" => {
                let ex = self.sv(a)?.files().fiemap_range(&s(a, "path"), nm(a, "offset"), nm(a, "length")).await?;
                V::map([("extents", V::List(ex.iter().map(extent).collect()))])
            }

            "lease_grant" => {
                let g = self.sv(a)?.leases().grant(int(a, "ttl"), int(a, "id")).await?;
                V::map([("id", V::n(g.id)), ("ttl", V::n(g.ttl))])
            }
            "lease_revoke" => V::map([("revision", V::n(self.sv(a)?.leases().revoke(int(a, "id")).await?))]),
            "lease_keep_alive_once" => {
                V::map([("ttl", V::n(self.sv(a)?.leases().keep_alive_once(int(a, "id")).await?))])
            }
            "lease_time_to_live" => {
                let i = self.sv(a)?.leases().time_to_live(int(a, "id"), bl(a, "keys")).await?;
                let keys = i.keys.iter().map(|k| V::Bytes(k.to_vec())).collect();
                V::map([
                    ("id", V::n(i.id)),
                    ("ttl", V::n(i.ttl)),
                    ("granted_ttl", V::n(i.granted_ttl)),
                    ("keys", V::List(keys)),
                ])
            }
            "lease_list" => {
                let ids = self.sv(a)?.leases().list().await?;
                V::map([("ids", V::List(ids.into_iter().map(V::n).collect()))])
            }

            "compact" => V::map([("compact_revision", V::n(self.sv(a)?.compact(nm(a, "revision")).await?))]),
            "watch" => {
                let mut o = cowkv::WatchOptions::new().start_revision(nm(a, "start_revision"));
                if bl(a, "prefix") {
                    o = o.prefix();
                }
                let end = by(a, "end");
                if !end.is_empty() {
                    o = o.range_end(end);
                }
                if bl(a, "prev_kv") {
                    o = o.prev_kv();
                }
                for f in list(a, "filters") {
                    o = match f {
                        V::Str(f) if f == "noput" => o.no_put(),
                        V::Str(f) if f == "nodelete" => o.no_delete(),
                        other => panic!("unknown filter {}", show(&other)),
                    };
                }
                let w = self.sv(a)?.watch(by(a, "key"), o).await?;
                if a.get("as").is_some() {
                    self.watches.insert(s(a, "as"), w);
                }
                V::empty()
            }
            "file_watch" => {
                let o = cowkv::WatchOptions::new().start_revision(nm(a, "start_revision") as u64);
                let w = self.sv(a)?.watch_files(&s(a, "prefix"), o).await?;
                if a.get("as").is_some() {
                    self.file_watches.insert(s(a, "as"), w);
                }
                V::empty()
            }
            "watch_next" if self.file_watches.contains_key(&s(a, "w")) => {
                let w = self.file_watches.get_mut(&s(a, "w")).expect("no such watcher");
                watch_events(w, Some(nm(a, "count") as usize), file_event).await?
            }
            "watch_cancel" if self.file_watches.contains_key(&s(a, "w")) => {
                let mut w = self.file_watches.remove(&s(a, "w")).expect("no such watcher");
                w.cancel();
                watch_events(&mut w, None, file_event).await?
            }
            "watch_next" => {
                let w = self.watches.get_mut(&s(a, "w")).expect("no such watcher");
                watch_events(w, Some(nm(a, "count") as usize), watch_event).await?
            }
            "watch_cancel" => {
                let mut w = self.watches.remove(&s(a, "w")).expect("no such watcher");
                w.cancel();
                watch_events(&mut w, None, watch_event).await?
            }

            "send" | "receive" | "partial_receives" | "abort_receive" | "digest" => send_op(&c, op, a).await?,
            "sync" => V::map([("generation", V::n(c.sync().await?))]),
            "check" => V::map([("ok", V::Bool(c.check(Some(Duration::from_secs(300))).await?.ok))]),

            other => panic!("unknown op {other}"),
        })
    }

    async fn txn(&self, a: &V) -> R {
        let mut t = self.sv(a)?.txn().durability(dur(a));
        for c in list(a, "compare") {
            t = t.when([compare(&c)]);
        }
        for o in list(a, "success") {
            t = t.then([txn_op(&o)]);
        }
        for o in list(a, "failure") {
            t = t.otherwise([txn_op(&o)]);
        }
        let r = t.commit().await?;
        let responses = r
            .responses
            .into_iter()
            .map(|res| match res {
                OpResult::Put => V::map([("put", V::empty())]),
                OpResult::Delete { deleted } => V::map([("delete", V::map([("deleted", V::n(deleted))]))]),
                OpResult::Range { kvs, count, more } => {
                    let mut m = keys_values(&kvs);
                    if let V::Map(m) = &mut m {
                        m.insert("count".into(), V::n(count));
                        m.insert("more".into(), V::Bool(more));
                    }
                    V::map([("range", m)])
                }
            })
            .collect();
        Ok(V::map([
            ("succeeded", V::Bool(r.succeeded)),
            ("revision", V::n(r.revision)),
            ("responses", V::List(responses)),
        ]))
    }
}

/// link_many's names per directory: all names of one inode in one directory
/// share one inode-ref item, which must fit in a node.
const LINKS_PER_DIR: u64 = 400;

/// Puts per one-shot txn in put_many (README: 1,000, the last one smaller).
const PUT_MANY_BATCH: u64 = 1000;

fn compare(c: &V) -> Compare {
    let key = by(c, "key");
    let (target, op) = (s(c, "target"), s(c, "op"));
    if target == "exists" {
        let want = match op.as_str() {
            "=" => bl(c, "exists"),
            "!=" => !bl(c, "exists"),
            o => panic!("exists op {o}"),
        };
        return if want { Compare::exists(key) } else { Compare::missing(key) };
    }
    if target == "value" {
        let t = Compare::value(key);
        let v = by(c, "value");
        return match op.as_str() {
            "=" => t.eq(v),
            "!=" => t.ne(v),
            "<" => t.lt(v),
            ">" => t.gt(v),
            o => panic!("op {o}"),
        };
    }
    let t = match target.as_str() {
        "version" => Compare::version(key),
        "create_revision" => Compare::create_revision(key),
        "mod_revision" => Compare::mod_revision(key),
        o => panic!("target {o}"),
    };
    let n = nm(c, "number");
    match op.as_str() {
        "=" => t.eq(n),
        "!=" => t.ne(n),
        "<" => t.lt(n),
        ">" => t.gt(n),
        o => panic!("op {o}"),
    }
}

fn txn_op(o: &V) -> Op {
    if let Some(p) = o.get("put") {
        return Op::put_with_lease(by(p, "key"), by(p, "value"), int(p, "lease"));
    }
    if let Some(p) = o.get("delete") {
        return Op::delete(by(p, "key"));
    }
    if let Some(p) = o.get("delete_range") {
        return Op::delete_range(by(p, "start"), by(p, "end"));
    }
    if let Some(p) = o.get("range") {
        let mut r = range(p).limit(nm(p, "limit"));
        if bl(p, "count_only") {
            r = r.count_only();
        }
        return Op::range(r);
    }
    panic!("txn op {}", show(o))
}

/// start/end/prefix/reverse/keys_only of a range.
fn range(a: &V) -> Range {
    let mut r = Range::prefix(by(a, "prefix")).start(by(a, "start")).end(by(a, "end")).reversed(bl(a, "reverse"));
    if bl(a, "keys_only") {
        r = r.keys_only();
    }
    r
}

// ---- Arguments ----

fn s(a: &V, k: &str) -> String {
    match a.get(k) {
        None | Some(V::Null) => String::new(),
        Some(V::Str(x)) => x.clone(),
        Some(V::Int(n)) => n.to_string(),
        Some(other) => panic!("{k}: not a string: {}", show(other)),
    }
}

/// A bytes argument: base64 on the wire.
fn by(a: &V, k: &str) -> Vec<u8> {
    match a.get(k) {
        None | Some(V::Null) => Vec::new(),
        Some(V::Str(x)) => base64_decode(x),
        Some(other) => panic!("{k}: not base64: {}", show(other)),
    }
}

fn nm(a: &V, k: &str) -> u64 {
    match a.get(k) {
        None | Some(V::Null) => 0,
        Some(V::Int(n)) => *n as u64,
        Some(other) => panic!("{k}: not a number: {}", show(other)),
    }
}

/// A signed argument (lease ids and TTLs; bad input may be negative).
fn int(a: &V, k: &str) -> i64 {
    match a.get(k) {
        None | Some(V::Null) => 0,
        Some(V::Int(n)) => i64::try_from(*n).unwrap_or_else(|_| panic!("{k}: {n} is not an int64")),
        Some(other) => panic!("{k}: not a number: {}", show(other)),
    }
}

fn bl(a: &V, k: &str) -> bool {
    matches!(a.get(k), Some(V::Bool(true)))
}

fn list(a: &V, k: &str) -> Vec<V> {
    match a.get(k) {
        Some(V::List(l)) => l.clone(),
        _ => Vec::new(),
    }
}

fn dur(a: &V) -> Durability {
    match s(a, "durability").as_str() {
        "" | "default" => Durability::Default,
        "durable" => Durability::Durable,
        "async" => Durability::Async,
        d => panic!("durability {d}"),
    }
}

// ---- Canonical results ----

fn info(i: cowkv::SubvolumeInfo) -> V {
    V::map([
        ("id", V::n(i.id)),
        ("name", V::Str(i.name)),
        ("parent_id", V::n(i.parent_id)),
        ("read_only", V::Bool(i.read_only)),
    ])
}

/// A file event's canonical shape (conformance/README.md "file_watch").
/// `count` events of a watcher, each within 10 s; with `count` None, every
/// event until the watcher ends (after a cancel).
async fn watch_events<S, T>(w: &mut S, count: Option<usize>, conv: fn(&T) -> V) -> R
where
    S: futures_util::Stream<Item = Result<T, Error>> + Unpin,
{
    let mut events = Vec::new();
    while count.map_or(true, |n| events.len() < n) {
        match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
            Err(_) if count.is_some() => panic!("no event within 10 s after {}", events.len()),
            Err(_) => panic!("the watcher did not end within 10 s"),
            Ok(None) if count.is_some() => panic!("the watcher ended without a reason"),
            Ok(None) => break,
            Ok(Some(ev)) => events.push(conv(&ev?)),
        }
    }
    Ok(V::map([("events", V::List(events))]))
}

fn file_event(e: &cowkv::FileEvent) -> V {
    V::map([
        ("type", V::Str(e.kind.as_str_name().to_lowercase())),
        ("path", V::Str(e.path.clone())),
        ("new_path", V::Str(e.new_path.clone())),
        ("revision", V::n(e.revision)),
        ("ino", V::n(e.ino)),
        ("paths_lost", V::Bool(e.paths_lost)),
    ])
}

fn watch_event(e: &cowkv::WatchEvent) -> V {
    let kind = if e.kind == cowkv::EventKind::Put { "put" } else { "delete" };
    let (prev_value, prev_mod) = e.prev_kv.as_ref().map_or((Vec::new(), 0), |p| (p.value.to_vec(), p.mod_revision));
    V::map([
        ("type", V::Str(kind.into())),
        ("key", V::Bytes(e.kv.key.to_vec())),
        ("value", V::Bytes(e.kv.value.to_vec())),
        ("create_revision", V::n(e.kv.create_revision)),
        ("mod_revision", V::n(e.kv.mod_revision)),
        ("version", V::n(e.kv.version)),
        ("has_prev", V::Bool(e.prev_kv.is_some())),
        ("prev_value", V::Bytes(prev_value)),
        ("prev_mod_revision", V::n(prev_mod)),
    ])
}

fn get_result(g: cowkv::GetResult) -> V {
    V::map([
        ("key", V::Bytes(g.kv.key.to_vec())),
        ("value", V::Bytes(g.kv.value.to_vec())),
        ("create_revision", V::n(g.kv.create_revision)),
        ("mod_revision", V::n(g.kv.mod_revision)),
        ("version", V::n(g.kv.version)),
        ("revision", V::n(g.revision)),
    ])
}

fn keys_values(kvs: &[cowkv::KeyValue]) -> V {
    V::map([
        ("keys", V::List(kvs.iter().map(|kv| V::Bytes(kv.key.to_vec())).collect())),
        ("values", V::List(kvs.iter().map(|kv| V::Bytes(kv.value.to_vec())).collect())),
    ])
}

fn stat(st: cowkv::FileStat) -> V {
    V::map([
        ("ino", V::n(st.ino)),
        ("kind", V::Str(st.kind.as_str().into())),
        ("mode", V::n(st.mode)),
        ("nlink", V::n(st.nlink)),
        ("size", V::n(st.size)),
        ("uid", V::n(st.uid)),
        ("gid", V::n(st.gid)),
        ("atime_ns", V::n(st.atime_ns)),
        ("mtime_ns", V::n(st.mtime_ns)),
        ("ctime_ns", V::n(st.ctime_ns)),
    ])
}

/// set_attr's arguments on the builder: an absent one is kept, "now" = the server's clock.
fn set_attr(mut r: cowkv::SetAttr, a: &V) -> cowkv::SetAttr {
    let has = |k: &str| !matches!(a.get(k), None | Some(V::Null));
    if has("mode") {
        r = r.mode(nm(a, "mode") as u32);
    }
    if has("uid") {
        r = r.uid(nm(a, "uid") as u32);
    }
    if has("gid") {
        r = r.gid(nm(a, "gid") as u32);
    }
    if has("size") {
        r = r.size(nm(a, "size"));
    }
    match a.get("atime_ns") {
        Some(V::Str(x)) if x == "now" => r = r.atime_now(),
        Some(V::Int(_)) => r = r.atime_ns(int(a, "atime_ns")),
        _ => {}
    }
    match a.get("mtime_ns") {
        Some(V::Str(x)) if x == "now" => r = r.mtime_now(),
        Some(V::Int(_)) => r = r.mtime_ns(int(a, "mtime_ns")),
        _ => {}
    }
    r
}

fn extent(e: &Extent) -> V {
    let mut flags = Vec::new();
    for (bit, name) in [
        (Extent::FLAG_LAST, "LAST"),
        (Extent::FLAG_NOT_ALIGNED, "NOT_ALIGNED"),
        (Extent::FLAG_INLINE, "INLINE"),
        (Extent::FLAG_SHARED, "SHARED"),
    ] {
        if e.flags & bit != 0 {
            flags.push(V::Str(name.into()));
        }
    }
    V::map([
        ("logical", V::n(e.logical)),
        ("physical", V::n(e.physical)),
        ("length", V::n(e.length)),
        ("flags", V::List(flags)),
    ])
}

// ---- The wire ----

fn base64_encode(b: &[u8]) -> String {
    STANDARD.encode(b)
}

/// A canonical result as JSON: bytes as base64.
fn to_json(v: &V) -> Json {
    match v {
        V::Null => Json::Null,
        V::Bool(b) => Json::Bool(*b),
        V::Int(i) => match (i64::try_from(*i), u64::try_from(*i)) {
            (Ok(x), _) => Json::from(x),
            (_, Ok(x)) => Json::from(x),
            _ => panic!("integer {i} out of range"),
        },
        V::Float(f) => Json::from(*f),
        V::Str(s) => Json::String(s.clone()),
        V::Bytes(b) => Json::String(base64_encode(b)),
        V::List(l) => Json::Array(l.iter().map(to_json).collect()),
        V::Map(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
    }
}

/// A client error: its most specific class, its parents, errno, compact revision.
fn error_answer(e: &Error) -> Json {
    let mut is = Vec::new();
    for (yes, name) in [
        (e.is_failed_precondition(), "failed_precondition"),
        (e.is_resource_exhausted(), "resource_exhausted"),
        (e.is_too_old(), "too_old"),
    ] {
        if yes {
            is.push(Json::from(name));
        }
    }
    let mut m = serde_json::Map::new();
    m.insert("class".into(), Json::from(e.class()));
    m.insert("is".into(), Json::Array(is));
    m.insert("message".into(), Json::from(e.to_string()));
    if let Some(errno) = e.errno_name() {
        m.insert("errno".into(), Json::from(errno));
    }
    if let Some(rev) = e.compact_revision() {
        m.insert("compact_revision".into(), Json::from(rev));
    }
    Json::Object(m)
}

/// Send and receive; a send stream is held whole (scenarios keep it small).
async fn send_op(c: &Client, op: &str, a: &V) -> R {
    Ok(match op {
        "send" => {
            let opts = SendOptions::new().parent(s(a, "parent")).resume_token(s(a, "resume_token"));
            let mut out = Vec::new();
            let st = c.send_to(&mut out, &s(a, "snapshot"), opts).await?;
            V::map([("stream", V::Bytes(out)), ("records", V::n(st.records)), ("bytes", V::n(st.bytes))])
        }
        "receive" => {
            let data = by(a, "stream");
            let cut = (nm(a, "cut_after_bytes") as usize).min(data.len());
            let mut opts = ReceiveOptions::new().name(s(a, "name"));
            if bl(a, "resumable") {
                opts = opts.resumable();
            }
            if bl(a, "dry_run") {
                opts = opts.dry_run();
            }
            let r = c.receive_from(if cut > 0 { &data[..cut] } else { &data[..] }, opts).await?;
            let (name, parent) = (V::Str(r.name), V::Str(r.parent));
            V::map([
                ("name", name),
                ("incremental", V::Bool(r.incremental)),
                ("parent", parent),
                ("records", V::n(r.records)),
            ])
        }
        "partial_receives" => {
            let l = c.partial_receives().await?.into_iter();
            let l =
                l.map(|p| V::map([("name", V::Str(p.name)), ("token", V::Str(p.token)), ("records", V::n(p.records))]));
            V::map([("partials", V::List(l.collect()))])
        }
        "abort_receive" => {
            c.abort_receive(&s(a, "name")).await?;
            V::empty()
        }
        _ => V::map([("digest", V::Str(c.digest(&s(a, "subvolume")).await?))]),
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut ctx = Ctx::default();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line.expect("stdin");
        if line.trim().is_empty() {
            continue;
        }
        let req: Json = serde_json::from_str(&line).expect("a JSON request");
        let op = req["op"].as_str().unwrap_or_default().to_string();
        let args = from_json(&req["args"]);
        let result = match op.as_str() {
            "connect" => ctx.connect(&args),
            "reset" => {
                ctx.reset();
                Ok(V::empty())
            }
            _ => Box::pin(ctx.call(&op, &args)).await,
        };
        let mut answer = serde_json::Map::new();
        answer.insert("id".into(), req["id"].clone());
        match result {
            Ok(v) => answer.insert("result".into(), to_json(&v)),
            Err(e) => answer.insert("error".into(), error_answer(&e)),
        };
        writeln!(out, "{}", Json::Object(answer)).expect("stdout");
        out.flush().expect("stdout");
    }
}
