package cowkv

// Unit tests without a server: error mapping, client-side checks and the
// transaction retry helper (against a fake KV service).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"cowkv.dev/cowkv/internal/pb"
)

func TestErrorMapping(t *testing.T) {
	for _, c := range []struct {
		code    codes.Code
		msg     string
		kind    error
		parents []error
		class   string
		errno   string
	}{
		{codes.InvalidArgument, "key: a key is 1..1024 bytes, not 0", ErrInvalidArgument, nil, "invalid_argument", ""},
		{codes.InvalidArgument, "ENAMETOOLONG: path: a name is at most 255 bytes", ErrInvalidArgument, nil, "invalid_argument", "ENAMETOOLONG"},
		{codes.NotFound, "ENOENT: no such file: /a/b", ErrNotFound, nil, "not_found", "ENOENT"},
		{codes.AlreadyExists, "subvolume 'x' exists", ErrAlreadyExists, nil, "already_exists", ""},
		{codes.FailedPrecondition, "ENOTEMPTY: directory not empty: /d", ErrFailedPrecondition, nil, "failed_precondition", "ENOTEMPTY"},
		{codes.FailedPrecondition, "cannot delete the default subvolume", ErrFailedPrecondition, nil, "failed_precondition", ""},
		{codes.FailedPrecondition, "snapshot: 'x' is not a read-only snapshot; reads of it would not be consistent", ErrFailedPrecondition, nil, "failed_precondition", ""},
		{codes.FailedPrecondition, "subvolume 'x' is a read-only snapshot", ErrReadOnly, []error{ErrFailedPrecondition}, "read_only", ""},
		{codes.FailedPrecondition, "EROFS: subvolume 'x' is a read-only snapshot", ErrReadOnly, []error{ErrFailedPrecondition}, "read_only", "EROFS"},
		{codes.FailedPrecondition, "store is read-only after a failed commit of generation 7", ErrReadOnly, []error{ErrFailedPrecondition}, "read_only", ""},
		{codes.Aborted, "transaction conflict on key \"k\"", ErrConflict, nil, "conflict", ""},
		{codes.OutOfRange, "transaction too old: read revision 3", ErrTooOld, nil, "too_old", ""},
		{codes.ResourceExhausted, "too many open transactions for this client (64)", ErrResourceExhausted, nil, "resource_exhausted", ""},
		{codes.ResourceExhausted, "no space left on device: a write needs ...", ErrNoSpace, []error{ErrResourceExhausted}, "no_space", ""},
		{codes.ResourceExhausted, "ENOSPC: no space left on device", ErrNoSpace, []error{ErrResourceExhausted}, "no_space", "ENOSPC"},
		{codes.DataLoss, "EIO: corrupt node", ErrDataLoss, nil, "data_loss", "EIO"},
		{codes.Unavailable, "cowkvd is stopping", ErrUnavailable, nil, "unavailable", ""},
		{codes.Unauthenticated, "missing token", ErrUnauthenticated, nil, "unauthenticated", ""},
		{codes.PermissionDenied, "no", ErrPermissionDenied, nil, "permission_denied", ""},
		{codes.DeadlineExceeded, "deadline", ErrDeadlineExceeded, []error{context.DeadlineExceeded}, "deadline_exceeded", ""},
		{codes.Canceled, "canceled", ErrCanceled, []error{context.Canceled}, "cancelled", ""},
		{codes.Unimplemented, "unknown method", ErrUnimplemented, nil, "unimplemented", ""},
		{codes.Internal, "device unavailable: EIO", ErrInternal, nil, "internal", ""},
		{codes.Unknown, "?", ErrInternal, nil, "internal", ""},
	} {
		err := wrap("Op", status.Error(c.code, c.msg))
		if !errors.Is(err, c.kind) {
			t.Errorf("%v %q: not %v: %v", c.code, c.msg, c.kind, err)
		}
		for _, p := range c.parents {
			if !errors.Is(err, p) {
				t.Errorf("%v %q: not %v", c.code, c.msg, p)
			}
		}
		for _, other := range []error{ErrNotFound, ErrConflict, ErrInternal, ErrReadOnly, ErrNoSpace} {
			if other != c.kind && errors.Is(err, other) {
				t.Errorf("%v %q: also %v", c.code, c.msg, other)
			}
		}
		if got := ErrorClass(err); got != c.class {
			t.Errorf("%v %q: class %q, want %q", c.code, c.msg, got, c.class)
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Errno != c.errno || ce.Code != c.code || ce.Op != "Op" {
			t.Errorf("%v %q: %+v", c.code, c.msg, ce)
		}
		if s, ok := status.FromError(err); !ok || s.Code() != c.code || s.Message() != c.msg {
			t.Errorf("%v %q: GRPCStatus %v", c.code, c.msg, s)
		}
		if Retryable(err) != (c.kind == ErrConflict || c.kind == ErrTooOld) {
			t.Errorf("%v: Retryable wrong", c.code)
		}
	}
	if wrap("Op", nil) != nil {
		t.Error("wrap(nil) != nil")
	}
	if err := wrap("Get", context.DeadlineExceeded); !errors.Is(err, ErrDeadlineExceeded) {
		t.Errorf("context deadline: %v", err)
	}
	if ErrorClass(errors.New("x")) != "unknown" || ErrorClass(nil) != "" {
		t.Error("ErrorClass of foreign errors")
	}
	wrapped := fmt.Errorf("outer: %w", wrap("Put", status.Error(codes.Aborted, "c")))
	if !errors.Is(wrapped, ErrConflict) || ErrorClass(wrapped) != "conflict" {
		t.Error("wrapped error lost its kind")
	}
}

// withInfo is the status cowkvd sends: ErrorInfo{reason, domain, metadata}
// in its details.
func withInfo(t *testing.T, code codes.Code, msg, reason string, md map[string]string) error {
	t.Helper()
	s, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "cowkv.dev", Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	return s.Err()
}

// The kind comes from the ErrorInfo reason, whatever the text says: the
// messages are chosen so that the text fallback would pick another kind.
func TestErrorMappingFromErrorInfo(t *testing.T) {
	for _, c := range []struct {
		code   codes.Code
		reason string
		msg    string
		kind   error
		class  string
	}{
		{codes.FailedPrecondition, "READ_ONLY_SNAPSHOT", "write refused", ErrReadOnly, "read_only"},
		{codes.FailedPrecondition, "EROFS", "store", ErrReadOnly, "read_only"},
		{codes.FailedPrecondition, "ENOTEMPTY", "read-only thing is not empty", ErrFailedPrecondition, "failed_precondition"},
		{codes.ResourceExhausted, "ENOSPC", "device full", ErrNoSpace, "no_space"},
		{codes.ResourceExhausted, "SERVER_BUSY", "no space in the queue", ErrResourceExhausted, "resource_exhausted"},
		{codes.ResourceExhausted, "LIMIT", "no space for the response", ErrResourceExhausted, "resource_exhausted"},
		{codes.Aborted, "CONFLICT", "x", ErrConflict, "conflict"},
		{codes.OutOfRange, "TOO_OLD", "x", ErrTooOld, "too_old"},
		{codes.OutOfRange, "COMPACTED", "x", ErrCompacted, "compacted"},
		{codes.OutOfRange, "FUTURE_REVISION", "x", ErrFutureRevision, "future_revision"},
		{codes.NotFound, "LEASE_NOT_FOUND", "x", ErrNotFound, "not_found"},
		{codes.Internal, "DEVICE_UNAVAILABLE", "x", ErrInternal, "internal"},
		{codes.Unavailable, "STOPPING", "x", ErrUnavailable, "unavailable"},
	} {
		err := wrap("Op", withInfo(t, c.code, c.msg, c.reason, map[string]string{"compact_revision": "42"}))
		var ce *Error
		if !errors.As(err, &ce) || ce.Kind() != c.kind || ErrorClass(err) != c.class || ce.Reason != c.reason {
			t.Errorf("%v %s: %+v, want %v", c.code, c.reason, ce, c.kind)
			continue
		}
		if ce.CompactRevision != 42 || ce.Metadata["compact_revision"] != "42" {
			t.Errorf("%s: compact revision %d", c.reason, ce.CompactRevision)
		}
		wantRetry := c.kind == ErrConflict || c.kind == ErrTooOld || c.kind == ErrCompacted
		if Retryable(err) != wantRetry || ce.Retryable() != wantRetry {
			t.Errorf("%s: Retryable %v", c.reason, Retryable(err))
		}
		if s, _ := status.FromError(err); len(s.Details()) != 1 {
			t.Errorf("%s: GRPCStatus lost the details", c.reason)
		}
	}
	if !errors.Is(wrap("Op", withInfo(t, codes.OutOfRange, "x", "COMPACTED", nil)), ErrTooOld) {
		t.Error("ErrCompacted is not also ErrTooOld")
	}
	// errno from the metadata, not from the text.
	var ce *Error
	errors.As(wrap("Op", withInfo(t, codes.FailedPrecondition, "no prefix", "READ_ONLY_SNAPSHOT", map[string]string{"errno": "EROFS"})), &ce)
	if ce.Errno != "EROFS" {
		t.Errorf("errno %q", ce.Errno)
	}
}

func TestClientSideChecks(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct {
		name  string
		err   error
		errno string
	}{
		{"empty key", checkKey("Put", "key", nil), ""},
		{"long key", checkKey("Put", "key", []byte(long(1025))), ""},
		{"long value", checkValue("Put", make([]byte, MaxValueBytes+1)), ""},
		{"long bound", checkBound("Range", "end", []byte(long(1026))), ""},
		{"name with /", checkName("Create", "name", "a/b"), ""},
		{"name with NUL", checkName("Create", "name", "a\x00b"), ""},
		{"empty name", checkName("Create", "name", ""), ""},
		{"long name", checkName("Create", "name", long(256)), ""},
		{"subvolume with /", checkSubvolume("Get", "a/b"), ""},
		{"path ..", checkPath("Mkdir", "path", "/a/../b"), "EINVAL"},
		{"path .", checkPath("Mkdir", "path", "./b"), "EINVAL"},
		{"path NUL", checkPath("Mkdir", "path", "/a\x00"), "EINVAL"},
		{"long component", checkPath("Mkdir", "path", "/"+long(256)), "ENAMETOOLONG"},
		{"long path", checkPath("Mkdir", "path", strings.Repeat("/abcdefgh", 456)), "ENAMETOOLONG"},
		{"deep path", checkPath("Mkdir", "path", strings.Repeat("/a", 257)), "EINVAL"},
		{"prefix with start", KeyRange{Start: []byte("a"), Prefix: []byte("p")}.check("Range"), ""},
	} {
		var ce *Error
		if !errors.As(c.err, &ce) || !errors.Is(c.err, ErrInvalidArgument) || ce.Errno != c.errno {
			t.Errorf("%s: got %v (errno %q), want invalid_argument %s", c.name, c.err, ce.Errno, c.errno)
		}
	}
	for _, ok := range []error{
		checkKey("Put", "key", []byte("k")), checkKey("Put", "key", []byte(long(1024))),
		checkValue("Put", nil), checkName("Create", "name", long(255)), checkName("Create", "name", "data@2026-11-22"),
		checkSubvolume("Get", ""), checkPath("Mkdir", "path", ""), checkPath("Mkdir", "path", "/"),
		checkPath("Mkdir", "path", "a//b/"), checkPath("Mkdir", "path", "/..a/b.."), checkPath("Mkdir", "path", "/"+long(255)),
		checkPath("Mkdir", "path", strings.Repeat("/a", 256)),
	} {
		if ok != nil {
			t.Errorf("refused a valid argument: %v", ok)
		}
	}
	// The public methods check before calling: a nil connection would panic otherwise.
	db := &DB{}
	ctx := context.Background()
	if _, err := db.Subvolume("").Put(ctx, nil, []byte("v")); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Put empty key: %v", err)
	}
	if _, err := db.CreateSubvolume(ctx, "a/b"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CreateSubvolume a/b: %v", err)
	}
	if _, err := db.Subvolume("").Mkdir(ctx, "/x/..", 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Mkdir ..: %v", err)
	}
	if _, err := db.Subvolume("").If().Then(OpPut(nil, nil)).Commit(ctx); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Txn put empty key: %v", err)
	}
	for _, err := range db.Subvolume("").Range(ctx, KeyRange{Start: []byte("a"), Prefix: []byte("b")}) {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Range prefix+start: %v", err)
		}
	}
}

