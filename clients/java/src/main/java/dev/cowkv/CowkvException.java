package dev.cowkv;

import io.grpc.Status;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Base of every error the client throws (never a bare {@code StatusRuntimeException}).
 *
 * <p>The subclass says what kind of failure it was and what to do about it (docs/api.md,
 * "Errors"); {@link #code()} is the gRPC status code, {@link #reason()} the server's message,
 * {@link #errnoName()} the POSIX name that Files errors start with ({@code "ENOTEMPTY"} for
 * {@code "ENOTEMPTY: directory not empty: /d"}).
 *
 * <pre>
 * CowkvException
 * ├── InvalidArgumentException      INVALID_ARGUMENT     fix the request
 * ├── NotFoundException             NOT_FOUND            key, subvolume, file or handle absent
 * ├── AlreadyExistsException        ALREADY_EXISTS       name taken
 * ├── FailedPreconditionException   FAILED_PRECONDITION  do not retry until something changes
 * │   └── ReadOnlyException                              write to a read-only snapshot or store
 * ├── ConflictException             ABORTED              retry the whole transaction
 * ├── TooOldException               OUT_OF_RANGE         retry the whole transaction
 * │   └── CompactedException                             a watcher's start is compacted
 * ├── ResourceExhaustedException    RESOURCE_EXHAUSTED   a server limit
 * │   └── NoSpaceException                               the device is full (ENOSPC)
 * ├── DataLossException             DATA_LOSS            a checksum failed: run Admin.Check
 * ├── UnavailableException          UNAVAILABLE          server stopping or unreachable: retry
 * ├── UnauthenticatedException      UNAUTHENTICATED      token missing or wrong
 * ├── PermissionDeniedException     PERMISSION_DENIED
 * ├── DeadlineExceededException     DEADLINE_EXCEEDED    the call's deadline passed
 * ├── CancelledException            CANCELLED
 * ├── UnimplementedException        UNIMPLEMENTED        server too old for this call
 * ├── InternalException             INTERNAL, UNKNOWN    device I/O error, unparsable response
 * ├── SubvolumeDeletedException                          a watcher's subvolume was deleted
 * └── SlowReaderException                                a watcher's listener was too slow
 * </pre>
 */
public class CowkvException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private static final Pattern ERRNO = Pattern.compile("^(E[A-Z0-9]+): ");

  private final Status.Code code;
  private final String reason;
  private final String operation;

  /**
   * @param code the gRPC status code, or null for an error raised by the client itself
   * @param reason the server's (or client's) message
   * @param operation the client operation that failed ("put", "mkdir", ...), or ""
   */
  public CowkvException(Status.Code code, String reason, String operation, Throwable cause) {
    super(operation == null || operation.isEmpty() ? reason : operation + ": " + reason);
    if (cause != null) {
      initCause(cause);
    }
    this.code = code;
    this.reason = reason == null ? "" : reason;
    this.operation = operation == null ? "" : operation;
  }

  /** The gRPC status code; null when the client refused the call before sending it. */
  public Status.Code code() {
    return code;
  }

  /** The server's message without the operation prefix. */
  public String reason() {
    return reason;
  }

  /** The client operation that failed ("get", "commit", "mkdir", ...). */
  public String operation() {
    return operation;
  }

  /** The POSIX name a Files error starts with ("ENOENT"), or null. */
  public String errnoName() {
    Matcher m = ERRNO.matcher(reason);
    return m.find() ? m.group(1) : null;
  }

  /** True when the right reaction is to run the whole transaction again. */
  public boolean isRetryableTransaction() {
    return false;
  }
}
