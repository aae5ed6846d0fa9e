//! Runs clients/conformance/scenarios.json (format: its README.md) through
//! the public API of this crate against live cowkvd servers: one shared
//! server, plus a dedicated one per scenario that asks for it. Prints one
//! line per scenario; fails with every failing scenario listed.
//! COWKV_SCENARIO=name runs one scenario; COWKV_CONFORMANCE=path another file.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::Server;
use cowkv::{
    Client, Compare, Durability, Error, Extent, Op, OpResult, Options, Range, Subvolume, Transaction,
    TransactionOptions, WriteOptions, RENAME_EXCHANGE, RENAME_NOREPLACE,
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

/// `{"base64": ..}` or `{"fill": .., "size": ..}`.
fn bytes_spec(v: &V) -> Option<Vec<u8>> {
    let V::Map(m) = v else { return None };
    if m.len() == 1 {
        if let Some(V::Str(s)) = m.get("base64") {
            return Some(base64_decode(s));
        }
    }
    if m.len() == 2 {
        if let (Some(V::Str(fill)), Some(V::Int(size))) = (m.get("fill"), m.get("size")) {
            let f = fill.as_bytes();
            return Some((0..*size as usize).map(|i| f[i % f.len()]).collect());
        }
    }
    None
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 {s:?}"),
        }
    };
    let clean: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in clean.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c) << (18 - 6 * i);
        }
        let n = chunk.len() * 6 / 8;
        out.extend_from_slice(&acc.to_be_bytes()[1..1 + n]);
    }
    out
}

fn to_bytes(v: &V) -> Vec<u8> {
    match v {
        V::Bytes(b) => b.clone(),
        V::Str(s) => s.as_bytes().to_vec(),
        V::Null => Vec::new(),
        other => bytes_spec(other).unwrap_or_else(|| panic!("not bytes: {}", show(other))),
    }
}

// ---- Matching (README, "Matching"): Ok = matches, Err(why) ----

fn num(v: &V) -> Option<f64> {
    match v {
        V::Int(i) => Some(*i as f64),
        V::Float(f) => Some(*f),
        _ => None,
    }
}

fn cmp_num(a: &V, b: &V) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (V::Int(x), V::Int(y)) => Some(x.cmp(y)),
        _ => num(a)?.partial_cmp(&num(b)?),
    }
}

fn scalar_eq(want: &V, got: &V) -> bool {
    match (want, got) {
        (V::Str(_) | V::Bytes(_), V::Bytes(g)) => to_bytes(want) == *g,
        (V::Bytes(w), V::Str(g)) => w == g.as_bytes(),
        (V::Int(_) | V::Float(_), V::Int(_) | V::Float(_)) => cmp_num(want, got) == Some(std::cmp::Ordering::Equal),
        _ => want == got,
    }
}

