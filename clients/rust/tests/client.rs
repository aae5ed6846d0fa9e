//! The client against a live cowkvd, beyond the conformance scenarios: the
//! retry helper returning a value under real contention, streams and large
//! files, tokens, deadlines, Admin, dropping an open transaction.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cowkv::{Client, Durability, Error, Options, Range, RetryPolicy, Tls, TransactionOptions};
use tokio_stream::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_end_to_end() {
    let server = common::Server::start("256M", None);
    let client = Client::connect(Options::new(server.address())).unwrap();
    client.create_subvolume("e2e").await.unwrap();
    let sv = client.subvolume("e2e").unwrap();

    // Typed results and Option for absent keys.
    assert_eq!(sv.get("nope").await.unwrap(), None);
    let rev = sv.put_with("k", "v", Durability::Durable).await.unwrap();
    assert_eq!(sv.get("k").await.unwrap().as_deref(), Some(&b"v"[..]));
    assert!(matches!(sv.delete("nope").await, Err(Error::NotFound(_))));
    let g = sv.get_kv("k").await.unwrap();
    assert_eq!((g.kv.create_revision, g.kv.version), (rev, 1));

    // Concurrent increments through the retry helper: every one lands.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let sv = sv.clone();
            tokio::spawn(async move {
                let opts = TransactionOptions {
                    retry: RetryPolicy { max_attempts: 50, ..Default::default() },
                    ..Default::default()
                };
                sv.run_in_transaction_with(&opts, |tx| async move {
                    let n: u64 = match tx.get("counter").await? {
                        Some(v) => std::str::from_utf8(&v).unwrap().parse().unwrap(),
                        None => 0,
                    };
                    tx.put("counter", (n + 1).to_string()).await?;
                    Ok(n + 1)
                })
                .await
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(sv.get("counter").await.unwrap().as_deref(), Some(&b"8"[..]));

    // A body's own error aborts and is returned as is, without a retry.
    let runs = Arc::new(AtomicU32::new(0));
    let r: cowkv::Result<()> = sv
        .run_in_transaction(|tx| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                tx.put("never", "x").await?;
                Err(Error::user("no thanks"))
            }
        })
        .await;
    assert!(matches!(r, Err(Error::User(_))));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(sv.get("never").await.unwrap(), None);

    // A range as a Stream, paged.
    for i in 0..25 {
        sv.put(format!("r/{i:02}"), "x").await.unwrap();
    }
    let keys: Vec<_> =
        sv.range(Range::prefix("r/").page_size(4).reverse()).into_stream().map(|kv| kv.unwrap().key).collect().await;
    assert_eq!(keys.len(), 25);
    assert_eq!(&keys[0][..], b"r/24");
    let mut it = sv.range(Range::prefix("r/").page_size(10).limit(15));
    let mut n = 0;
    while it.next().await.unwrap().is_some() {
        n += 1;
    }
    assert_eq!((n, it.pages()), (15, 2));
    assert_eq!(sv.count(Range::prefix("r/")).await.unwrap(), 25);

    // A file over several Write chunks, read back through the stream.
    let fs = sv.files();
    let data: Vec<u8> = (0..(5 << 20) + 3).map(|i| (i % 251) as u8).collect();
    let w = fs.write("/big", data.clone()).await.unwrap();
    assert_eq!(w.bytes_written, data.len() as u64);
    assert_eq!(fs.read("/big").await.unwrap(), data);
    fs.mkdir_all("/a/b/c").await.unwrap();
    fs.mkdir_all("/a/b").await.unwrap();
    assert!(fs.exists("/a/b/c").await.unwrap());
    assert_eq!(fs.read_dir("/a").await.unwrap()[0].name, "b");

    // Dropping an open transaction releases its handle in the background.
    let before = client.stats().await.unwrap()["server_open_handles"];
    drop(sv.begin().await.unwrap());
    let mut released = false;
    for _ in 0..50 {
        if client.stats().await.unwrap()["server_open_handles"] <= before {
            released = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(released, "dropped transaction still open");

    // Admin.
    let v = client.version().await.unwrap();
    assert_eq!(v.api, "cowkv.v1");
    let stats = client.stats().await.unwrap();
    assert!(stats["nodesize"] >= 4096 && stats.contains_key("kv_commits"));
    assert!(client.check(None).await.unwrap().ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_deadlines() {
    let server = common::Server::start("64M", Some("t0ken"));
    let anon = Client::connect(Options::new(server.address())).unwrap();
    assert!(matches!(anon.list_subvolumes().await, Err(Error::Unauthenticated(_))));
    let client = Client::connect(Options::new(server.address()).token("t0ken")).unwrap();
    assert!(client.list_subvolumes().await.unwrap().iter().any(|s| s.name == "default"));

    // A server that never answers: the deadline fires and is DeadlineExceeded. (A tiny
    // deadline against a live server is a race: both tonic's timer and the server's
    // deadline have millisecond granularity, so a fast put can still win.)
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = format!("127.0.0.1:{}", silent.local_addr().unwrap().port());
    let hurried =
        Client::connect(Options::new(silent_addr).token("t0ken").deadline(Some(Duration::from_millis(200)))).unwrap();
    let e = hurried.subvolume("").unwrap().put("k", "v").await.unwrap_err();
    assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
    drop(silent);

    // Nothing listens: Unavailable.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("127.0.0.1:{}", l.local_addr().unwrap().port());
    drop(l);
    let gone = Client::connect(Options::new(dead)).unwrap();
    assert!(matches!(gone.sync().await, Err(Error::Unavailable(_))));
    assert!(matches!(Client::connect(Options::new("not an address")), Err(Error::Transport(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls() {
    // Panics, saying so, when openssl is missing (no silent pass).
    let (server, ca) = common::Server::start_tls("64M");
    let tls = Tls { ca_file: Some(ca), domain: Some("localhost".into()) };
    let client = Client::connect(Options::new(server.address()).tls(tls)).unwrap();
    client.subvolume("").unwrap().put("k", "over tls").await.unwrap();
    assert_eq!(client.subvolume("").unwrap().get("k").await.unwrap().as_deref(), Some(&b"over tls"[..]));
    // Plaintext to a TLS server fails like an unreachable one.
    let plain = Client::connect(Options::new(server.address())).unwrap();
    let e = plain.sync().await.unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
}