// fakeKV scripts Begin/TxnGet/TxnPut/Commit/Abort for the retry helper.
type fakeKV struct {
	pb.KVClient
	commits  []error // results of successive commits (nil = ok); past the end: ok
	begins   int
	aborts   int
	nCommits int
	beginErr error
}

func (f *fakeKV) Begin(context.Context, *pb.BeginRequest, ...grpc.CallOption) (*pb.BeginResponse, error) {
	if f.beginErr != nil {
		return nil, f.beginErr
	}
	f.begins++
	return &pb.BeginResponse{Handle: uint64(f.begins), ReadRevision: 10, LeaseMs: 30000}, nil
}

func (f *fakeKV) TxnPut(context.Context, *pb.TxnPutRequest, ...grpc.CallOption) (*pb.TxnPutResponse, error) {
	return &pb.TxnPutResponse{}, nil
}

func (f *fakeKV) Commit(context.Context, *pb.CommitRequest, ...grpc.CallOption) (*pb.CommitResponse, error) {
	i := f.nCommits
	f.nCommits++
	if i < len(f.commits) && f.commits[i] != nil {
		return nil, f.commits[i]
	}
	return &pb.CommitResponse{Revision: 11}, nil
}

func (f *fakeKV) Abort(context.Context, *pb.AbortRequest, ...grpc.CallOption) (*pb.AbortResponse, error) {
	f.aborts++
	return &pb.AbortResponse{}, nil
}

