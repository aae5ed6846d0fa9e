//! Per-call timeouts against a live cowkvd that stops answering (SIGSTOP):
//! `timeout(d)` on Client, Subvolume, Files, Leases and the request
//! builders (Txn, ListSubvolumes, SetAttr) is the call's deadline and ends
//! it with Error::DeadlineExceeded in about `d`; the client-wide default
//! (Options::deadline) applies when none is given; a per-call timeout
//! longer than the default outlives a pause the default would not.

mod common;

use std::time::{Duration, Instant};

use cowkv::{Client, Error, Op, Options};

const SHORT: Duration = Duration::from_millis(300);

/// Runs `f`, which must fail with DeadlineExceeded within [SHORT, 5 s).
async fn expect_deadline<T: std::fmt::Debug>(what: &str, f: impl std::future::Future<Output = cowkv::Result<T>>) {
    let t0 = Instant::now();
    let r = f.await;
    let took = t0.elapsed();
    assert!(matches!(r, Err(Error::DeadlineExceeded(_))), "{what}: {r:?}");
    assert!(took >= SHORT - Duration::from_millis(20) && took < Duration::from_secs(5), "{what}: took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_call_timeouts() {
    let mut server = common::Server::start("64M", None);
    // A long default: only the per-call timeouts can end the calls below in time.
    let client = Client::connect(Options::new(server.address()).deadline(Some(Duration::from_secs(60)))).unwrap();
    let hurried = Client::connect(Options::new(server.address()).deadline(Some(SHORT))).unwrap();
    client.create_subvolume("t").await.unwrap();
    let sv = client.subvolume("t").unwrap();
    sv.put("k", "v").await.unwrap();
    sv.files().write("f", "data").await.unwrap();
    hurried.subvolume("t").unwrap().get("k").await.unwrap(); // its channel is up

    server.pause();
    expect_deadline("get", sv.timeout(SHORT).get("k")).await;
    expect_deadline("put", sv.timeout(SHORT).put("k", "w")).await;
    expect_deadline("stat", sv.files().timeout(SHORT).stat("f")).await;
    expect_deadline("read (a stream)", sv.files().timeout(SHORT).read("f")).await;
    expect_deadline("txn", sv.txn().then([Op::put("k", "x")]).timeout(SHORT).commit()).await;
    expect_deadline("list", client.list_subvolumes_with().timeout(SHORT).send()).await;
    expect_deadline("client", client.timeout(SHORT).list_subvolumes()).await;
    expect_deadline("lease list", sv.leases().timeout(SHORT).list()).await;
    expect_deadline("default", hurried.subvolume("t").unwrap().get("k")).await;

    // A per-call timeout longer than the default: resumed within it, the call succeeds.
    let patient = hurried.subvolume("t").unwrap().timeout(Duration::from_secs(20));
    let call = tokio::spawn(async move { patient.get("k").await });
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.resume();
    let got = call.await.unwrap().unwrap();
    assert_eq!(&got.unwrap()[..], b"v");
}
