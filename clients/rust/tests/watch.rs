//! Watch against a live cowkvd ($COWKVD or ../../bazel-bin/server/cowkvd).
//!
//! Goal: `Subvolume::watch` does what docs/api.md "Watch" says through this
//! client: events of puts, deletes and txns in revision order with prev_kv,
//! prefixes, a replay from an older revision, filters, cancel and drop
//! ending the stream, typed ends (`Error::Compacted` with the compact
//! revision, `Error::SubvolumeDeleted`), a fragmented revision joined, and
//! refused creates. Method: direct cases, and a seeded random walk of puts,
//! deletes and txns whose watcher's events must equal the model's change
//! list. Replay: COWKV_WATCH_SEED=N cargo test --test watch.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;

use cowkv::{Client, Error, EventKind, Op, Options, Subvolume, WatchEvent, WatchOptions, Watcher};

async fn fresh(client: &Client, name: &str) -> Subvolume {
    client.create_subvolume(name).await.unwrap();
    client.subvolume(name).unwrap()
}

/// The next n events, within 10 s.
async fn take(w: &mut Watcher, n: usize) -> Vec<WatchEvent> {
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
            Err(_) => panic!("only {} events within 10 s", out.len()),
            Ok(None) => panic!("the watcher ended after {} events", out.len()),
            Ok(Some(ev)) => out.push(ev.unwrap()),
        }
    }
    out
}

