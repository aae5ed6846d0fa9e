//! The opt-in retry of UNAVAILABLE (docs/api.md "Retrying UNAVAILABLE"):
//! the method list and defaults equal clients/conformance/
//! unavailable_retry.json; against a server down for the first attempt(s)
//! that comes back on its port, a read succeeds with the option and fails
//! fast with Error::Unavailable without it; a write is never retried.

mod common;

use std::time::{Duration, Instant};

use cowkv::{Client, Error, Options, UnavailableRetry};

#[test]
fn policy_matches_the_spec() {
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("../conformance/unavailable_retry.json").unwrap()).unwrap();
    let methods: Vec<&str> = spec["methods"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(methods, cowkv::RETRIED_METHODS);
    let d = &spec["defaults"];
    let r = UnavailableRetry::default();
    assert_eq!(d["max_attempts"].as_u64().unwrap(), r.max_attempts as u64);
    assert_eq!(d["initial_backoff_ms"].as_u64().unwrap(), r.initial_backoff.as_millis() as u64);
    assert_eq!(d["max_backoff_ms"].as_u64().unwrap(), r.max_backoff.as_millis() as u64);
    assert_eq!(d["backoff_multiplier"].as_f64().unwrap(), r.backoff_multiplier);
    let bad = Options::new("127.0.0.1:1").retry_unavailable(UnavailableRetry { max_attempts: 6, ..r });
    assert!(matches!(Client::connect(bad), Err(Error::InvalidArgument(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_outlives_a_restart_only_with_the_option() {
    let mut server = common::Server::start("64M", None);
    let addr = server.address();
    Client::connect(Options::new(addr.clone())).unwrap().subvolume("").unwrap().put("k", "v").await.unwrap();
    server.stop();

    let plain = Client::connect(Options::new(addr.clone())).unwrap();
    let t0 = Instant::now();
    let r = plain.subvolume("").unwrap().get("k").await;
    assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));

    // The same backoffs as the other clients' tests (the loop here does not
    // depend on a channel's reconnect backoff, but tonic's does).
    let policy = UnavailableRetry {
        initial_backoff: Duration::from_secs(2),
        max_backoff: Duration::from_secs(5),
        ..UnavailableRetry::default()
    };
    let patient = Client::connect(Options::new(addr).retry_unavailable(policy)).unwrap();
    let put = patient.subvolume("").unwrap().put("k", "w").await;
    assert!(matches!(put, Err(Error::Unavailable(_))), "a put is never retried: {put:?}");
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        server.start_on_same_port();
        server
    });
    let t0 = Instant::now();
    let got = patient.subvolume("").unwrap().get("k").await;
    let mut server = restarter.join().unwrap();
    assert_eq!(got.unwrap().as_deref(), Some(&b"v"[..]));
    assert!(t0.elapsed() >= Duration::from_millis(300));
    server.stop();
}
