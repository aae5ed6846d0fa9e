//! Send and receive against two live cowkvd servers: a random subvolume's
//! snapshots sent whole into the same server under a new name and piped
//! into the other, an incremental stream, a resumable receive truncated
//! mid-stream and resumed from its listed token, one whose source fails
//! mid-upload (the call cancelled) aborted, and damaged and stale tokens
//! and a partial receive's name refused with their classes and reasons.
//! Every copy has its source's digest. COWKV_SEND_SEED=N replays a seed.

mod common;

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;

use cowkv::{Client, Error, Options, PartialReceive, ReceiveOptions, SendOptions, Subvolume, WriteOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

async fn fill(rng: &mut Rng, sv: &Subvolume, round: u32) {
    for _ in 0..40 {
        let k = format!("k{:03}", rng.below(60));
        if rng.below(4) == 0 {
            match sv.delete(&k).await {
                Ok(_) | Err(Error::NotFound(_)) => {}
                Err(e) => panic!("{e}"),
            }
        } else {
            sv.put(&k, format!("v{round}-{}", rng.next())).await.unwrap();
        }
    }
    let big: Vec<u8> = (0..(1 << 20) + rng.below(2 << 20)).map(|_| rng.next() as u8).collect();
    let create = WriteOptions { create: true, ..Default::default() };
    sv.files().write_with(&format!("/big{round}"), big, create).await.unwrap();
    let small = format!("round {round}").into_bytes();
    sv.files()
        .write_with("/small", small, WriteOptions { create: true, truncate: true, ..Default::default() })
        .await
        .unwrap();
}

fn pieces(data: &Bytes, size: usize) -> impl futures_core::Stream<Item = Result<Bytes, Error>> + Send + 'static {
    let parts: Vec<Result<Bytes, Error>> =
        (0..data.len()).step_by(size).map(|o| Ok(data.slice(o..(o + size).min(data.len())))).collect();
    futures_util::stream::iter(parts)
}

async fn collect(c: &Client, snapshot: &str, opts: SendOptions) -> Result<Bytes, Error> {
    let mut s = c.send(snapshot, opts).await?;
    let mut out = Vec::new();
    while let Some(chunk) = s.next_chunk().await? {
        out.extend_from_slice(&chunk);
    }
    Ok(out.into())
}

fn reason(e: &Error) -> &str {
    e.info().map(|i| i.reason.as_str()).unwrap_or("")
}

async fn wait_partial(c: &Client, name: &str) -> PartialReceive {
    for _ in 0..1000 {
        if let Some(p) = c.partial_receives().await.unwrap().into_iter().find(|p| p.name == name && !p.in_use) {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("partial receive {name} not listed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_receive() {
    let (sa, sb) = (common::Server::start("256M", None), common::Server::start("256M", None));
    let a = Client::connect(Options::new(sa.address())).unwrap();
    let b = Client::connect(Options::new(sb.address())).unwrap();
    let seed: u64 = std::env::var("COWKV_SEND_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("seed {seed}");
    let mut rng = Rng(seed | 1);
    a.create_subvolume("src").await.unwrap();
    for round in [1, 2] {
        fill(&mut rng, &a.subvolume("src").unwrap(), round).await;
        a.snapshot("src", &format!("s{round}"), true).await.unwrap();
    }

    // Full: into a file-like buffer, then into the same server.
    let mut buf: Vec<u8> = Vec::new();
    let stats = a.send_to(&mut buf, "s1", SendOptions::new()).await.unwrap();
    assert_eq!(stats.bytes, buf.len() as u64);
    let got = a.receive_from(&buf[..], ReceiveOptions::new().name("s1copy")).await.unwrap();
    assert_eq!((got.name.as_str(), got.incremental), ("s1copy", false));
    assert_eq!(a.digest("s1copy").await.unwrap(), a.digest("s1").await.unwrap());
    // Piped into B, then incremental.
    let s = a.send("s1", SendOptions::new()).await.unwrap();
    let got = b.receive(s.into_stream(), ReceiveOptions::new()).await.unwrap();
    assert_eq!(got.name, "s1");
    assert_eq!(b.digest("s1").await.unwrap(), a.digest("s1").await.unwrap());
    let s = a.send("s2", SendOptions::new().parent("s1")).await.unwrap();
    let got = b.receive(s.into_stream(), ReceiveOptions::new()).await.unwrap();
    assert!(got.incremental && got.parent == "s1", "{got:?}");
    assert_eq!(b.digest("s2").await.unwrap(), a.digest("s2").await.unwrap());
    assert!(matches!(collect(&a, "nosuch", SendOptions::new()).await, Err(Error::NotFound(_))));

    resume(&mut rng, &a, &b).await;
}

async fn resume(rng: &mut Rng, a: &Client, b: &Client) {
    let full = collect(a, "s2", SendOptions::new()).await.unwrap();
    let cut = full.slice(..full.len() / 4 + rng.below(full.len() as u64 / 2) as usize);
    let e = b.receive(pieces(&cut, 1 << 20), ReceiveOptions::new().name("cut").resumable()).await.unwrap_err();
    assert!(matches!(e, Error::DataLoss(_)) && reason(&e) == "STREAM_CORRUPT", "{e:?}");
    let p = wait_partial(b, "cut").await;
    let mut bad = p.token.clone().into_bytes();
    let mid = bad.len() / 2;
    bad[mid] ^= 1;
    let e = collect(a, "", SendOptions::new().resume_token(String::from_utf8(bad).unwrap())).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && reason(&e) == "RESUME_TOKEN", "{e:?}");
    let e = b.receive(pieces(&full, 1 << 20), ReceiveOptions::new().name("cut")).await.unwrap_err();
    assert!(matches!(e, Error::AlreadyExists(_)) && reason(&e) == "PARTIAL_RECEIVE", "{e:?}");
    let s = a.send("", SendOptions::new().resume_token(&p.token)).await.unwrap();
    let got = b.receive(s.into_stream(), ReceiveOptions::new()).await.unwrap();
    assert_eq!(got.name, "cut");
    assert_eq!(b.digest("cut").await.unwrap(), a.digest("s2").await.unwrap());
    let s = a.send("", SendOptions::new().resume_token(&p.token)).await.unwrap();
    let e = b.receive(s.into_stream(), ReceiveOptions::new()).await.unwrap_err();
    assert!(matches!(e, Error::NotFound(_)) && reason(&e) == "RESUME_MISMATCH", "{e:?}");

    // A source that fails mid-upload: the call is cancelled, the error returned.
    let half = full.slice(..full.len() / 2);
    let dying = futures_util::stream::iter([Ok(half)]).chain(futures_util::stream::once(async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Err(Error::user("upload dropped"))
    }));
    let e = b.receive(dying, ReceiveOptions::new().name("drop").resumable()).await.unwrap_err();
    assert!(matches!(e, Error::User(_)), "{e:?}");
    wait_partial(b, "drop").await;
    b.abort_receive("drop").await.unwrap();
    let e = b.abort_receive("drop").await.unwrap_err();
    assert!(matches!(e, Error::NotFound(_)) && reason(&e) == "RESUME_MISMATCH", "{e:?}");
    assert_eq!(b.partial_receives().await.unwrap(), vec![]);
}