fn matches(want: &V, got: &V, path: &str) -> Result<(), String> {
    if let Some(b) = bytes_spec(want) {
        return matches(&V::Bytes(b), got, path);
    }
    match want {
        V::Map(m) if !m.is_empty() && m.keys().all(|k| k.starts_with('$')) => {
            for (op, arg) in m {
                matcher(op, arg, got, path)?;
            }
            Ok(())
        }
        V::Map(m) => {
            let V::Map(g) = got else { return Err(format!("{path}: want an object, got {}", show(got))) };
            for (k, w) in m {
                let gv = g.get(k).ok_or_else(|| format!("{path}.{k}: missing"))?;
                matches(w, gv, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        V::List(wl) => match got {
            V::List(gl) if gl.len() == wl.len() => {
                for (i, (w, g)) in wl.iter().zip(gl).enumerate() {
                    matches(w, g, &format!("{path}.{i}"))?;
                }
                Ok(())
            }
            _ => Err(format!("{path}: want {}, got {}", show(want), show(got))),
        },
        _ if scalar_eq(want, got) => Ok(()),
        _ => Err(format!("{path}: want {}, got {}", show(want), show(got))),
    }
}

fn matcher(op: &str, arg: &V, got: &V, path: &str) -> Result<(), String> {
    use std::cmp::Ordering::*;
    let fail = || Err(format!("{path}: want {op} {}, got {}", show(arg), show(got)));
    match op {
        "$gt" | "$ge" | "$lt" | "$le" => {
            let ok = match cmp_num(got, arg) {
                Some(c) => match op {
                    "$gt" => c == Greater,
                    "$ge" => c != Less,
                    "$lt" => c == Less,
                    _ => c != Greater,
                },
                None => false,
            };
            if ok {
                Ok(())
            } else {
                fail()
            }
        }
        "$ne" => {
            if matches(arg, got, path).is_ok() {
                fail()
            } else {
                Ok(())
            }
        }
        "$len" | "$min_len" => {
            let V::List(l) = got else { return fail() };
            let n = match arg {
                V::Int(n) => *n as usize,
                _ => return fail(),
            };
            let ok = if op == "$len" { l.len() == n } else { l.len() >= n };
            if ok {
                Ok(())
            } else {
                fail()
            }
        }
        "$contains" | "$not_contains" | "$all" => {
            let V::List(l) = got else { return fail() };
            let hits = l.iter().filter(|x| matches(arg, x, path).is_ok()).count();
            let ok = match op {
                "$contains" => hits > 0,
                "$not_contains" => hits == 0,
                _ => hits == l.len(),
            };
            if ok {
                Ok(())
            } else {
                fail()
            }
        }
        _ => Err(format!("{path}: unknown matcher {op}")),
    }
}

// ---- One scenario ----

struct Ctx {
    name: String,
    client_side: bool,
    vars: HashMap<String, V>,
    txs: HashMap<String, Transaction>,
    handles: HashMap<String, cowkv::FileHandle>,
    watches: HashMap<String, cowkv::Watcher>,
    file_watches: HashMap<String, cowkv::Watcher<cowkv::FileEvent>>,
    unnamed: Vec<Transaction>,
    own: Option<Server>,
    shared_address: String,
    address: String,
    token: Option<String>,
    deadline: Option<Duration>,
    client: Client,
}

type R = Result<V, Error>;

impl Ctx {
    fn connect(&mut self) {
        let mut o = Options::new(self.address.clone()).deadline(self.deadline);
        if let Some(t) = &self.token {
            o = o.token(t.clone());
        }
        self.client = Client::connect(o).expect("connect");
    }

    fn expand(&self, v: &V) -> V {
        match v {
            V::Str(s) => {
                if let Some(name) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
                    if !name.contains('$') && !name.contains('{') {
                        return self.var(name);
                    }
                }
                let mut out = String::new();
                let mut rest = s.as_str();
                while let Some(i) = rest.find("${") {
                    out.push_str(&rest[..i]);
                    let end = rest[i..].find('}').map(|e| i + e).unwrap_or_else(|| panic!("unclosed ${{ in {s:?}"));
                    match self.var(&rest[i + 2..end]) {
                        V::Str(x) => out.push_str(&x),
                        V::Bytes(b) => out.push_str(&String::from_utf8_lossy(&b)),
                        V::Int(n) => out.push_str(&n.to_string()),
                        other => out.push_str(&show(&other)),
                    }
                    rest = &rest[end + 1..];
                }
                out.push_str(rest);
                V::Str(out)
            }
            V::List(l) => V::List(l.iter().map(|x| self.expand(x)).collect()),
            V::Map(m) => V::Map(
                m.iter().map(|(k, x)| (k.clone(), if k == "step" { x.clone() } else { self.expand(x) })).collect(),
            ),
            other => other.clone(),
        }
    }

    fn var(&self, name: &str) -> V {
        self.vars.get(name).cloned().unwrap_or_else(|| panic!("scenario: undefined variable ${{{name}}}"))
    }

    fn sv(&self, a: &V) -> Result<Subvolume, Error> {
        self.client.subvolume(&s(a, "sv"))
    }

    fn handle(&self, a: &V) -> cowkv::Result<cowkv::FileHandle> {
        let n = s(a, "h");
        Ok(self.handles.get(&n).cloned().unwrap_or_else(|| panic!("no handle named {n}")))
    }

    fn tx(&self, a: &V) -> Transaction {
        let n = s(a, "tx");
        self.txs.get(&n).cloned().unwrap_or_else(|| panic!("no transaction named {n}"))
    }

    fn server(&mut self, op: &str) -> &mut Server {
        self.own.as_mut().unwrap_or_else(|| panic!("{op} needs a scenario with its own \"server\""))
    }

    /// Runs one step; Err(why) on a mismatch.
    async fn step(&mut self, step: &V, where_: &str) -> Result<(), String> {
        let op = s(step, "op");
        let where_ = format!("{where_} ({op})");
        let args = self.expand(step.get("args").unwrap_or(&V::empty()));
        let expect = step.get("expect").map(|e| self.expand(e));
        let result = Box::pin(self.call(&op, &args)).await;
        match (result, &expect) {
            (Err(e), Some(exp)) if exp.get("error").is_some() => {
                let want = s(exp, "error");
                let is_a = match want.as_str() {
                    "read_only" => e.is_failed_precondition(),
                    "no_space" => e.is_resource_exhausted(),
                    "compacted" => e.is_too_old(),
                    _ => true,
                };
                if e.class() != want || !is_a {
                    return Err(format!("{where_}: want error {want}, got {}: {e}", e.class()));
                }
                if let Some(cr) = exp.get("compact_revision") {
                    let got = V::n(e.compact_revision().unwrap_or(0));
                    matches(cr, &got, "compact_revision").map_err(|why| format!("{where_}: {why}"))?;
                }
                if let Some(V::Str(errno)) = exp.get("errno") {
                    if e.errno_name() != Some(errno.as_str()) {
                        return Err(format!("{where_}: want errno {errno}, got {:?}: {e}", e.errno_name()));
                    }
                }
                Ok(())
            }
            (Err(e), _) => Err(format!("{where_}: unexpected error {}: {e}", e.class())),
            (Ok(got), exp) => {
                if let Some(exp) = exp {
                    if let Some(w) = exp.get("error") {
                        return Err(format!("{where_}: want error {}, got result {}", show(w), show(&got)));
                    }
                    if let Some(w) = exp.get("result") {
                        matches(w, &got, "result").map_err(|why| format!("{where_}: {why}\n  got {}", show(&got)))?;
                    }
                }
                if let Some(V::Map(save)) = step.get("save") {
                    for (var, path) in save {
                        let V::Str(path) = path else { panic!("save path") };
                        let mut cur = &got;
                        for part in path.split('.') {
                            cur = match cur {
                                V::Map(m) => m.get(part),
                                V::List(l) => part.parse::<usize>().ok().and_then(|i| l.get(i)),
                                _ => None,
                            }
                            .ok_or_else(|| format!("{where_}: nothing at {path} in {}", show(&got)))?;
                        }
                        self.vars.insert(var.clone(), cur.clone());
                    }
                }
                Ok(())
            }
        }
    }

    async fn call(&mut self, op: &str, a: &V) -> R {
        let c = self.client.clone();
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
                let mut events = Vec::new();
                while events.len() < nm(a, "count") as usize {
                    match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
                        Err(_) => panic!("no event within 10 s after {}", events.len()),
                        Ok(None) => panic!("the watcher ended without a reason"),
                        Ok(Some(ev)) => events.push(file_event(&ev?)),
                    }
                }
                V::map([("events", V::List(events))])
            }
            "watch_cancel" if self.file_watches.contains_key(&s(a, "w")) => {
                let mut w = self.file_watches.remove(&s(a, "w")).expect("no such watcher");
                w.cancel();
                let mut events = Vec::new();
                loop {
                    match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
                        Err(_) => panic!("the watcher did not end within 10 s"),
                        Ok(None) => break,
                        Ok(Some(ev)) => events.push(file_event(&ev?)),
                    }
                }
                V::map([("events", V::List(events))])
            }
            "watch_next" => {
                let w = self.watches.get_mut(&s(a, "w")).expect("no such watcher");
                let mut events = Vec::new();
                while events.len() < nm(a, "count") as usize {
                    match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
                        Err(_) => panic!("no event within 10 s after {}", events.len()),
                        Ok(None) => panic!("the watcher ended without a reason"),
                        Ok(Some(ev)) => events.push(watch_event(&ev?)),
                    }
                }
                V::map([("events", V::List(events))])
            }
            "watch_cancel" => {
                let mut w = self.watches.remove(&s(a, "w")).expect("no such watcher");
                w.cancel();
                let mut events = Vec::new();
                loop {
                    match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
                        Err(_) => panic!("the watcher did not end within 10 s"),
                        Ok(None) => break,
                        Ok(Some(ev)) => events.push(watch_event(&ev?)),
                    }
                }
                V::map([("events", V::List(events))])
            }

            "sync" => V::map([("generation", V::n(c.sync().await?))]),
            "check" => V::map([("ok", V::Bool(c.check(Some(Duration::from_secs(300))).await?.ok))]),

            "connect" => {
                self.token = a.get("token").map(|_| s(a, "token"));
                let ms = nm(a, "deadline_ms");
                self.deadline = Some(if ms > 0 { Duration::from_millis(ms) } else { cowkv::DEFAULT_DEADLINE });
                self.connect();
                V::empty()
            }
            "stop_server" => {
                self.server(op).stop();
                V::empty()
            }
            "restart_server" => {
                let (off, len) = (nm(a, "corrupt_offset"), nm(a, "corrupt_length"));
                let srv = self.server(op);
                srv.stop();
                if len > 0 {
                    corrupt(&srv.device(), off, len as usize);
                }
                srv.restart();
                let addr = srv.address();
                if !self.client_side {
                    self.address = addr;
                }
                self.connect();
                V::empty()
            }
            "pause_server" => {
                self.server(op).pause();
                V::empty()
            }
            "resume_server" => {
                self.server(op).resume();
                V::empty()
            }
            "sleep" => {
                tokio::time::sleep(Duration::from_millis(nm(a, "ms"))).await;
                V::empty()
            }
            "repeat" => {
                let inner = a.get("step").cloned().expect("repeat needs a step");
                for i in 0..nm(a, "times") {
                    if let Err(why) = Box::pin(self.step(&inner, &format!("repeat {i}"))).await {
                        panic!("{why}");
                    }
                }
                V::empty()
            }
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
        Some(other) => String::from_utf8(to_bytes(other)).expect("utf-8"),
    }
}

