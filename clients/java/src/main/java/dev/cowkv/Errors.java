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
   * String)}. The tables are clients/spec/errors.json's, through the generated {@link Spec}.
   */
  public static CowkvException fromStatus(Status status, ErrorInfo info, String operation) {
    if (info == null || info.getReason().isEmpty()) {
      return fromStatus(status, operation);
    }
    Status.Code code = status.getCode();
    String msg = status.getDescription() != null ? status.getDescription() : code.name();
    Throwable cause = status.getCause();
    String cls = Spec.BY_REASON.getOrDefault(info.getReason(), Spec.BY_CODE.get(code));
    CowkvException e;
    if ("compacted".equals(cls)) {
      e = new CompactedException(msg, compactRevision(info), operation);
    } else if (cls == null || ("internal".equals(cls) && closedConnection(cause))) {
      e = fromStatus(Status.fromCode(code).withDescription(msg).withCause(cause), operation);
    } else {
      e = create(cls, code, msg, operation, cause);
    }
    return e.withErrorInfo(info.getReason(), info.getMetadataMap());
  }

  /** The exception of a spec class name ("not_found", ...; not "compacted", which has a revision). */
  static CowkvException create(String cls, Status.Code code, String msg, String op, Throwable cause) {
    return switch (cls) {
      case "invalid_argument" -> new InvalidArgumentException(code, msg, op, cause);
      case "not_found" -> new NotFoundException(code, msg, op, cause);
      case "already_exists" -> new AlreadyExistsException(code, msg, op, cause);
      case "failed_precondition" -> new FailedPreconditionException(code, msg, op, cause);
      case "read_only" -> new ReadOnlyException(code, msg, op, cause);
      case "conflict" -> new ConflictException(code, msg, op, cause);
      case "too_old" -> new TooOldException(code, msg, op, cause);
      case "future_revision" -> new FutureRevisionException(code, msg, op, cause);
      case "resource_exhausted" -> new ResourceExhaustedException(code, msg, op, cause);
      case "no_space" -> new NoSpaceException(code, msg, op, cause);
      case "data_loss" -> new DataLossException(code, msg, op, cause);
      case "unavailable" -> new UnavailableException(code, msg, op, cause);
      case "unauthenticated" -> new UnauthenticatedException(code, msg, op, cause);
      case "permission_denied" -> new PermissionDeniedException(code, msg, op, cause);
      case "deadline_exceeded" -> new DeadlineExceededException(code, msg, op, cause);
      case "cancelled" -> new CancelledException(code, msg, op, cause);
      case "unimplemented" -> new UnimplementedException(code, msg, op, cause);
      case "internal" -> new InternalException(code, msg, op, cause);
      case "subvolume_deleted" -> new SubvolumeDeletedException(code, msg, op, cause);
      case "slow_reader" -> new SlowReaderException(code, msg, op, cause);
      default -> throw new IllegalArgumentException("no exception class for spec class " + cls);
    };
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

  /**
   * The exception for a status code and message, for a server that sends no ErrorInfo: read-only
   * and no-space are told from the message text (the spec's fallbacks).
   */
  public static CowkvException fromStatus(Status status, String operation) {
    Status.Code code = status.getCode();
    String msg = status.getDescription() != null ? status.getDescription() : code.name();
    Throwable cause = status.getCause();
    if ((code == Status.Code.INTERNAL || code == Status.Code.UNKNOWN) && closedConnection(cause)) {
      // grpc-java reports a call that raced with the server closing the connection as
      // INTERNAL/UNKNOWN "channel closed" (grpc-java #7376); it is a transport failure
      // like a refused connection, so the same class: retry the call.
      return new UnavailableException(code, msg, operation, cause);
    }
    for (Spec.Fallback f : Spec.FALLBACKS) {
      if (f.code() == code && matches(f, msg)) {
        return create(f.cls(), code, msg, operation, cause);
      }
    }
    String cls = Spec.BY_CODE.get(code);
    return cls == null ? new CowkvException(code, msg, operation, cause)
        : create(cls, code, msg, operation, cause);
  }

  /** A fallback's prefix, or one of its substrings and none of its exceptions. */
  static boolean matches(Spec.Fallback f, String msg) {
    if (f.prefixes().stream().anyMatch(msg::startsWith)) {
      return true;
    }
    String text = f.ignoreCase() ? msg.toLowerCase(java.util.Locale.ROOT) : msg;
    return f.unless().stream().noneMatch(text::contains)
        && f.contains().stream().anyMatch(text::contains);
  }

  /**
   * A FAILED_PRECONDITION is a read-only refusal when its message starts with EROFS or says
   * "read-only" (but not "is not a read-only snapshot", a plain precondition).
   */
  static boolean isReadOnly(String msg) {
    return Spec.FALLBACKS.stream()
        .anyMatch(f -> f.cls().equals("read_only") && matches(f, msg));
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
