package cowkv

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors, one per kind of failure (docs/api.md, "Errors"). Every
// error the client returns for a failed call is an *Error that matches
// exactly one of them with errors.Is, plus its parent for the two refined
// kinds: ErrReadOnly is also ErrFailedPrecondition, ErrNoSpace is also
// ErrResourceExhausted.
var (
	ErrInvalidArgument    = errors.New("cowkv: invalid argument")     // INVALID_ARGUMENT: fix the request
	ErrNotFound           = errors.New("cowkv: not found")            // NOT_FOUND: key, subvolume, file or handle absent
	ErrAlreadyExists      = errors.New("cowkv: already exists")       // ALREADY_EXISTS: name taken
	ErrFailedPrecondition = errors.New("cowkv: failed precondition")  // FAILED_PRECONDITION: do not retry until something changes
	ErrReadOnly           = errors.New("cowkv: read-only")            // FAILED_PRECONDITION: read-only snapshot or store (EROFS)
	ErrConflict           = errors.New("cowkv: transaction conflict") // ABORTED: retry the whole transaction
	ErrTooOld             = errors.New("cowkv: transaction too old")  // OUT_OF_RANGE: retry the whole transaction
	ErrResourceExhausted  = errors.New("cowkv: resource exhausted")   // RESOURCE_EXHAUSTED: a server limit
	ErrNoSpace            = errors.New("cowkv: no space")             // RESOURCE_EXHAUSTED: device full (ENOSPC)
	ErrDataLoss           = errors.New("cowkv: data loss")            // DATA_LOSS: a checksum failed; run Admin.Check
	ErrUnavailable        = errors.New("cowkv: unavailable")          // UNAVAILABLE: server stopping or unreachable; retry the call
	ErrUnauthenticated    = errors.New("cowkv: unauthenticated")      // UNAUTHENTICATED: token missing or wrong
	ErrPermissionDenied   = errors.New("cowkv: permission denied")    // PERMISSION_DENIED
	ErrDeadlineExceeded   = errors.New("cowkv: deadline exceeded")    // DEADLINE_EXCEEDED (also matches context.DeadlineExceeded)
	ErrCanceled           = errors.New("cowkv: canceled")             // CANCELLED (also matches context.Canceled)
	ErrUnimplemented      = errors.New("cowkv: unimplemented")        // UNIMPLEMENTED: server too old for this call
	ErrInternal           = errors.New("cowkv: internal")             // INTERNAL, UNKNOWN: device I/O error, unparsable response

	// Ends of a watcher (Watch), from the server's cancel code.
	ErrCompacted        = errors.New("cowkv: compacted")         // a read or watch start at a compacted revision (also ErrTooOld); Error.CompactRevision is the oldest still served
	ErrFutureRevision   = errors.New("cowkv: future revision")   // OUT_OF_RANGE, reason FUTURE_REVISION: a read at a revision not reached yet (not retryable)
	ErrSubvolumeDeleted = errors.New("cowkv: subvolume deleted") // the watched subvolume was deleted
	ErrSlowReader       = errors.New("cowkv: slow reader")       // the watcher's events were read slower than they came; restart after the last event read
)

// Error is the error of a failed call: the operation, the gRPC code, the
// server's message and, for Files errors, the POSIX name the message starts
// with ("ENOTEMPTY"). Match it with errors.Is against the sentinels.
type Error struct {
	Op      string     // the client method, e.g. "Put"
	Code    codes.Code // the gRPC status code
	Message string     // the server's (or the client's own check's) reason
	Errno   string     // POSIX name for Files errors, or ""
	// Reason is the google.rpc.ErrorInfo reason the server sent ("ENOENT",
	// "READ_ONLY_SNAPSHOT", "CONFLICT", ...; docs/api.md "Errors"), "" from
	// a server that sends none or for the client's own checks. Metadata is
	// the ErrorInfo's metadata ("errno", "compact_revision"), or nil.
	Reason   string
	Metadata map[string]string
	// CompactRevision: for ErrCompacted, the oldest revision still served.
	CompactRevision uint64
	kind            error          // the most specific sentinel
	st              *status.Status // the server's status, details included (nil for the client's own)
}

func (e *Error) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("%v: %s", e.kind, e.Message)
	}
	return fmt.Sprintf("%v: %s: %s", e.kind, e.Op, e.Message)
}

// Is reports whether target is the error's kind or one of the classes it
// refines (clients/spec/errors.json "parent").
func (e *Error) Is(target error) bool {
	for k := e.kind; k != nil; k = classes[k].parent {
		if target == k {
			return true
		}
	}
	switch target {
	case context.DeadlineExceeded:
		return e.kind == ErrDeadlineExceeded
	case context.Canceled:
		return e.kind == ErrCanceled
	}
	return false
}

