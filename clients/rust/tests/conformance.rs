//! Runs clients/conformance/scenarios.json through this crate: the shared
//! driver (clients/conformance/driver.py) runs every scenario with this
//! crate's adapter (examples/conformance_adapter.rs, one JSON op per line,
//! built by `cargo test` with the other examples) against cowkvd processes it
//! starts itself, and fails on the first step of a scenario whose outcome
//! differs. The server is $COWKVD or ../../bazel-bin/server/cowkvd;
//! COWKV_SCENARIO=name runs one scenario, COWKV_CONFORMANCE=path another file.

use std::path::PathBuf;
use std::process::Command;

/// target/<profile>/examples/conformance_adapter, beside this test's deps dir.
fn adapter() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile = exe.parent().and_then(|d| d.parent()).expect("target/<profile>");
    let path = profile.join("examples").join("conformance_adapter");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test` (which builds the examples), not only --test conformance",
        path.display()
    );
    path
}

#[test]
fn conformance_scenarios() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cowkvd = match std::env::var("COWKVD") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => root.join("bazel-bin/server/cowkvd"),
    };
    let mut cmd = Command::new("python3");
    cmd.arg(root.join("clients/conformance/driver.py")).arg("--adapter").arg(adapter()).arg("--cowkvd").arg(&cowkvd);
    if let Ok(only) = std::env::var("COWKV_SCENARIO") {
        if !only.is_empty() {
            cmd.arg("--only").arg(only);
        }
    }
    if let Ok(file) = std::env::var("COWKV_CONFORMANCE") {
        if !file.is_empty() {
            cmd.arg("--scenarios").arg(file);
        }
    }
    let out = cmd.output().expect("run python3 clients/conformance/driver.py");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{}", text.trim_end().lines().last().unwrap_or(""));
    assert!(out.status.success(), "conformance driver failed:\n{text}");
}
