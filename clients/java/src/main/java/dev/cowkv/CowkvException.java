package dev.cowkv;

import io.grpc.Status;
import java.util.Map;
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
 * │   └── CompactedException                             a read or watcher start at a compacted revision
 * ├── FutureRevisionException       OUT_OF_RANGE         a read at a revision not reached yet
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
 *
 * <p>The class comes from the {@code google.rpc.ErrorInfo} the server sends with every error
 * ({@link #errorReason()}, {@link #errorMetadata()}); the message text is read only for a server
 * that sends none (see {@link Errors#fromStatus(Status, com.google.rpc.ErrorInfo, String)}).
 */
public class CowkvException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private static final Pattern ERRNO = Pattern.compile("^(E[A-Z0-9]+): ");

  private final Status.Code code;
  private final String reason;
  private final String operation;
  private String errorReason = "";
  private Map<String, String> errorMetadata = Map.of();

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

  /**
   * The server's {@code google.rpc.ErrorInfo} reason ("ENOENT", "READ_ONLY_SNAPSHOT", "CONFLICT",
   * ...; docs/api.md "Errors"); "" from a server that sends none and for the client's own checks.
   * ({@link #reason()} is the message, a name kept from before ErrorInfo.)
   */
  public String errorReason() {
    return errorReason;
  }

  /** The ErrorInfo's metadata ("errno" for Files errors, "compact_revision"); empty when none. */
  public Map<String, String> errorMetadata() {
    return errorMetadata;
  }

  /** Sets the ErrorInfo fields (Errors.fromStatus); returns this. */
  CowkvException withErrorInfo(String reason, Map<String, String> metadata) {
    this.errorReason = reason == null ? "" : reason;
    this.errorMetadata = metadata == null ? Map.of() : Map.copyOf(metadata);
    return this;
  }

  /** The POSIX name of a Files error ("ENOENT"): ErrorInfo's errno, else the message's prefix; or null. */
  public String errnoName() {
    String errno = errorMetadata.get("errno");
    if (errno != null) {
      return errno;
    }
    Matcher m = ERRNO.matcher(reason);
    return m.find() ? m.group(1) : null;
  }

  /** True when the right reaction is to run the whole transaction again. */
  public boolean isRetryableTransaction() {
    return false;
  }
}
