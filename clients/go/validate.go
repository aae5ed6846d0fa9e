package cowkv

import "strings"

// Limits the server enforces (docs/api.md, "Limits"; clients/spec/limits.json,
// through spec_gen.go); the client checks the same ones before sending,
// with the same error class and POSIX name.
const (
	MaxKeyBytes     = specMaxKeyBytes        // 1024
	MaxValueBytes   = specMaxValueBytes      // 16 MiB
	MaxNameBytes    = specMaxNameBytes       // 255
	MaxPathBytes    = specMaxPathBytes       // 4096
	MaxPathDepth    = specMaxPathDepth       // 256 components
	MaxWriteChunk   = specMaxWriteChunkBytes // 4 MiB
	MaxTxnOps       = specMaxTxnOps          // 10,000
	MaxLease        = specMaxLeaseMs         // milliseconds: 600,000
	maxBoundBytes   = specMaxBoundBytes
	maxSymlinkBytes = specMaxSymlinkBytes
)

func checkKey(op, field string, key []byte) error {
	if len(key) == 0 || len(key) > MaxKeyBytes {
		return invalid(op, "%s: a key is 1..%d bytes, not %d", field, MaxKeyBytes, len(key))
	}
	return nil
}

func checkValue(op string, value []byte) error {
	if len(value) > MaxValueBytes {
		return invalid(op, "value: at most %d bytes, not %d", MaxValueBytes, len(value))
	}
	return nil
}

func checkBound(op, field string, b []byte) error {
	if len(b) > maxBoundBytes {
		return invalid(op, "%s: a range bound is at most %d bytes, not %d", field, maxBoundBytes, len(b))
	}
	return nil
}

// checkName checks a subvolume name: 1..255 bytes, no '/' or NUL.
func checkName(op, field, name string) error {
	if len(name) == 0 || len(name) > MaxNameBytes {
		return invalid(op, "%s: a subvolume name is 1..%d bytes, not %d", field, MaxNameBytes, len(name))
	}
	if strings.ContainsAny(name, "/\x00") {
		return invalid(op, "%s: a subvolume name may not contain '/' or NUL: %q", field, name)
	}
	return nil
}

// checkSubvolume checks the subvolume of a KV or Files call ("" = default).
func checkSubvolume(op, name string) error {
	if name == "" {
		return nil
	}
	return checkName(op, "subvolume", name)
}

// checkPath checks a file path: at most 4096 bytes and 256 components of
// 1..255 bytes, no NUL, no "." or ".." ("" and "/" are the root).
func checkPath(op, field, path string) error {
	if len(path) > MaxPathBytes {
		return invalid(op, "ENAMETOOLONG: %s: a path is at most %d bytes, not %d", field, MaxPathBytes, len(path))
	}
	if strings.IndexByte(path, 0) >= 0 {
		return invalid(op, "EINVAL: %s: a path may not contain NUL", field)
	}
	depth := 0
	for _, part := range strings.Split(path, "/") {
		if part == "" {
			continue
		}
		if len(part) > MaxNameBytes {
			return invalid(op, "ENAMETOOLONG: %s: a name is at most %d bytes, not %d", field, MaxNameBytes, len(part))
		}
		if part == "." || part == ".." {
			return invalid(op, "EINVAL: %s: %q is not a valid name: %s", field, part, path)
		}
		if depth++; depth > MaxPathDepth {
			return invalid(op, "EINVAL: %s: a path has at most %d components", field, MaxPathDepth)
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
