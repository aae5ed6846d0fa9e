//! Client-side checks of what the server would refuse with INVALID_ARGUMENT
//! (docs/api.md "Limits", server/validate.cc), so a bad call fails before it
//! is sent, with the same variant the server's answer maps to.

use crate::error::{Error, Result};
use crate::spec;

// The server's limits (clients/spec/limits.json, through the generated crate::spec).
pub const MAX_KEY_BYTES: usize = spec::MAX_KEY_BYTES;
pub const MAX_VALUE_BYTES: usize = spec::MAX_VALUE_BYTES;
pub const MAX_BOUND_BYTES: usize = spec::MAX_BOUND_BYTES;
pub const MAX_NAME_BYTES: usize = spec::MAX_NAME_BYTES;
pub const MAX_PATH_BYTES: usize = spec::MAX_PATH_BYTES;
pub const MAX_PATH_DEPTH: usize = spec::MAX_PATH_DEPTH;
pub const MAX_SYMLINK_BYTES: usize = spec::MAX_SYMLINK_BYTES;
pub const MAX_LEASE_MS: u64 = spec::MAX_LEASE_MS;
/// A lease's TTL is 1..MAX_LEASE_TTL seconds (docs/api.md "Leases").
pub const MAX_LEASE_TTL: i64 = spec::MAX_LEASE_TTL_SECONDS;

pub(crate) fn key(op: &'static str, key: &[u8]) -> Result<()> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(Error::invalid(op, format!("key: a key is 1..{MAX_KEY_BYTES} bytes, not {}", key.len())));
    }
    Ok(())
}

pub(crate) fn value(op: &'static str, value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::invalid(op, format!("value: at most {MAX_VALUE_BYTES} bytes, not {}", value.len())));
    }
    Ok(())
}

pub(crate) fn bound(op: &'static str, field: &str, b: &[u8]) -> Result<()> {
    if b.len() > MAX_BOUND_BYTES {
        return Err(Error::invalid(
            op,
            format!("{field}: a range bound is at most {MAX_BOUND_BYTES} bytes, not {}", b.len()),
        ));
    }
    Ok(())
}

/// A subvolume name: 1..255 bytes, no '/' or NUL.
pub(crate) fn subvolume_name(op: &'static str, field: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(
            op,
            format!("{field}: a subvolume name is 1..{MAX_NAME_BYTES} bytes, not {}", name.len()),
        ));
    }
    if name.contains('/') || name.contains('\0') {
        return Err(Error::invalid(op, format!("{field}: a subvolume name may not contain '/' or NUL: {name:?}")));
    }
    Ok(())
}

/// A path: at most 4096 bytes and 256 components of 1..255 bytes, no NUL,
/// no "." or ".." component. Empty is the root directory.
pub(crate) fn path(op: &'static str, field: &str, path: &str) -> Result<()> {
    if path.len() > MAX_PATH_BYTES {
        return Err(Error::invalid(
            op,
            format!("ENAMETOOLONG: {field}: a path is at most {MAX_PATH_BYTES} bytes, not {}", path.len()),
        ));
    }
    if path.contains('\0') {
        return Err(Error::invalid(op, format!("EINVAL: {field}: a path may not contain NUL")));
    }
    let mut depth = 0;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if part.len() > MAX_NAME_BYTES {
            return Err(Error::invalid(
                op,
                format!("ENAMETOOLONG: {field}: a name is at most {MAX_NAME_BYTES} bytes, not {}", part.len()),
            ));
        }
        if part == "." || part == ".." {
            return Err(Error::invalid(op, format!("EINVAL: {field}: \"{part}\" is not allowed in a path: {path}")));
        }
        depth += 1;
        if depth > MAX_PATH_DEPTH {
            return Err(Error::invalid(op, format!("EINVAL: {field}: a path has at most {MAX_PATH_DEPTH} components")));
        }
    }
    Ok(())
}

pub(crate) fn symlink_target(op: &'static str, target: &str) -> Result<()> {
    if target.is_empty() || target.len() > MAX_SYMLINK_BYTES {
        return Err(Error::invalid(
            op,
            format!("EINVAL: target: a symlink target is 1..{MAX_SYMLINK_BYTES} bytes, not {}", target.len()),
        ));
    }
    Ok(())
}

pub(crate) fn lease(op: &'static str, lease_ms: u64) -> Result<()> {
    if lease_ms > MAX_LEASE_MS {
        return Err(Error::invalid(op, format!("lease_ms: at most {MAX_LEASE_MS}, not {lease_ms}")));
    }
    Ok(())
}

pub(crate) fn lease_ttl(op: &'static str, ttl: i64) -> Result<()> {
    if !(1..=MAX_LEASE_TTL).contains(&ttl) {
        return Err(Error::invalid(op, format!("ttl: {ttl} out of range 1..{MAX_LEASE_TTL}")));
    }
    Ok(())
}

/// The id of a lease to grant: >= 0 (0 = the server picks).
pub(crate) fn lease_id(op: &'static str, id: i64) -> Result<()> {
    if id < 0 {
        return Err(Error::invalid(op, format!("id: {id} < 0")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(key("put", b"").is_err());
        assert!(key("put", &[b'k'; 1024]).is_ok());
        assert!(key("put", &[b'k'; 1025]).is_err());
        assert!(value("put", &vec![0; MAX_VALUE_BYTES]).is_ok());
        assert!(value("put", &vec![0; MAX_VALUE_BYTES + 1]).is_err());
    }

    #[test]
    fn leases() {
        for bad in [0, -1, MAX_LEASE_TTL + 1, i64::MIN] {
            assert!(matches!(lease_ttl("lease-grant", bad), Err(Error::InvalidArgument(_))), "{bad}");
        }
        assert!(lease_ttl("lease-grant", 1).is_ok() && lease_ttl("lease-grant", MAX_LEASE_TTL).is_ok());
        assert!(lease_id("lease-grant", -1).is_err());
        assert!(lease_id("lease-grant", 0).is_ok() && lease_id("lease-grant", i64::MAX).is_ok());
    }

    #[test]
    fn names() {
        for bad in ["", "a/b", "a\0b"] {
            assert!(subvolume_name("create", "name", bad).is_err(), "{bad:?}");
        }
        assert!(subvolume_name("create", "name", &"n".repeat(256)).is_err());
        assert!(subvolume_name("create", "name", &"n".repeat(255)).is_ok());
        assert!(subvolume_name("create", "name", "data@2026-11-22 x").is_ok());
    }

    #[test]
    fn paths() {
        for bad in ["/a/../b", "/..", "x/./y", ".", "a\0"] {
            let e = path("mkdir", "path", bad).unwrap_err();
            assert_eq!(e.errno_name(), Some("EINVAL"), "{bad:?}");
        }
        let e = path("mkdir", "path", &"n".repeat(256)).unwrap_err();
        assert_eq!(e.errno_name(), Some("ENAMETOOLONG"));
        let e = path("mkdir", "path", &"/a".repeat(2049)).unwrap_err();
        assert_eq!(e.errno_name(), Some("ENAMETOOLONG"));
        assert!(path("stat", "path", &"/a".repeat(257)).is_err());
        for good in ["", "/", "a/b", "//a//b/", "/a...b/.c"] {
            assert!(path("stat", "path", good).is_ok(), "{good:?}");
        }
    }
}
