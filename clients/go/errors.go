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

// Is reports whether target is the error's kind or the kind's parent.
func (e *Error) Is(target error) bool {
	if target == e.kind {
		return true
	}
	switch target {
	case ErrFailedPrecondition:
		return e.kind == ErrReadOnly
	case ErrResourceExhausted:
		return e.kind == ErrNoSpace
	case ErrTooOld:
		return e.kind == ErrCompacted
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
// (ErrConflict, ErrTooOld).
func (e *Error) Retryable() bool { return e.Is(ErrConflict) || e.Is(ErrTooOld) }

// GRPCStatus lets status.FromError see the original code, message and
// details.
func (e *Error) GRPCStatus() *status.Status {
	if e.st != nil {
		return e.st
	}
	return status.New(e.Code, e.Message)
}

var byCode = map[codes.Code]error{
	codes.InvalidArgument:    ErrInvalidArgument,
	codes.NotFound:           ErrNotFound,
	codes.AlreadyExists:      ErrAlreadyExists,
	codes.FailedPrecondition: ErrFailedPrecondition,
	codes.Aborted:            ErrConflict,
	codes.OutOfRange:         ErrTooOld,
	codes.ResourceExhausted:  ErrResourceExhausted,
	codes.DataLoss:           ErrDataLoss,
	codes.Unavailable:        ErrUnavailable,
	codes.Unauthenticated:    ErrUnauthenticated,
	codes.PermissionDenied:   ErrPermissionDenied,
	codes.DeadlineExceeded:   ErrDeadlineExceeded,
	codes.Canceled:           ErrCanceled,
	codes.Unimplemented:      ErrUnimplemented,
	codes.Internal:           ErrInternal,
	codes.Unknown:            ErrInternal,
}

var errnoPrefix = regexp.MustCompile(`^(E[A-Z0-9]+): `)

// kindOf picks the sentinel for a code and message: read-only and no-space
// refine FAILED_PRECONDITION and RESOURCE_EXHAUSTED. The message text is
// read only when the server sent no ErrorInfo (fromStatus).
func kindOf(code codes.Code, msg string) error {
	kind, ok := byCode[code]
	if !ok {
		return ErrInternal
	}
	switch kind {
	case ErrFailedPrecondition:
		if strings.HasPrefix(msg, "EROFS:") ||
			(strings.Contains(msg, "read-only") && !strings.Contains(msg, "not a read-only")) {
			return ErrReadOnly
		}
	case ErrResourceExhausted:
		if strings.HasPrefix(msg, "ENOSPC:") || strings.Contains(strings.ToLower(msg), "no space") {
			return ErrNoSpace
		}
	}
	return kind
}

func newError(op string, code codes.Code, msg string) *Error {
	e := &Error{Op: op, Code: code, Message: msg, kind: kindOf(code, msg)}
	if m := errnoPrefix.FindStringSubmatch(msg); m != nil {
		e.Errno = m[1]
	}
	return e
}

// byReason: the ErrorInfo reasons that pick a kind finer than the code's.
// Any other reason keeps the code's kind.
var byReason = map[string]error{
	"READ_ONLY_SNAPSHOT": ErrReadOnly,
	"EROFS":              ErrReadOnly,
	"ENOSPC":             ErrNoSpace,
	"CONFLICT":           ErrConflict,
	"TOO_OLD":            ErrTooOld,
	"COMPACTED":          ErrCompacted,
	"FUTURE_REVISION":    ErrFutureRevision,
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
	e.kind = byCode[s.Code()]
	if e.kind == nil {
		e.kind = ErrInternal
	}
	if k, ok := byReason[e.Reason]; ok {
		e.kind = k
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
	return classNames[ce.kind]
}

var classNames = map[error]string{
	ErrInvalidArgument: "invalid_argument", ErrNotFound: "not_found",
	ErrAlreadyExists: "already_exists", ErrFailedPrecondition: "failed_precondition",
	ErrReadOnly: "read_only", ErrConflict: "conflict", ErrTooOld: "too_old",
	ErrResourceExhausted: "resource_exhausted", ErrNoSpace: "no_space",
	ErrDataLoss: "data_loss", ErrUnavailable: "unavailable",
	ErrUnauthenticated: "unauthenticated", ErrPermissionDenied: "permission_denied",
	ErrDeadlineExceeded: "deadline_exceeded", ErrCanceled: "cancelled",
	ErrUnimplemented: "unimplemented", ErrInternal: "internal",
	ErrCompacted: "compacted", ErrFutureRevision: "future_revision", ErrSubvolumeDeleted: "subvolume_deleted", ErrSlowReader: "slow_reader",
}