fn by(a: &V, k: &str) -> Vec<u8> {
    a.get(k).map(to_bytes).unwrap_or_default()
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

fn corrupt(device: &std::path::Path, offset: u64, len: usize) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(device).expect("device");
    let mut buf = vec![0u8; len];
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.read_exact(&mut buf).unwrap();
    for x in &mut buf {
        *x ^= 0xFF;
    }
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(&buf).unwrap();
    f.sync_all().unwrap();
}

fn dead_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

fn scenario_file() -> PathBuf {
    match std::env::var_os("COWKV_CONFORMANCE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conformance/scenarios.json"),
    }
}

async fn run_scenario(spec: &V, client_side: bool, shared: &str, run: &str) -> Result<(), String> {
    let name = s(spec, "name");
    let mut vars = HashMap::new();
    vars.insert("run".to_string(), V::Str(run.to_string()));
    vars.insert("sv".to_string(), V::Str(format!("c-{run}-{name}")));
    let mut ctx = Ctx {
        name: name.clone(),
        client_side,
        vars,
        txs: HashMap::new(),
        handles: HashMap::new(),
        watches: HashMap::new(),
        file_watches: HashMap::new(),
        unnamed: Vec::new(),
        own: None,
        shared_address: shared.to_string(),
        address: String::new(),
        token: None,
        deadline: Some(cowkv::DEFAULT_DEADLINE),
        client: Client::connect(Options::new(shared)).unwrap(),
    };
    if let Some(srv) = spec.get("server") {
        let srv = ctx.expand(srv);
        let size = srv.get("create_size").map(|_| s(&srv, "create_size")).unwrap_or_else(|| "32M".into());
        let token = srv.get("auth_token").map(|_| s(&srv, "auth_token"));
        ctx.own = Some(Server::start(&size, token.as_deref()));
    }
    let server_address = ctx.own.as_ref().map(|s| s.address()).unwrap_or_else(|| ctx.shared_address.clone());
    ctx.address = if client_side { dead_address() } else { server_address };
    ctx.connect();
    let label = format!("{}{}", ctx.name, if client_side { " [client-side]" } else { "" });
    let steps = match spec.get("steps") {
        Some(V::List(l)) => l.clone(),
        _ => Vec::new(),
    };
    for (i, st) in steps.iter().enumerate() {
        ctx.step(st, &format!("{label} step {i}")).await?;
    }
    drop(ctx.unnamed);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_scenarios() {
    let text = std::fs::read_to_string(scenario_file()).expect("scenarios.json");
    let file: Json = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(file["format"], 1, "unknown scenario format");
    let run = format!("{:08x}", {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        (t.as_nanos() as u64 ^ (std::process::id() as u64) << 20) as u32
    });
    let only = std::env::var("COWKV_SCENARIO").unwrap_or_default();
    let shared = Server::start("256M", None);
    let mut failures = Vec::new();
    let mut passed = 0;
    for sc in file["scenarios"].as_array().expect("scenarios") {
        let spec = from_json(sc);
        let name = s(&spec, "name");
        if !only.is_empty() && only != name {
            continue;
        }
        let mut variants = vec![false];
        if bl(&spec, "client_side") {
            variants.push(true);
        }
        for client_side in variants {
            let label = format!("{name}{}", if client_side { " [client-side]" } else { "" });
            let t0 = std::time::Instant::now();
            match run_scenario(&spec, client_side, &shared.address(), &run).await {
                Ok(()) => {
                    passed += 1;
                    println!("scenario {label} ... ok ({:.1} s)", t0.elapsed().as_secs_f64());
                }
                Err(why) => {
                    println!("scenario {label} ... FAILED\n  {why}");
                    failures.push(why);
                }
            }
        }
    }
    println!("conformance: {passed} passed, {} failed", failures.len());
    assert!(passed > 0, "no scenario ran");
    assert!(failures.is_empty(), "{} scenario(s) failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn matcher_semantics() {
    let j = |s: &str| from_json(&serde_json::from_str::<Json>(s).unwrap());
    let got = V::map([
        ("keys", V::List(vec![V::Bytes(b"a".to_vec()), V::Bytes(b"b".to_vec())])),
        ("n", V::n(5u64)),
        ("name", V::Str("x".into())),
    ]);
    assert!(matches(&j(r#"{"keys": ["a", "b"], "n": 5}"#), &got, "r").is_ok());
    assert!(matches(&j(r#"{"keys": ["a"]}"#), &got, "r").is_err());
    assert!(matches(&j(r#"{"n": {"$gt": 4, "$le": 5}}"#), &got, "r").is_ok());
    assert!(matches(&j(r#"{"n": {"$gt": 5}}"#), &got, "r").is_err());
    assert!(matches(&j(r#"{"keys": {"$len": 2, "$contains": "b", "$not_contains": "c"}}"#), &got, "r").is_ok());
    assert!(matches(&j(r#"{"keys": {"$all": {"$ne": "c"}, "$min_len": 2}}"#), &got, "r").is_ok());
    assert!(matches(&j(r#"{"missing": 1}"#), &got, "r").is_err());
    assert!(matches(&j(r#"{"name": "x"}"#), &got, "r").is_ok());
    assert!(matches(&j(r#"{"keys": [{"base64": "YQ=="}, {"fill": "b", "size": 1}]}"#), &got, "r").is_ok());
    assert_eq!(base64_decode("AP8Aaw=="), vec![0, 255, 0, b'k']);
    assert_eq!(bytes_spec(&j(r#"{"fill": "ab", "size": 5}"#)), Some(b"ababa".to_vec()));
}