// Kind is the most specific sentinel the error matches.
func (e *Error) Kind() error { return e.kind }

// Retryable reports whether running the whole transaction again may succeed
// (ErrConflict, ErrTooOld and its ErrCompacted: the spec's "retryable").
func (e *Error) Retryable() bool { return classes[e.kind].retryable }

// GRPCStatus lets status.FromError see the original code, message and
// details.
func (e *Error) GRPCStatus() *status.Status {
	if e.st != nil {
		return e.st
	}
	return status.New(e.Code, e.Message)
}

// The spec's tables (spec_gen.go, from clients/spec/errors.json), indexed.
var (
	classes   = indexClasses(specClassRows)
	byCode    = indexRows(specCodeRows)
	byReason  = indexRows(specReasonRows)
	watchEnds = indexRows(specWatchCancelRows)
)

func indexClasses(rows []specClass) map[error]specClass {
	m := make(map[error]specClass, len(rows))
	for _, r := range rows {
		m[r.kind] = r
	}
	return m
}

func indexRows[K comparable](rows []specKindOf[K]) map[K]specKindOf[K] {
	m := make(map[K]specKindOf[K], len(rows))
	for _, r := range rows {
		m[r.key] = r
	}
	return m
}

var errnoPrefix = regexp.MustCompile(`^(E[A-Z0-9]+): `)

// codeKind is the class of a status code alone (ErrInternal for a code
// the spec does not list).
func codeKind(code codes.Code) error {
	if r, ok := byCode[code]; ok {
		return r.kind
	}
	return ErrInternal
}

// kindOf picks the sentinel for a code and message: the spec's fallbacks
// refine a code's class by the message text (read-only, no space). The
// text is read only when the server sent no ErrorInfo (fromStatus).
func kindOf(code codes.Code, msg string) error {
	for _, f := range specFallbacks {
		if f.code == code && f.matches(msg) {
			return f.kind
		}
	}
	return codeKind(code)
}

// matches: msg starts with one of the prefixes, or contains one of the
// substrings and none of the exceptions.
func (f specFallback) matches(msg string) bool {
	for _, p := range f.prefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	text := msg
	if f.ignoreCase {
		text = strings.ToLower(msg)
	}
	for _, u := range f.unless {
		if strings.Contains(text, u) {
			return false
		}
	}
	for _, c := range f.contains {
		if strings.Contains(text, c) {
			return true
		}
	}
	return false
}

func newError(op string, code codes.Code, msg string) *Error {
	e := &Error{Op: op, Code: code, Message: msg, kind: kindOf(code, msg)}
	if m := errnoPrefix.FindStringSubmatch(msg); m != nil {
		e.Errno = m[1]
	}
	return e
}

// errorInfo is the google.rpc.ErrorInfo in a status's details, or nil.
func errorInfo(s *status.Status) *errdetails.ErrorInfo {
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// fromStatus is the *Error of a gRPC status: the kind from its ErrorInfo
// reason when the server sent one, else (an older server) from the code
// and the message text.
func fromStatus(op string, s *status.Status) *Error {
	e := newError(op, s.Code(), s.Message())
	e.st = s
	info := errorInfo(s)
	if info == nil || info.GetReason() == "" {
		return e
	}
	e.Reason, e.Metadata = info.GetReason(), info.GetMetadata()
	e.kind = codeKind(s.Code())
	if r, ok := byReason[e.Reason]; ok {
		e.kind = r.kind
	}
	if errno, ok := e.Metadata["errno"]; ok {
		e.Errno = errno
	}
	if rev, err := strconv.ParseUint(e.Metadata["compact_revision"], 10, 64); err == nil {
		e.CompactRevision = rev
	}
	return e
}

// wrap converts an error from a gRPC call into an *Error (nil stays nil).
// Context errors raised before a call left the client keep their meaning.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	if s, ok := status.FromError(err); ok {
		return fromStatus(op, s)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return newError(op, codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return newError(op, codes.Canceled, err.Error())
	}
	return newError(op, codes.Unknown, err.Error())
}

// invalid is the client's own INVALID_ARGUMENT, phrased like the server's.
func invalid(op, format string, args ...any) error {
	return newError(op, codes.InvalidArgument, fmt.Sprintf(format, args...))
}

// ErrorClass names an error's kind as the conformance scenarios do
// ("not_found", "read_only", ...); "" for nil and "unknown" for an error
// that is not the client's.
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	var ce *Error
	if !errors.As(err, &ce) {
		return "unknown"
	}
	return classes[ce.kind].name
}
