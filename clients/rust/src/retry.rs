//! The opt-in retry of UNAVAILABLE on idempotent reads (docs/api.md
//! "Retrying UNAVAILABLE"). tonic has no service-config retries, so the
//! client runs gRPC's retryPolicy itself: a loop around the calls of
//! [`RETRIED_METHODS`] (and only those: an UNAVAILABLE write may have been
//! applied), with the same attempts, backoff and the call's deadline
//! bounding them all.

use std::time::Duration;

use crate::error::{Error, Result};

/// The idempotent methods retried ("service/method";
/// clients/conformance/unavailable_retry.json).
pub const RETRIED_METHODS: &[&str] = &[
    "cowkv.v1.KV/Get",
    "cowkv.v1.KV/Range",
    "cowkv.v1.Files/Stat",
    "cowkv.v1.Files/ReadDir",
    "cowkv.v1.Files/Read",
    "cowkv.v1.Files/ReadLink",
    "cowkv.v1.Files/Fiemap",
    "cowkv.v1.Files/GetXattr",
    "cowkv.v1.Files/ListXattrs",
    "cowkv.v1.Subvolumes/List",
    "cowkv.v1.Subvolumes/Show",
    "cowkv.v1.Lease/TimeToLive",
    "cowkv.v1.Lease/Leases",
    "cowkv.v1.Admin/Stats",
    "cowkv.v1.Admin/Version",
];

/// gRPC's retryPolicy for UNAVAILABLE ([`crate::Options::retry_unavailable`]):
/// at most `max_attempts` calls (2..=5), the wait before retry n random in
/// [0, b], b = min(`max_backoff`, `initial_backoff` * `backoff_multiplier`^(n-1)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnavailableRetry {
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub backoff_multiplier: f64,
}

impl Default for UnavailableRetry {
    /// 5 attempts, 100 ms doubling to 1 s.
    fn default() -> Self {
        UnavailableRetry {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            backoff_multiplier: 2.0,
        }
    }
}

impl UnavailableRetry {
    pub(crate) fn check(&self) -> Result<()> {
        if !(2..=5).contains(&self.max_attempts) {
            return Err(Error::invalid(
                "connect",
                format!("retry_unavailable: max_attempts {} not in [2, 5]", self.max_attempts),
            ));
        }
        if self.initial_backoff.is_zero() || self.max_backoff < self.initial_backoff || self.backoff_multiplier <= 0.0 {
            return Err(Error::invalid(
                "connect",
                "retry_unavailable: want 0 < initial_backoff <= max_backoff and backoff_multiplier > 0",
            ));
        }
        Ok(())
    }

    /// The bound of the wait before retry `n` (1-based).
    pub(crate) fn bound(&self, n: u32) -> Duration {
        let b = self.initial_backoff.as_secs_f64() * self.backoff_multiplier.powi(n as i32 - 1);
        Duration::from_secs_f64(b.min(self.max_backoff.as_secs_f64()))
    }
}
