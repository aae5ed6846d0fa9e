//! Leases against a live cowkvd ($COWKVD or ../../bazel-bin/server/cowkvd).
//!
//! Goal: the lease surface (grant, put/Op with a lease, time_to_live, list,
//! revoke, keep_alive_once, the background keep_alive) does what docs/api.md
//! "Leases" says, with expiry and errors. Method: direct cases with TTLs of
//! 1-2 s, and a seeded random walk of grants, puts with and without leases,
//! deletes and revokes checked against a model after every step.
//! Replay: COWKV_LEASE_SEED=N cargo test --test lease model.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cowkv::{Client, Durability, Error, Op, Options, Range, Subvolume};

async fn fresh(client: &Client, name: &str) -> Subvolume {
    client.create_subvolume(name).await.unwrap();
    client.subvolume(name).unwrap()
}

async fn keys(sv: &Subvolume) -> Vec<String> {
    let kvs = sv.range(Range::prefix("k").keys_only()).collect().await.unwrap();
    kvs.iter().map(|kv| String::from_utf8_lossy(&kv.key).into_owned()).collect()
}

fn strs(keys: &[bytes::Bytes]) -> Vec<String> {
    keys.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_client_checks() {
    // Never contacted: the checks refuse before sending.
    let client = Client::connect(Options::new("127.0.0.1:1")).unwrap();
    let l = client.subvolume("").unwrap().leases();
    for ttl in [0, -1, cowkv::validate::MAX_LEASE_TTL + 1] {
        assert!(matches!(l.grant(ttl, 0).await, Err(Error::InvalidArgument(_))), "ttl {ttl}");
    }
    assert!(matches!(l.grant(10, -1).await, Err(Error::InvalidArgument(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_live() {
    let server = common::Server::start("64M", None);
    // Short deadlines: the background keep-alive must not inherit them.
    let short = Some(Duration::from_millis(800));
    let opts = Options::new(server.address()).deadline(short).stream_deadline(short);
    let client = Client::connect(opts).unwrap();
    basics(&fresh(&client, "basics").await).await;
    expiry(&fresh(&client, "expiry").await).await;
    keep_alive(&fresh(&client, "keep-alive").await).await;
    unknown(&client, &fresh(&client, "unknown").await).await;
    model(&fresh(&client, "model").await).await;
}

/// grant, put with a lease (single and in a txn), time_to_live with keys,
/// list, keep_alive_once, revoke deletes the keys.
async fn basics(sv: &Subvolume) {
    let l = sv.leases();
    let g = l.grant(60, 0).await.unwrap();
    assert!(g.id > 0 && g.ttl == 60, "{g:?}");
    assert_eq!(l.grant(30, 77).await.unwrap().id, 77);
    assert!(matches!(l.grant(30, 77).await, Err(Error::AlreadyExists(_))));
    sv.put_with_lease("k1", "a", g.id, Durability::Default).await.unwrap();
    sv.txn().then([Op::put_with_lease("k2", "b", g.id), Op::put("k3", "c")]).commit().await.unwrap();
    sv.put_with_lease("k4", "d", 77, Durability::Durable).await.unwrap();
    let info = l.time_to_live(g.id, true).await.unwrap();
    assert_eq!((info.id, info.granted_ttl), (g.id, 60));
    assert!(info.ttl > 0 && info.ttl <= 60, "{info:?}");
    assert_eq!(strs(&info.keys), ["k1", "k2"]);
    assert!(l.time_to_live(g.id, false).await.unwrap().keys.is_empty());
    let mut want = vec![77, g.id];
    want.sort();
    assert_eq!(l.list().await.unwrap(), want);
    assert_eq!(l.keep_alive_once(g.id).await.unwrap(), 60);
    assert!(l.revoke(g.id).await.unwrap() > 0);
    assert_eq!(keys(sv).await, ["k3", "k4"]);
    assert_eq!(l.list().await.unwrap(), [77]);
}

async fn expiry(sv: &Subvolume) {
    let g = sv.leases().grant(1, 0).await.unwrap();
    sv.put_with_lease("k", "v", g.id, Durability::Default).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert_eq!(sv.get("k").await.unwrap(), None);
    assert!(matches!(sv.leases().time_to_live(g.id, false).await, Err(Error::NotFound(_))));
}

async fn keep_alive(sv: &Subvolume) {
    let l = sv.leases();
    let g = l.grant(1, 0).await.unwrap();
    sv.put_with_lease("k", "v", g.id, Durability::Default).await.unwrap();
    let keeper = l.keep_alive(g.id);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(sv.get("k").await.unwrap().as_deref(), Some(&b"v"[..]), "2.5 s into a kept-alive 1 s lease");
    assert_eq!((keeper.ttl(), keeper.id(), keeper.is_finished()), (1, g.id, false));
    keeper.stop().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert_eq!(sv.get("k").await.unwrap(), None, "expired after the keep-alive stopped");

    // Dropping the handle stops it too.
    let g = l.grant(1, 0).await.unwrap();
    sv.put_with_lease("k", "v", g.id, Durability::Default).await.unwrap();
    drop(l.keep_alive(g.id));
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert_eq!(sv.get("k").await.unwrap(), None, "expired after the handle was dropped");

    // A lease that is gone: the task ends by itself with NotFound.
    let g = l.grant(5, 0).await.unwrap();
    l.revoke(g.id).await.unwrap();
    let lost = l.keep_alive(g.id);
    for _ in 0..100 {
        if lost.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(lost.is_finished());
    assert!(matches!(lost.stop().await, Err(Error::NotFound(_))));
}

async fn unknown(client: &Client, sv: &Subvolume) {
    let (l, id) = (sv.leases(), 424242);
    assert!(matches!(l.revoke(id).await, Err(Error::NotFound(_))));
    assert!(matches!(l.time_to_live(id, true).await, Err(Error::NotFound(_))));
    assert!(matches!(l.keep_alive_once(id).await, Err(Error::NotFound(_))));
    assert!(matches!(sv.put_with_lease("k", "v", id, Durability::Default).await, Err(Error::NotFound(_))));
    let r = sv.txn().then([Op::put_with_lease("k", "v", id)]).commit().await;
    assert!(matches!(r, Err(Error::NotFound(_))));
    assert_eq!(sv.get("k").await.unwrap(), None);
    let other = client.subvolume("no-such-subvolume").unwrap();
    assert!(matches!(other.leases().list().await, Err(Error::NotFound(_))));
}

/// A small linear congruential generator: the test needs no crate for it.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

async fn model(sv: &Subvolume) {
    let seed: u64 = match std::env::var("COWKV_LEASE_SEED") {
        Ok(s) => s.parse().expect("COWKV_LEASE_SEED"),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
    };
    let mut rng = Lcg(seed);
    let l = sv.leases();
    let mut owner: BTreeMap<String, i64> = BTreeMap::new(); // key -> lease (0 = none)
    let mut leases: BTreeSet<i64> = BTreeSet::new();
    for step in 0..120 {
        let at = format!("seed={seed} step={step} (replay: COWKV_LEASE_SEED={seed})");
        let key = format!("k{}", rng.below(6));
        let id = 1 + rng.below(3) as i64;
        match rng.below(5) {
            0 => {
                let r = l.grant(60, id).await;
                if leases.contains(&id) {
                    assert!(matches!(r, Err(Error::AlreadyExists(_))), "{at}: {r:?}");
                } else {
                    r.unwrap_or_else(|e| panic!("{at}: {e}"));
                    leases.insert(id);
                }
            }
            1 | 2 => {
                let lease = if rng.below(3) == 0 { 0 } else { id };
                let r = sv.put_with_lease(&key, "v", lease, Durability::Default).await;
                if lease != 0 && !leases.contains(&lease) {
                    assert!(matches!(r, Err(Error::NotFound(_))), "{at}: {r:?}");
                } else {
                    r.unwrap_or_else(|e| panic!("{at}: {e}"));
                    owner.insert(key, lease);
                }
            }
            3 => {
                if owner.remove(&key).is_some() {
                    sv.delete(&key).await.unwrap_or_else(|e| panic!("{at}: {e}"));
                }
            }
            _ => {
                let r = l.revoke(id).await;
                if leases.remove(&id) {
                    r.unwrap_or_else(|e| panic!("{at}: {e}"));
                    owner.retain(|_, o| *o != id);
                } else {
                    assert!(matches!(r, Err(Error::NotFound(_))), "{at}: {r:?}");
                }
            }
        }
        assert_eq!(keys(sv).await, owner.keys().cloned().collect::<Vec<_>>(), "{at}");
        assert_eq!(l.list().await.unwrap(), leases.iter().copied().collect::<Vec<_>>(), "{at}");
        for &lease in &leases {
            let want: Vec<&String> = owner.iter().filter(|(_, o)| **o == lease).map(|(k, _)| k).collect();
            let got = strs(&l.time_to_live(lease, true).await.unwrap().keys);
            assert_eq!(got.iter().collect::<Vec<_>>(), want, "{at}: lease {lease}");
        }
    }
}
