//! Error variants against a live cowkvd: the server sends google.rpc.ErrorInfo
//! with every error, and the variant, `ErrorInfo::reason` and `errno_name`
//! come from it (src/error.rs's unit tests cover the fallback for a server
//! that sends none).

mod common;

use cowkv::{Client, Error, Options};

fn reason(e: &Error) -> (&'static str, String, Option<String>) {
    (e.class(), e.info().map(|i| i.reason.clone()).unwrap_or_default(), e.errno_name().map(str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_info_live() {
    let server = common::Server::start("64M", None);
    let client = Client::connect(Options::new(server.address())).unwrap();
    client.create_subvolume("e").await.unwrap();
    client.snapshot("e", "e@ro", true).await.unwrap();
    let sv = client.subvolume("e").unwrap();
    let ro = client.subvolume("e@ro").unwrap();
    let s = |c: &'static str, r: &str, e: Option<&str>| (c, r.to_string(), e.map(str::to_string));

    let e = ro.put("k", "v").await.unwrap_err();
    assert_eq!(reason(&e), s("read_only", "READ_ONLY_SNAPSHOT", None));
    let e = ro.files().mkdir("/d").await.unwrap_err();
    assert_eq!(reason(&e), s("read_only", "READ_ONLY_SNAPSHOT", Some("EROFS")));
    sv.files().mkdir("/d").await.unwrap();
    sv.files().create("/d/f").await.unwrap();
    let e = sv.files().rmdir("/d").await.unwrap_err();
    assert_eq!(reason(&e), s("failed_precondition", "ENOTEMPTY", Some("ENOTEMPTY")));
    let e = sv.files().stat("/none").await.unwrap_err();
    assert_eq!(reason(&e), s("not_found", "ENOENT", Some("ENOENT")));
    let e = client.create_subvolume("e").await.unwrap_err();
    assert_eq!(reason(&e), s("already_exists", "ALREADY_EXISTS", None));
}