fn describe(evs: &[WatchEvent]) -> String {
    let one = |e: &WatchEvent| {
        let v = String::from_utf8_lossy(&e.kv.value);
        let k = String::from_utf8_lossy(&e.kv.key);
        let prev = e.prev_kv.as_ref().map_or("-".to_string(), |p| String::from_utf8_lossy(&p.value).into_owned());
        format!("{:?} {k}={v}@{}(prev {prev})", e.kind, e.revision())
    };
    evs.iter().map(one).collect::<Vec<_>>().join("; ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_client_checks() {
    let client = Client::connect(Options::new("127.0.0.1:1")).unwrap(); // never contacted
    let sv = client.subvolume("").unwrap();
    assert!(matches!(sv.watch("", WatchOptions::new()).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(sv.watch(vec![b'k'; 1025], WatchOptions::new()).await, Err(Error::InvalidArgument(_))));
    let both = WatchOptions::new().prefix().range_end("b");
    assert!(matches!(sv.watch("a", both).await, Err(Error::InvalidArgument(_))));
    assert_eq!(&cowkv::prefix_end(b"a/")[..], b"a0");
    assert_eq!(&cowkv::prefix_end(&[0xff, 0xff])[..], &[0u8][..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_live() {
    let server = common::Server::start("128M", None);
    // Short deadlines: a watcher must outlive them.
    let short = Some(Duration::from_millis(1500));
    let client = Client::connect(Options::new(server.address()).deadline(short).stream_deadline(short)).unwrap();
    events(&fresh(&client, "events").await).await;
    history(&fresh(&client, "history").await).await;
    filters(&fresh(&client, "filters").await).await;
    ends(&fresh(&client, "ends").await).await;
    deleted(&client, &fresh(&client, "deleted").await).await;
    fragments(&fresh(&client, "fragments").await).await;
    let unknown = client.subvolume("no-such").unwrap().watch("k", WatchOptions::new()).await;
    assert!(matches!(unknown, Err(Error::NotFound(_))), "{unknown:?}");
    let backwards = fresh(&client, "refused").await.watch("b", WatchOptions::new().range_end("a")).await;
    assert!(matches!(backwards, Err(Error::InvalidArgument(_))), "{backwards:?}");
    model(&fresh(&client, "model").await).await;
}

async fn events(sv: &Subvolume) {
    let mut w = sv.watch("cfg/", WatchOptions::new().prefix().prev_kv()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await; // past the deadlines
    let r1 = sv.put("cfg/a", "1").await.unwrap();
    let r2 = sv.put("cfg/a", "2").await.unwrap();
    sv.put("cfg0", "outside").await.unwrap();
    let r3 = sv.delete("cfg/a").await.unwrap();
    let t = sv.txn().then([Op::put("cfg/b", "x"), Op::put("cfg/c", "y")]).commit().await.unwrap();
    let want = format!(
        "Put cfg/a=1@{r1}(prev -); Put cfg/a=2@{r2}(prev 1); Delete cfg/a=@{r3}(prev 2); \
         Put cfg/b=x@{0}(prev -); Put cfg/c=y@{0}(prev -)",
        t.revision
    );
    assert_eq!(describe(&take(&mut w, 5).await), want);
    assert!(w.revision() >= r1);
}

async fn history(sv: &Subvolume) {
    let r1 = sv.put("h", "1").await.unwrap();
    let r2 = sv.put("h", "2").await.unwrap();
    let r3 = sv.put("h", "3").await.unwrap();
    let mut w = sv.watch("h", WatchOptions::new().start_revision(r1)).await.unwrap();
    let want = format!("Put h=1@{r1}(prev -); Put h=2@{r2}(prev -); Put h=3@{r3}(prev -)");
    assert_eq!(describe(&take(&mut w, 3).await), want);
    drop(w);
    assert_eq!(sv.compact(r2).await.unwrap(), r2);
    for start in [r1, r2] {
        // Created, then ended at once: the history read fails.
        let mut w = sv.watch("h", WatchOptions::new().start_revision(start)).await.unwrap();
        let end = tokio::time::timeout(Duration::from_secs(10), w.next()).await.unwrap();
        match end {
            Some(Err(e @ Error::Compacted { .. })) => {
                assert_eq!(e.compact_revision(), Some(r2 + 1));
                assert!(e.is_too_old() && e.class() == "compacted");
            }
            other => panic!("start {start} after compact({r2}): {other:?}"),
        }
        assert!(w.next().await.is_none(), "nothing after the end");
    }
    let mut w = sv.watch("h", WatchOptions::new().start_revision(r2 + 1)).await.unwrap();
    assert_eq!(describe(&take(&mut w, 1).await), format!("Put h=3@{r3}(prev -)"));
}

async fn filters(sv: &Subvolume) {
    let mut np = sv.watch("f", WatchOptions::new().no_put()).await.unwrap();
    let mut nd = sv.watch("f", WatchOptions::new().no_delete()).await.unwrap();
    let p1 = sv.put("f", "1").await.unwrap();
    let d = sv.delete("f").await.unwrap();
    let p2 = sv.put("f", "2").await.unwrap();
    assert_eq!(describe(&take(&mut np, 1).await), format!("Delete f=@{d}(prev -)"));
    assert_eq!(describe(&take(&mut nd, 2).await), format!("Put f=1@{p1}(prev -); Put f=2@{p2}(prev -)"));
}

async fn ends(sv: &Subvolume) {
    let mut w = sv.watch("quiet", WatchOptions::new()).await.unwrap();
    w.cancel();
    let end = tokio::time::timeout(Duration::from_secs(5), w.next()).await.expect("cancel ends the stream");
    assert!(end.is_none(), "{end:?}");
    // A put after the cancel is not seen, and the stream stays ended.
    sv.put("quiet", "x").await.unwrap();
    assert!(w.next().await.is_none());
}

async fn deleted(client: &Client, sv: &Subvolume) {
    let mut w = sv.watch("k", WatchOptions::new()).await.unwrap();
    sv.put("k", "v").await.unwrap();
    take(&mut w, 1).await;
    client.delete_subvolume(sv.name()).await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), w.next()).await.unwrap();
    match end {
        Some(Err(e @ Error::SubvolumeDeleted(_))) => assert_eq!(e.class(), "subvolume_deleted"),
        other => panic!("after the delete: {other:?}"),
    }
}

async fn fragments(sv: &Subvolume) {
    let mut w = sv.watch("big/", WatchOptions::new().prefix()).await.unwrap();
    let ops: Vec<Op> = (0..3u8).map(|i| Op::put(format!("big/{i}"), vec![b'a' + i; 700_000])).collect();
    let t = sv.txn().then(ops).commit().await.unwrap();
    for (i, ev) in take(&mut w, 3).await.iter().enumerate() {
        assert_eq!(ev.revision(), t.revision);
        assert_eq!(ev.kv.value.len(), 700_000);
        assert_eq!(ev.kv.value[0], b'a' + i as u8);
    }
}

/// Random puts, deletes and two-key txns on a few keys; a prefix watcher
/// with prev_kv started before them reports exactly the model's changes,
/// and one started from an older revision the changes from there.
async fn model(sv: &Subvolume) {
    let seed: u64 = std::env::var("COWKV_WATCH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    let mut state = seed | 1;
    let mut rnd = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut w = sv.watch("m/", WatchOptions::new().prefix().prev_kv()).await.unwrap();
    let mut model: BTreeMap<String, String> = BTreeMap::new();
    let mut want: Vec<(u64, String)> = Vec::new();
    let mut mid = 0;
    for i in 0..100 {
        let k = format!("m/{}", rnd(4));
        match rnd(10) {
            0..=4 => {
                change(&mut model, &mut want, &k, Some(format!("v{i}")), sv.put(&k, format!("v{i}")).await.unwrap())
            }
            5..=7 => {
                if model.contains_key(&k) {
                    change(&mut model, &mut want, &k, None, sv.delete(&k).await.unwrap());
                }
            }
            _ => {
                let k2 = format!("m/{}", 4 + rnd(2));
                let v = format!("t{i}");
                let t = sv.txn().then([Op::put(&k, &v), Op::put(&k2, &v)]).commit().await.unwrap();
                change(&mut model, &mut want, &k, Some(v.clone()), t.revision);
                change(&mut model, &mut want, &k2, Some(v), t.revision);
            }
        }
        if i == 50 {
            mid = want.len();
        }
    }
    let lines = |evs: Vec<WatchEvent>| evs.iter().map(|e| describe(std::slice::from_ref(e))).collect::<Vec<_>>();
    let all: Vec<String> = want.iter().map(|(_, s)| s.clone()).collect();
    assert_eq!(lines(take(&mut w, want.len()).await), all, "seed {seed}");
    if mid < want.len() {
        let mut late =
            sv.watch("m/", WatchOptions::new().prefix().prev_kv().start_revision(want[mid].0)).await.unwrap();
        assert_eq!(lines(take(&mut late, want.len() - mid).await), all[mid..].to_vec(), "seed {seed}");
    }
    let _ = EventKind::Put;
}

/// Applies one change to the model and records the event it must give.
fn change(model: &mut BTreeMap<String, String>, want: &mut Vec<(u64, String)>, k: &str, v: Option<String>, rev: u64) {
    let prev = model.get(k).cloned().unwrap_or_else(|| "-".into());
    match v {
        Some(v) => {
            want.push((rev, format!("Put {k}={v}@{rev}(prev {prev})")));
            model.insert(k.to_string(), v);
        }
        None => {
            want.push((rev, format!("Delete {k}=@{rev}(prev {prev})")));
            model.remove(k);
        }
    }
}

/// watch_files: create, write, rename, unlink under a prefix in order with
/// rising revisions, nothing from outside it; a start revision replays the
/// same; a read-only snapshot and an unknown subvolume are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_files_live() {
    let server = common::Server::start("128M", None);
    let client = Client::connect(Options::new(server.address())).unwrap();
    let sv = fresh(&client, "fw").await;
    sv.put("k0", "v").await.unwrap(); // a KV write first: see clients/go/filewatch_test.go
    let fs = sv.files();
    fs.mkdir("d").await.unwrap();
    let mut w = sv.watch_files("d/", WatchOptions::new()).await.unwrap();
    let st = fs.create("d/a").await.unwrap();
    fs.create("outside").await.unwrap();
    fs.write_with("d/a", "hello", cowkv::WriteOptions::default()).await.unwrap();
    fs.rename("d/a", "d/b").await.unwrap();
    fs.unlink("d/b").await.unwrap();
    let want = "CREATE d/a>; MODIFY d/a>; RENAME d/a>d/b; UNLINK d/b>";
    let evs = take_files(&mut w, 4).await;
    assert_eq!(show_files(&evs), want);
    assert!(evs.windows(2).all(|p| p[0].revision < p[1].revision), "{evs:?}");
    assert!(evs.iter().all(|e| e.ino == st.ino), "{evs:?}");
    w.cancel();
    assert!(w.next().await.is_none());
    let mut again = sv.watch_files("d", WatchOptions::new().start_revision(evs[0].revision)).await.unwrap();
    let evs2 = take_files(&mut again, 4).await;
    assert_eq!(evs2, evs);
    client.snapshot("fw", "fw-ro", true).await.unwrap();
    let ro = client.subvolume("fw-ro").unwrap().watch_files("", WatchOptions::new()).await;
    assert!(matches!(ro, Err(Error::ReadOnly(_))), "{ro:?}");
    let unknown = client.subvolume("no-such").unwrap().watch_files("", WatchOptions::new()).await;
    assert!(matches!(unknown, Err(Error::NotFound(_))), "{unknown:?}");
    let bad = sv.watch_files("", WatchOptions::new().prev_kv()).await;
    assert!(matches!(bad, Err(Error::InvalidArgument(_))), "{bad:?}");
}

async fn take_files(w: &mut Watcher<cowkv::FileEvent>, n: usize) -> Vec<cowkv::FileEvent> {
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
            Err(_) => panic!("only {} events within 10 s: {out:?}", out.len()),
            Ok(None) => panic!("the watcher ended after {} events", out.len()),
            Ok(Some(ev)) => out.push(ev.unwrap()),
        }
    }
    out
}

fn show_files(evs: &[cowkv::FileEvent]) -> String {
    evs.iter().map(|e| format!("{} {}>{}", e.kind.as_str_name(), e.path, e.new_path)).collect::<Vec<_>>().join("; ")
}

/// The watchers of one client share KV.Watch streams: 60 watchers work on a
/// server that lets a client have only 3 calls in flight (a stream per
/// watcher would be refused past the third); each gets its own key's
/// events; cancelling or dropping a third each leaves the others' events
/// intact; a reader that falls behind its client-side bound ends alone
/// (SlowReader) while another watcher of the same stream gets every event;
/// after the last watcher closed, a new watch opens a new stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_shared_streams() {
    let server = common::Server::start_with("256M", &["--max-calls-per-client", "3"]);
    let client = Client::connect(Options::new(server.address())).unwrap();
    let sv = fresh(&client, "shared").await;
    const N: usize = 60;
    let mut ws: Vec<Option<Watcher>> = Vec::new();
    for i in 0..N {
        ws.push(Some(sv.watch(format!("s/{i}"), WatchOptions::new()).await.unwrap()));
    }
    for i in 0..N {
        sv.put(format!("s/{i}"), "a").await.unwrap();
    }
    for (i, w) in ws.iter_mut().enumerate() {
        let ev = take(w.as_mut().unwrap(), 1).await;
        assert_eq!(ev[0].kv.key.as_ref(), format!("s/{i}").as_bytes(), "watcher {i}");
    }
    for i in (0..N).step_by(3) {
        ws[i].as_mut().unwrap().cancel(); // a third cancelled, a third dropped
        ws[i + 1] = None;
    }
    for i in 0..N {
        sv.put(format!("s/{i}"), "b").await.unwrap();
    }
    for (i, w) in ws.iter_mut().enumerate() {
        match (i % 3, w) {
            (0, Some(w)) => assert!(w.next().await.is_none(), "cancelled watcher {i} yielded"),
            (1, None) => {}
            (2, Some(w)) => assert_eq!(take(w, 1).await[0].kv.value.as_ref(), b"b", "watcher {i}"),
            _ => unreachable!(),
        }
    }

    // A slow reader and a fast one on the same stream: over 16 MiB of
    // unread events end the slow one alone.
    let mut slow = sv.watch("big", WatchOptions::new()).await.unwrap();
    let mut fast = sv.watch("big", WatchOptions::new()).await.unwrap();
    let puts = 20;
    let reader = tokio::spawn(async move {
        for _ in 0..puts {
            fast.next().await.unwrap().unwrap();
        }
        fast
    });
    for i in 0..puts {
        sv.put("big", vec![i as u8; 1 << 20]).await.unwrap();
    }
    let _fast = tokio::time::timeout(Duration::from_secs(60), reader).await.unwrap().unwrap();
    let mut seen = 0;
    loop {
        match slow.next().await {
            Some(Ok(_)) => seen += 1,
            Some(Err(Error::SlowReader(_))) => break,
            other => panic!("slow watcher after {seen} events: {other:?}"),
        }
    }
    assert!(seen < puts, "the slow watcher got every event");
    for (i, w) in ws.iter_mut().enumerate() {
        if let (2, Some(w)) = (i % 3, w) {
            sv.put(format!("s/{i}"), "c").await.unwrap();
            assert_eq!(take(w, 1).await[0].kv.value.as_ref(), b"c", "watcher {i} after the slow reader");
        }
    }
    drop(ws);
    drop(slow);
    drop(_fast);
    // Every watcher gone: the stream closed; a new watch opens another
    // (within the 3 calls).
    let mut again = sv.watch("again", WatchOptions::new()).await.unwrap();
    sv.put("again", "x").await.unwrap();
    assert_eq!(take(&mut again, 1).await[0].kv.value.as_ref(), b"x");
}