func recordSleeps(d *[]time.Duration) TxnOption {
	return func(o *txnOptions) {
		o.sleep = func(_ context.Context, x time.Duration) error { *d = append(*d, x); return nil }
	}
}

func TestTxnRetriesConflicts(t *testing.T) {
	conflict := status.Error(codes.Aborted, "transaction conflict")
	tooOld := status.Error(codes.OutOfRange, "transaction too old")
	f := &fakeKV{commits: []error{conflict, tooOld, conflict}}
	db := &DB{kv: f}
	var sleeps []time.Duration
	calls := 0
	err := db.RunInTransaction(context.Background(), func(tx *Tx) error {
		calls++
		return tx.Put(context.Background(), []byte("k"), []byte("v"))
	}, Backoff(10*time.Millisecond, 25*time.Millisecond), recordSleeps(&sleeps))
	if err != nil || calls != 4 || f.begins != 4 || f.nCommits != 4 || f.aborts != 0 {
		t.Fatalf("err %v calls %d begins %d commits %d aborts %d", err, calls, f.begins, f.nCommits, f.aborts)
	}
	// Jittered exponential backoff: [d/2, d] with d = 10, 20, 25 (capped) ms.
	for i, max := range []time.Duration{10, 20, 25} {
		max *= time.Millisecond
		if sleeps[i] < max/2 || sleeps[i] > max {
			t.Errorf("sleep %d = %v, want in [%v, %v]", i, sleeps[i], max/2, max)
		}
	}
}

