//! A cowkvd started by the tests on a fresh image in a temporary directory,
//! on a free loopback port. The binary is $COWKVD, else
//! ../../bazel-bin/server/cowkvd (build it with `bazel build //server:cowkvd`).
//! Stopped (SIGTERM) and its directory removed on drop. Stopping blocks the
//! calling thread: run live tests on a multi-thread runtime, so the client's
//! connection tasks can answer the server's GOAWAY meanwhile (on a
//! current-thread runtime cowkvd waits its full 10 s drain for them).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

pub struct Server {
    dir: PathBuf,
    size: String,
    extra: Vec<String>,
    child: Option<Child>,
    pub port: u16,
    paused: bool,
    /// The port the next launch listens on (0 = a free one).
    fixed_port: u16,
}

pub fn binary() -> PathBuf {
    match std::env::var_os("COWKVD") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bazel-bin/server/cowkvd"),
    }
}

impl Server {
    /// A server on a new device of `size`; `token` = require this bearer token.
    pub fn start(size: &str, token: Option<&str>) -> Server {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cowkv-rust-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut extra = Vec::new();
        if let Some(t) = token {
            let f = dir.join("token");
            std::fs::write(&f, t).expect("token file");
            extra.push("--auth-token-file".to_string());
            extra.push(f.display().to_string());
        }
        let mut s = Server { dir, size: size.to_string(), extra, child: None, port: 0, paused: false, fixed_port: 0 };
        s.launch();
        s
    }

    /// A server on a new device of `size` started with these extra flags.
    pub fn start_with(size: &str, flags: &[&str]) -> Server {
        let mut s = Server::start_unlaunched(size);
        s.extra.extend(flags.iter().map(|f| f.to_string()));
        s.launch();
        s
    }

    fn start_unlaunched(size: &str) -> Server {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cowkv-rust-test-{}-x{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Server { dir, size: size.to_string(), extra: Vec::new(), child: None, port: 0, paused: false, fixed_port: 0 }
    }

    /// A server that serves TLS with a certificate for localhost/127.0.0.1
    /// signed by a test CA, made by openssl; returns it and the CA
    /// certificate to trust. Panics, saying so, when openssl is missing (a
    /// dependency of the tests), rather than leaving TLS untested.
    pub fn start_tls(size: &str) -> (Server, PathBuf) {
        let have_openssl = Command::new("openssl")
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|st| st.success())
            .unwrap_or(false);
        assert!(have_openssl, "{NEED_OPENSSL}");
        let mut s = Server::start(size, None);
        s.stop();
        let (ca, cert, key) = (s.dir.join("ca.pem"), s.dir.join("cert.pem"), s.dir.join("key.pem"));
        assert!(make_certificates(&s.dir), "openssl could not make the test certificates in {}", s.dir.display());
        s.extra.extend(["--tls-cert".to_string(), cert.display().to_string()]);
        s.extra.extend(["--tls-key".to_string(), key.display().to_string()]);
        s.launch();
        (s, ca)
    }

    pub fn device(&self) -> PathBuf {
        self.dir.join("cowkv.img")
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn launch(&mut self) {
        let bin = binary();
        let mut child = Command::new(&bin)
            .arg("--device")
            .arg(self.device())
            .args([
                "--create-size",
                &self.size,
                "--listen",
                &format!("127.0.0.1:{}", self.fixed_port),
                "--metrics-listen",
                "",
            ])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}); build it with `bazel build //server:cowkvd` or set $COWKVD",
                    bin.display()
                )
            });
        // cowkvd logs "serving ... (port N)" on stderr.
        let out = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                if let Some(i) = line.find("(port ") {
                    let port: String = line[i + 6..].chars().take_while(|c| c.is_ascii_digit()).collect();
                    let _ = tx.send(port.parse::<u16>().ok());
                }
            }
            let _ = tx.send(None);
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Some(port)) => self.port = port,
            other => {
                let _ = child.kill();
                panic!("cowkvd did not start: {other:?}");
            }
        }
        self.child = Some(child);
    }

    /// SIGSTOP, and waits until every thread is stopped (state T in
    /// /proc/PID/task/TID/stat): the signal is asynchronous, and a thread
    /// still running could answer a call.
    pub fn pause(&mut self) {
        let pid = self.child.as_ref().expect("server not running").id();
        self.paused = true;
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGSTOP);
        }
        let end = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let mut states = Vec::new();
            for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc").flatten() {
                // A thread that just ended has no stat any more.
                if let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) {
                    let after = &stat[stat.rfind(')').map(|i| i + 1).unwrap_or(0)..];
                    states.push(after.split_whitespace().next().unwrap_or("").to_string());
                }
            }
            if !states.is_empty() && states.iter().all(|s| s == "T" || s == "t") {
                return;
            }
            assert!(std::time::Instant::now() < end, "cowkvd {pid} not stopped 10 s after SIGSTOP: {states:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGCONT: a paused server runs again.
    pub fn resume(&mut self) {
        if let Some(child) = &self.child {
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGCONT);
            }
        }
        self.paused = false;
    }

    /// SIGTERM (graceful stop; SIGCONT first if paused) and wait; the device stays.
    pub fn stop(&mut self) {
        if self.paused {
            self.resume();
        }
        if let Some(mut child) = self.child.take() {
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            for _ in 0..300 {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts again on the same device and port (after stop()).
    #[allow(dead_code)]
    pub fn start_on_same_port(&mut self) {
        self.fixed_port = self.port;
        self.launch();
    }

    /// Starts again on the same device (a new port).
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }
}

/// What to do when openssl is missing.
pub const NEED_OPENSSL: &str = "openssl is not installed: the TLS test makes its certificates with it \
(a dependency of the tests: tools/setup.sh installs Debian's openssl, or apt-get install openssl)";

/// A test CA (ca.pem) and a server certificate it signed for
/// localhost/127.0.0.1 (cert.pem, key.pem) in `dir`, made by openssl.
/// rustls refuses a self-signed CA certificate used as the server's own.
pub fn make_certificates(dir: &Path) -> bool {
    let script = r#"set -e
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=cowkv-test-ca -keyout ca.key -out ca.pem
openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout key.pem -out server.csr
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out cert.pem
"#;
    Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|st| st.success())
        .unwrap_or(false)
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
