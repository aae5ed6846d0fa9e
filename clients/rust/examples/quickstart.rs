//! The README's example as a program: `cargo run --example quickstart [host:port] [token]`.

#[tokio::main]
async fn main() -> cowkv::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| cowkv::DEFAULT_ADDRESS.to_string());
    let mut opts = cowkv::Options::new(addr);
    if let Some(token) = args.next() {
        opts = opts.token(token);
    }
    let client = cowkv::Client::connect(opts)?;
    let sv = client.subvolume("default")?;
    sv.put("user/1", "alice").await?;
    let v = sv.get("user/1").await?; // Option<Bytes>: None if absent
    let users = sv.range(cowkv::Range::prefix("user/")).collect().await?;
    let n = sv
        .run_in_transaction(|tx| async move {
            // retried on conflict
            let n: u64 = tx.get("n").await?.map_or(0, |v| String::from_utf8_lossy(&v).parse().unwrap_or(0));
            tx.put("n", (n + 1).to_string()).await?;
            Ok(n + 1)
        })
        .await?;
    if let Err(cowkv::Error::NotFound(_)) = sv.delete("missing").await { /* was absent */ }
    println!("user/1 = {v:?}, {} user(s), n = {n}", users.len());
    Ok(())
}