func TestTxnGivesUp(t *testing.T) {
	conflict := status.Error(codes.Aborted, "transaction conflict")
	f := &fakeKV{commits: []error{conflict, conflict, conflict, conflict}}
	var sleeps []time.Duration
	err := (&DB{kv: f}).RunInTransaction(context.Background(), func(*Tx) error { return nil }, MaxAttempts(3), recordSleeps(&sleeps))
	if !errors.Is(err, ErrConflict) || f.nCommits != 3 || len(sleeps) != 2 {
		t.Fatalf("err %v commits %d sleeps %d", err, f.nCommits, len(sleeps))
	}
}

// The one retry rule (docs/api.md "Retrying transactions"), from
// clients/conformance/retry_rule.json: with the defaults, a transaction that
// always conflicts runs max_attempts times and every wait is in its bounds.
func TestRetryRuleDefaults(t *testing.T) {
	raw, err := os.ReadFile("../conformance/retry_rule.json")
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		MaxAttempts int        `json:"max_attempts"`
		FirstWaitMs int64      `json:"first_wait_ms"`
		MaxWaitMs   int64      `json:"max_wait_ms"`
		WaitsMs     [][2]int64 `json:"waits_ms"`
	}
	if err := json.Unmarshal(raw, &rule); err != nil {
		t.Fatal(err)
	}
	if DefaultMaxAttempts != rule.MaxAttempts || DefaultFirstBackoff != time.Duration(rule.FirstWaitMs)*time.Millisecond ||
		DefaultMaxBackoff != time.Duration(rule.MaxWaitMs)*time.Millisecond {
		t.Fatalf("defaults %d %v %v differ from %+v", DefaultMaxAttempts, DefaultFirstBackoff, DefaultMaxBackoff, rule)
	}
	for round := 0; round < 5; round++ {
		conflict := status.Error(codes.Aborted, "transaction conflict")
		f := &fakeKV{commits: slices.Repeat([]error{conflict}, 2*rule.MaxAttempts)}
		var sleeps []time.Duration
		calls := 0
		// Txn, the deprecated name, is the same helper.
		err := (&DB{kv: f}).Txn(context.Background(), func(*Tx) error { calls++; return nil }, recordSleeps(&sleeps))
		if !errors.Is(err, ErrConflict) || calls != rule.MaxAttempts || len(sleeps) != len(rule.WaitsMs) {
			t.Fatalf("err %v calls %d sleeps %d, want %d runs", err, calls, len(sleeps), rule.MaxAttempts)
		}
		for i, b := range rule.WaitsMs {
			if lo, hi := time.Duration(b[0])*time.Millisecond, time.Duration(b[1])*time.Millisecond; sleeps[i] < lo || sleeps[i] > hi {
				t.Errorf("wait %d = %v, want in [%v, %v]", i+1, sleeps[i], lo, hi)
			}
		}
	}
}

