//! Async Rust client for cowkvd, the cowkv transactional store: subvolumes
//! and snapshots, an etcd-like transactional key space, and a btrfs-like file
//! tree, over gRPC (tonic + prost; stubs generated from `proto/` at build time).
//!
//! ```no_run
//! use cowkv::{Client, Options, Range};
//!
//! #[tokio::main]
//! async fn main() -> cowkv::Result<()> {
//!     let client = Client::connect(Options::new("127.0.0.1:7420"))?;
//!     client.create_subvolume("data").await?;
//!     let sv = client.subvolume("data")?;
//!     sv.put("user/1", "alice").await?;
//!     let n = sv.run_in_transaction(|tx| async move {
//!         let n = tx.get("n").await?.map_or(0, |v| v.len());
//!         tx.put("n", vec![b'x'; n + 1]).await?;
//!         Ok(n + 1)
//!     }).await?;                                   // retried on conflict
//!     let users = sv.range(Range::prefix("user/")).collect().await?;
//!     client.snapshot("data", "data@1", true).await?;
//!     println!("{n} {}", users.len());
//!     Ok(())
//! }
//! ```
//!
//! Every call returns [`Error`], one variant per kind of failure; bad
//! arguments are refused before sending with the same variant the server
//! would give ([`Error::InvalidArgument`]).

mod attrs;
mod client;
mod error;
mod files;
mod handle;
mod kv;
mod lease;
mod options;
mod retry;
mod rpc;
pub mod send;
#[rustfmt::skip]
pub mod spec;
mod txn;
pub mod validate;
mod watch;
mod watch_stream;

/// The generated protobuf messages and gRPC stubs (package cowkv.v1).
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("cowkv.v1");
}

pub use attrs::{
    SetAttr, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, XATTR_CREATE, XATTR_REPLACE,
};
pub use client::{CheckResult, Client, ListSubvolumes, SubvolumeInfo, VersionInfo};
pub use error::{Error, ErrorInfo, Result};
pub use files::{
    DirEntry, Extent, FileKind, FileStat, Files, WriteOptions, WriteResult, RENAME_EXCHANGE, RENAME_NOREPLACE,
    WRITE_CHUNK,
};
pub use handle::FileHandle;
pub use kv::{DeleteRangeResult, Durability, GetResult, KeyValue, Range, RangeIter, RangePage, Subvolume};
pub use lease::{KeepAlive, LeaseGrant, LeaseId, LeaseInfo, Leases};
pub use options::{Options, Tls, DEFAULT_ADDRESS, DEFAULT_DEADLINE, DEFAULT_STREAM_DEADLINE, MAX_MESSAGE_BYTES};
pub use retry::{UnavailableRetry, RETRIED_METHODS};
pub use send::{
    PartialReceive, ReceiveOptions, ReceiveResult, SendOptions, SendStats, SendStream, RECEIVE_CHUNK_BYTES,
};
pub use txn::{
    Compare, NumberTarget, Op, OpResult, RetryPolicy, Transaction, TransactionOptions, Txn, TxnResult, ValueTarget,
};
pub use watch::{prefix_end, EventKind, FileEvent, WatchEvent, WatchItem, WatchOptions, Watcher};
