package cowkv

// The client's tables against clients/spec/*.json itself (not only the
// generated spec_gen.go): every class, code, reason, watch cancel code and
// text fallback of the spec maps as it says, and the limits are the spec's.

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"cowkv.dev/cowkv/internal/pb"
)

type specJSON struct {
	Classes []struct {
		Name, Code string
		Parent     *string
		Retryable  bool
	}
	Codes []struct {
		Name   string
		Number int
		Class  string
	}
	Reasons []struct {
		Reason string
		Codes  []string
		Class  *string
	}
	WatchCancel []struct {
		CancelCode string `json:"cancel_code"`
		Number     int32
		Class      string
	} `json:"watch_cancel"`
	Fallbacks []struct {
		Code, Class        string
		Prefixes, Contains []string
	}
	Limits []struct {
		Name  string
		Value int64
	}
}

func readSpec(t *testing.T) specJSON {
	t.Helper()
	var s specJSON
	for _, f := range []string{"../spec/errors.json", "../spec/limits.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return s
}

func TestSpecClassesAndCodes(t *testing.T) {
	s := readSpec(t)
	codeNum := map[string]codes.Code{}
	for _, c := range s.Codes {
		codeNum[c.Name] = codes.Code(c.Number)
	}
	for _, c := range s.Codes {
		if got := ErrorClass(newError("Op", codes.Code(c.Number), "m")); got != c.Class {
			t.Errorf("code %s: class %q, want %q", c.Name, got, c.Class)
		}
	}
	for _, c := range s.Classes {
		e := &Error{Code: codeNum[c.Code], kind: classByName(t, c.Name)}
		if e.Retryable() != c.Retryable {
			t.Errorf("%s: Retryable %v, want %v", c.Name, e.Retryable(), c.Retryable)
		}
		if c.Parent != nil && !errors.Is(e, classByName(t, *c.Parent)) {
			t.Errorf("%s is not also %s", c.Name, *c.Parent)
		}
	}
}

func classByName(t *testing.T, name string) error {
	for _, r := range specClassRows {
		if r.name == name {
			return r.kind
		}
	}
	t.Fatalf("no sentinel for class %q", name)
	return nil
}

func TestSpecReasonsDecide(t *testing.T) {
	s := readSpec(t)
	codeClass := map[string]string{}
	for _, c := range s.Codes {
		codeClass[c.Name] = c.Class
	}
	for _, r := range s.Reasons {
		for _, code := range r.Codes {
			want := codeClass[code]
			if r.Class != nil {
				want = *r.Class
			}
			st := withInfo(t, byName(code), "read-only no space", r.Reason, nil)
			if got := ErrorClass(wrap("Op", st)); got != want {
				t.Errorf("%s %s: class %q, want %q", code, r.Reason, got, want)
			}
		}
	}
	for _, w := range s.WatchCancel {
		err := cancelError(&pb.WatchResponse{CancelCode: pb.WatchCancelCode(w.Number), CancelReason: "m"})
		if got := ErrorClass(err); got != w.Class {
			t.Errorf("%s: class %q, want %q", w.CancelCode, got, w.Class)
		}
	}
	for _, f := range s.Fallbacks {
		for _, text := range append(append([]string{}, f.Prefixes...), f.Contains...) {
			msg := text + " something"
			if got := ErrorClass(wrap("Op", status.Error(byName(f.Code), msg))); got != f.Class {
				t.Errorf("%s %q without ErrorInfo: class %q, want %q", f.Code, msg, got, f.Class)
			}
		}
	}
}

func byName(code string) codes.Code {
	for c := codes.Code(0); c <= 16; c++ {
		if strings.EqualFold(strings.ReplaceAll(code, "_", ""), c.String()) ||
			(code == "CANCELLED" && c == codes.Canceled) {
			return c
		}
	}
	return codes.Unknown
}

func TestSpecLimits(t *testing.T) {
	got := map[string]int64{
		"max_key_bytes": MaxKeyBytes, "max_value_bytes": MaxValueBytes, "max_bound_bytes": maxBoundBytes,
		"max_name_bytes": MaxNameBytes, "max_path_bytes": MaxPathBytes, "max_path_depth": MaxPathDepth,
		"max_symlink_bytes": maxSymlinkBytes, "max_write_chunk_bytes": MaxWriteChunk,
		"max_txn_ops": MaxTxnOps, "max_lease_ms": MaxLease, "max_lease_ttl_seconds": MaxLeaseTTL,
	}
	s := readSpec(t)
	for _, l := range s.Limits {
		if v, ok := got[l.Name]; !ok || v != l.Value {
			t.Errorf("limit %s: client %d (known %v), spec %d", l.Name, v, ok, l.Value)
		}
		delete(got, l.Name)
	}
	for name := range got {
		t.Errorf("limit %s is not in clients/spec/limits.json", name)
	}
}