func TestTxnDoesNotRetryOtherErrors(t *testing.T) {
	f := &fakeKV{}
	mine := errors.New("application says no")
	calls := 0
	err := (&DB{kv: f}).RunInTransaction(context.Background(), func(*Tx) error { calls++; return mine })
	if err != mine || calls != 1 || f.aborts != 1 || f.nCommits != 0 {
		t.Fatalf("err %v calls %d aborts %d commits %d", err, calls, f.aborts, f.nCommits)
	}
	f = &fakeKV{commits: []error{status.Error(codes.FailedPrecondition, "subvolume 'x' is a read-only snapshot")}}
	err = (&DB{kv: f}).RunInTransaction(context.Background(), func(*Tx) error { return nil })
	if !errors.Is(err, ErrReadOnly) || f.nCommits != 1 {
		t.Fatalf("read-only commit: %v after %d commits", err, f.nCommits)
	}
	f = &fakeKV{beginErr: status.Error(codes.NotFound, "subvolume 'x' not found")}
	if err := (&DB{kv: f}).RunInTransaction(context.Background(), func(*Tx) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("begin error: %v", err)
	}
}

func TestTxnRetriesExpiredHandleFromBody(t *testing.T) {
	f := &fakeKV{}
	calls := 0
	err := (&DB{kv: f}).RunInTransaction(context.Background(), func(*Tx) error {
		if calls++; calls == 1 {
			return wrap("TxnGet", status.Error(codes.Aborted, "transaction expired"))
		}
		return nil
	}, recordSleeps(new([]time.Duration)))
	if err != nil || calls != 2 || f.aborts != 1 || f.nCommits != 1 {
		t.Fatalf("err %v calls %d aborts %d commits %d", err, calls, f.aborts, f.nCommits)
	}
}

func TestTxnStopsOnContext(t *testing.T) {
	f := &fakeKV{commits: []error{status.Error(codes.Aborted, "conflict")}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := (&DB{kv: f}).RunInTransaction(ctx, func(*Tx) error { return nil }, Backoff(time.Hour, time.Hour))
	if !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestBackoffBounds(t *testing.T) {
	for n := 1; n < 40; n++ {
		d := backoff(n, 10*time.Millisecond, time.Second)
		if d < 5*time.Millisecond || d > time.Second {
			t.Fatalf("backoff(%d) = %v", n, d)
		}
	}
}

// SetAttr sends exactly the fields an AttrChange names (FUSE's FATTR_* bits).
func TestAttrChangeFields(t *testing.T) {
	mode, uid, size := uint32(0o600), uint32(7), uint64(5)
	at := time.Unix(1, 2)
	for _, c := range []struct {
		c    AttrChange
		want uint32
	}{
		{AttrChange{}, 0},
		{AttrChange{Mode: &mode}, 1},
		{AttrChange{UID: &uid}, 2},
		{AttrChange{GID: &uid}, 4},
		{AttrChange{Size: &size}, 8},
		{AttrChange{Atime: &at}, 16},
		{AttrChange{Mtime: &at}, 32},
		{AttrChange{Atime: &at, AtimeNow: true}, 128},
		{AttrChange{MtimeNow: true}, 256},
	} {
		req := c.c.request("sv", "/f")
		if req.GetFields() != c.want {
			t.Errorf("%+v: fields %d, want %d", c.c, req.GetFields(), c.want)
		}
	}
	req := AttrChange{Mode: &mode, Size: &size, Atime: &at}.request("sv", "/f")
	if req.GetMode() != 0o600 || req.GetSize() != 5 || req.GetAtimeNs() != 1_000_000_002 || req.GetUid() != 0 {
		t.Errorf("values %+v", req)
	}
}
