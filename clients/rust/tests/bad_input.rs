//! The bad-input pass: every invalid argument is refused by the client before
//! it is sent (no status code) with the variant the server gives when the same
//! request is sent raw through the generated stubs.

mod common;

use std::future::Future;

use cowkv::pb;
use cowkv::{Client, Compare, Error, Op, Options, Range, TransactionOptions};
use prost::bytes::Bytes;

async fn same<T: std::fmt::Debug, U: std::fmt::Debug>(
    what: &str,
    via_client: impl Future<Output = cowkv::Result<T>>,
    via_raw: impl Future<Output = Result<tonic::Response<U>, tonic::Status>>,
) {
    let local = via_client.await.expect_err(what);
    assert!(matches!(local, Error::InvalidArgument(_)), "{what}: client gave {local}");
    assert_eq!(local.code(), None, "{what}: refused by the server, not the client: {local}");
    let status = via_raw.await.expect_err(&format!("{what}: the server accepted what the client refused"));
    let remote = Error::from_status(&status, "raw");
    assert_eq!(local.class(), remote.class(), "{what}: client {local} vs server {status:?}");
    assert_eq!(local.errno_name(), remote.errno_name(), "{what}: client {local} vs server {status:?}");
}

fn k(n: usize) -> Vec<u8> {
    vec![b'k'; n]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_client_side_like_the_server() {
    let server = common::Server::start("256M", None);
    let client = Client::connect(Options::new(server.address())).unwrap();
    let url = format!("http://{}", server.address());
    let mut kv = pb::kv_client::KvClient::connect(url.clone()).await.unwrap().max_decoding_message_size(20 << 20);
    let mut svs = pb::subvolumes_client::SubvolumesClient::connect(url.clone()).await.unwrap();
    let mut files = pb::files_client::FilesClient::connect(url).await.unwrap();
    client.create_subvolume("bad").await.unwrap();
    let sv = client.subvolume("bad").unwrap();
    sv.files().mkdir("/d").await.unwrap();
    let put = |key: Vec<u8>, value: Vec<u8>| pb::PutRequest {
        subvolume: "bad".into(),
        key: key.into(),
        value: value.into(),
        durability: 0,
        lease: 0,
    };

    same("empty key", sv.put(b"", b"v"), kv.put(put(vec![], b"v".to_vec()))).await;
    same("key over 1024", sv.put(k(1025), b"v"), kv.put(put(k(1025), b"v".to_vec()))).await;
    same(
        "get key over 1024",
        sv.get_kv(k(1025)),
        kv.get(pb::GetRequest { subvolume: "bad".into(), key: k(1025).into(), revision: 0 }),
    )
    .await;
    same(
        "delete empty key",
        sv.delete(b""),
        kv.delete(pb::DeleteRequest { subvolume: "bad".into(), ..Default::default() }),
    )
    .await;
    let big = vec![0u8; (16 << 20) + 1];
    same("value over 16 MiB", sv.put(b"k", &big), kv.put(put(b"k".to_vec(), big.clone()))).await;
    same(
        "bound over 1025",
        sv.range(Range::from(k(1026))).collect(),
        kv.range(pb::RangeRequest { subvolume: "bad".into(), start: k(1026).into(), ..Default::default() }),
    )
    .await;
    same(
        "prefix with start",
        sv.range_page(Range::prefix("a").start("a"), b""),
        kv.range(pb::RangeRequest {
            subvolume: "bad".into(),
            prefix: Bytes::from_static(b"a"),
            start: Bytes::from_static(b"a"),
            ..Default::default()
        }),
    )
    .await;
    same(
        "delete_range without bounds",
        sv.delete_range(Range::all(), Default::default()),
        kv.delete_range(pb::DeleteRangeRequest { subvolume: "bad".into(), ..Default::default() }),
    )
    .await;
    same(
        "subvolume name with /",
        async { client.subvolume("a/b").map(|_| ()) },
        kv.put(pb::PutRequest { subvolume: "a/b".into(), key: Bytes::from_static(b"k"), ..Default::default() }),
    )
    .await;
    same("create a/b", client.create_subvolume("a/b"), svs.create(pb::CreateSubvolumeRequest { name: "a/b".into() }))
        .await;
    same("create empty", client.create_subvolume(""), svs.create(pb::CreateSubvolumeRequest { name: "".into() })).await;
    let long = "n".repeat(256);
    same(
        "create 256 bytes",
        client.create_subvolume(&long),
        svs.create(pb::CreateSubvolumeRequest { name: long.clone() }),
    )
    .await;
    same(
        "snapshot x/y",
        client.snapshot("bad", "x/y", true),
        svs.snapshot(pb::SnapshotRequest { source: "bad".into(), name: "x/y".into(), read_only: true }),
    )
    .await;
    for path in ["/d/../x", "/..", "./f", "x/./y", &"n".repeat(256), &"/a".repeat(2049), &"/a".repeat(257)] {
        same(
            &format!("mkdir {path:.20}"),
            sv.files().mkdir(path),
            files.mkdir(pb::MkdirRequest { subvolume: "bad".into(), path: path.to_string(), mode: 0 }),
        )
        .await;
    }
    same(
        "rename to ..",
        sv.files().rename("/d", "/d/../e"),
        files.rename(pb::RenameRequest { subvolume: "bad".into(), from: "/d".into(), to: "/d/../e".into(), flags: 0 }),
    )
    .await;
    same(
        "empty symlink target",
        sv.files().symlink("", "/l"),
        files.symlink(pb::SymlinkRequest { subvolume: "bad".into(), target: "".into(), path: "/l".into() }),
    )
    .await;
    same(
        "lease over 10 min",
        sv.begin_with(&TransactionOptions { lease_ms: 600_001, ..Default::default() }),
        kv.begin(pb::BeginRequest { subvolume: "bad".into(), lease_ms: 600_001 }),
    )
    .await;
    same(
        "txn compare on empty key",
        sv.txn().when([Compare::exists(b"")]).commit(),
        kv.txn(pb::TxnRequest {
            subvolume: "bad".into(),
            compare: vec![pb::Compare { target: pb::compare::Target::Exists as i32, ..Default::default() }],
            ..Default::default()
        }),
    )
    .await;
    same(
        "txn put of empty key",
        sv.txn().then([Op::put(b"", b"")]).commit(),
        kv.txn(pb::TxnRequest {
            subvolume: "bad".into(),
            success: vec![pb::RequestOp { op: Some(pb::request_op::Op::Put(pb::PutOp::default())) }],
            ..Default::default()
        }),
    )
    .await;
    let tx = sv.begin().await.unwrap();
    same(
        "tx delete of empty key",
        tx.delete(b""),
        kv.txn_delete(pb::TxnDeleteRequest { handle: tx.handle(), ..Default::default() }),
    )
    .await;
    tx.abort().await.unwrap();
}
