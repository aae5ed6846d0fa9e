package dev.cowkv;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.StatusException;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;

/** The one place that turns a gRPC status into a {@link CowkvException}. */
public final class Errors {
  private Errors() {}

  /**
   * The exception for a status with the server's {@code google.rpc.ErrorInfo} (docs/api.md,
   * "Errors"): the class comes from its reason (any other reason keeps the code's class, the text
   * is not read); without one (null or no reason: an older server), as {@link #fromStatus(Status,
   * String)}.
   */
  public static CowkvException fromStatus(Status status, ErrorInfo info, String operation) {
    if (info == null || info.getReason().isEmpty()) {
      return fromStatus(status, operation);
    }
    Status.Code code = status.getCode();
    String msg = status.getDescription() != null ? status.getDescription() : code.name();
    Throwable cause = status.getCause();
    CowkvException e;
    switch (info.getReason()) {
      case "READ_ONLY_SNAPSHOT", "EROFS" -> e = new ReadOnlyException(code, msg, operation, cause);
      case "ENOSPC" -> e = new NoSpaceException(code, msg, operation, cause);
      case "CONFLICT" -> e = new ConflictException(code, msg, operation, cause);
      case "TOO_OLD" -> e = new TooOldException(code, msg, operation, cause);
      case "FUTURE_REVISION" -> e = new FutureRevisionException(code, msg, operation, cause);
      case "COMPACTED" -> e = new CompactedException(msg, compactRevision(info), operation);
      default -> e = byCode(code, msg, operation, cause);
    }
    return e.withErrorInfo(info.getReason(), info.getMetadataMap());
  }

  private static long compactRevision(ErrorInfo info) {
    try {
      return Long.parseLong(info.getMetadataOrDefault("compact_revision", "0"));
    } catch (NumberFormatException e) {
      return 0;
    }
  }

  /** The google.rpc.ErrorInfo in a gRPC error's grpc-status-details-bin trailer, or null. */
  static ErrorInfo errorInfoOf(Throwable t) {
    com.google.rpc.Status st;
    try {
      st = StatusProto.fromThrowable(t);
    } catch (RuntimeException e) { // a damaged trailer counts as none
      return null;
    }
    if (st == null) {
      return null;
    }
    for (com.google.protobuf.Any any : st.getDetailsList()) {
      if (any.is(ErrorInfo.class)) {
        try {
          return any.unpack(ErrorInfo.class);
        } catch (InvalidProtocolBufferException e) {
          return null;
        }
      }
    }
    return null;
  }

  /** The class of a code alone: no text is read (for statuses that carry a reason). */
  private static CowkvException byCode(Status.Code code, String msg, String op, Throwable cause) {
    switch (code) {
      case FAILED_PRECONDITION:
        return new FailedPreconditionException(code, msg, op, cause);
      case RESOURCE_EXHAUSTED:
        return new ResourceExhaustedException(code, msg, op, cause);
      default:
        return fromStatus(Status.fromCode(code).withDescription(msg).withCause(cause), op);
    }
  }

  /**
   * The exception for a status code and message, for a server that sends no ErrorInfo: read-only
   * and no-space are told from the message text.
   */
  public static CowkvException fromStatus(Status status, String operation) {
    Status.Code code = status.getCode();
    String msg = status.getDescription() != null ? status.getDescription() : code.name();
    Throwable cause = status.getCause();
    switch (code) {
      case INVALID_ARGUMENT:
        return new InvalidArgumentException(code, msg, operation, cause);
      case NOT_FOUND:
        return new NotFoundException(code, msg, operation, cause);
      case ALREADY_EXISTS:
        return new AlreadyExistsException(code, msg, operation, cause);
      case FAILED_PRECONDITION:
        if (isReadOnly(msg)) {
          return new ReadOnlyException(code, msg, operation, cause);
        }
        return new FailedPreconditionException(code, msg, operation, cause);
      case ABORTED:
        return new ConflictException(code, msg, operation, cause);
      case OUT_OF_RANGE:
        return new TooOldException(code, msg, operation, cause);
      case RESOURCE_EXHAUSTED:
        if (msg.startsWith("ENOSPC") || msg.toLowerCase(java.util.Locale.ROOT).contains("no space")) {
          return new NoSpaceException(code, msg, operation, cause);
        }
        return new ResourceExhaustedException(code, msg, operation, cause);
      case DATA_LOSS:
        return new DataLossException(code, msg, operation, cause);
      case UNAVAILABLE:
        return new UnavailableException(code, msg, operation, cause);
      case UNAUTHENTICATED:
        return new UnauthenticatedException(code, msg, operation, cause);
      case PERMISSION_DENIED:
        return new PermissionDeniedException(code, msg, operation, cause);
      case DEADLINE_EXCEEDED:
        return new DeadlineExceededException(code, msg, operation, cause);
      case CANCELLED:
        return new CancelledException(code, msg, operation, cause);
      case UNIMPLEMENTED:
        return new UnimplementedException(code, msg, operation, cause);
      case INTERNAL:
      case UNKNOWN:
        if (closedConnection(cause)) {
          // grpc-java reports a call that raced with the server closing the connection as
          // INTERNAL/UNKNOWN "channel closed" (grpc-java #7376); it is a transport failure
          // like a refused connection, so the same class: retry the call.
          return new UnavailableException(code, msg, operation, cause);
        }
        return new InternalException(code, msg, operation, cause);
      default:
        return new CowkvException(code, msg, operation, cause);
    }
  }

  /**
   * A FAILED_PRECONDITION is a read-only refusal when its message starts with EROFS or says
   * "read-only" (but not "is not a read-only snapshot", a plain precondition).
   */
  static boolean isReadOnly(String msg) {
    return msg.startsWith("EROFS:") || (msg.contains("read-only") && !msg.contains("not a read-only"));
  }

  private static boolean closedConnection(Throwable t) {
    for (int depth = 0; t != null && depth < 8; depth++, t = t.getCause()) {
      if (t instanceof java.nio.channels.ClosedChannelException) {
        return true;
      }
    }
    return false;
  }

  /** Converts any throwable from a gRPC call; CowkvExceptions pass through. */
  public static RuntimeException from(Throwable t, String operation) {
    if (t instanceof CowkvException) {
      return (CowkvException) t;
    }
    if (t instanceof StatusRuntimeException) {
      return withCause(fromStatus(((StatusRuntimeException) t).getStatus(), errorInfoOf(t), operation), t);
    }
    if (t instanceof StatusException) {
      return withCause(fromStatus(((StatusException) t).getStatus(), errorInfoOf(t), operation), t);
    }
    if (t instanceof RuntimeException) {
      return (RuntimeException) t;
    }
    return withCause(fromStatus(Status.fromThrowable(t), operation), t);
  }

  /** An invalid argument the client refuses before sending (no status code). */
  static InvalidArgumentException invalid(String operation, String reason) {
    return new InvalidArgumentException(null, reason, operation, null);
  }

  private static CowkvException withCause(CowkvException e, Throwable cause) {
    if (e.getCause() == null) {
      e.initCause(cause);
    }
    return e;
  }
}
