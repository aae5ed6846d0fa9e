//! The Rust quickstart of clients/install_test.sh, built in an empty project
//! from the packed crate. Usage: quickstart HOST:PORT SUBVOLUME.

#[tokio::main]
async fn main() -> cowkv::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let client = cowkv::Client::connect(cowkv::Options::new(args[1].clone()))?;
    client.create_subvolume(&args[2]).await?;
    let sv = client.subvolume(&args[2])?;
    sv.put("user/1", "alice").await?;
    sv.put("user/2", "bob").await?;
    let v = sv.get("user/1").await?.map(|b| String::from_utf8_lossy(&b).into_owned());
    let users = sv.range(cowkv::Range::prefix("user/")).collect().await?;
    let n = sv
        .transaction(|tx| async move {
            // retried on conflict
            let n: u64 = tx.get("n").await?.map_or(0, |v| String::from_utf8_lossy(&v).parse().unwrap_or(0));
            tx.put("n", (n + 1).to_string()).await?;
            Ok(n + 1)
        })
        .await?;
    let missing = match sv.delete("missing").await {
        Err(cowkv::Error::NotFound(_)) => "not-found",
        Ok(_) => "present",
        Err(e) => return Err(e),
    };
    println!("quickstart: user/1={} users={} n={n} missing={missing}", v.unwrap_or_default(), users.len());
    Ok(())
}
