package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Any;
import com.google.rpc.ErrorInfo;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The status code -> exception class mapping (docs/api.md, "Errors"), without a server. */
class ErrorsTest {
  private static CowkvException map(Status.Code code, String msg) {
    return Errors.fromStatus(Status.fromCode(code).withDescription(msg), "op");
  }

  @Test
  void everyCodeHasItsClass() {
    Map<Status.Code, Class<? extends CowkvException>> want = Map.ofEntries(
        Map.entry(Status.Code.INVALID_ARGUMENT, InvalidArgumentException.class),
        Map.entry(Status.Code.NOT_FOUND, NotFoundException.class),
        Map.entry(Status.Code.ALREADY_EXISTS, AlreadyExistsException.class),
        Map.entry(Status.Code.FAILED_PRECONDITION, FailedPreconditionException.class),
        Map.entry(Status.Code.ABORTED, ConflictException.class),
        Map.entry(Status.Code.OUT_OF_RANGE, TooOldException.class),
        Map.entry(Status.Code.RESOURCE_EXHAUSTED, ResourceExhaustedException.class),
        Map.entry(Status.Code.DATA_LOSS, DataLossException.class),
        Map.entry(Status.Code.UNAVAILABLE, UnavailableException.class),
        Map.entry(Status.Code.UNAUTHENTICATED, UnauthenticatedException.class),
        Map.entry(Status.Code.PERMISSION_DENIED, PermissionDeniedException.class),
        Map.entry(Status.Code.DEADLINE_EXCEEDED, DeadlineExceededException.class),
        Map.entry(Status.Code.CANCELLED, CancelledException.class),
        Map.entry(Status.Code.UNIMPLEMENTED, UnimplementedException.class),
        Map.entry(Status.Code.INTERNAL, InternalException.class),
        Map.entry(Status.Code.UNKNOWN, InternalException.class));
    for (var e : want.entrySet()) {
      CowkvException ex = map(e.getKey(), "something");
      assertSame(e.getValue(), ex.getClass(), e.getKey().name());
      assertEquals(e.getKey(), ex.code());
    }
  }

  @Test
  void readOnlyAndNoSpaceAreRefined() {
    assertSame(FailedPreconditionException.class, map(Status.Code.FAILED_PRECONDITION,
        "snapshot: 'x' is not a read-only snapshot").getClass());
    assertInstanceOf(ReadOnlyException.class,
        map(Status.Code.FAILED_PRECONDITION, "subvolume 'x' is a read-only snapshot"));
    assertInstanceOf(ReadOnlyException.class,
        map(Status.Code.FAILED_PRECONDITION, "EROFS: /a: read-only"));
    assertInstanceOf(FailedPreconditionException.class,
        map(Status.Code.FAILED_PRECONDITION, "ENOTEMPTY: directory not empty: /d"));
    assertFalse(map(Status.Code.FAILED_PRECONDITION, "ENOTEMPTY: x") instanceof ReadOnlyException);
    assertInstanceOf(NoSpaceException.class, map(Status.Code.RESOURCE_EXHAUSTED, "ENOSPC: full"));
    assertInstanceOf(NoSpaceException.class,
        map(Status.Code.RESOURCE_EXHAUSTED, "No space left for the write"));
    assertSame(ResourceExhaustedException.class,
        map(Status.Code.RESOURCE_EXHAUSTED, "too many open transactions").getClass());
  }

  @Test
  void closedConnectionIsUnavailable() {
    Status raced = Status.INTERNAL.withDescription("channel closed")
        .withCause(new java.nio.channels.ClosedChannelException());
    assertInstanceOf(UnavailableException.class, Errors.fromStatus(raced, "get"));
    assertInstanceOf(InternalException.class,
        Errors.fromStatus(Status.INTERNAL.withDescription("device unavailable: EIO"), "get"));
  }

  @Test
  void onlyConflictAndTooOldAreRetryable() {
    for (Status.Code c : Status.Code.values()) {
      if (c == Status.Code.OK) {
        continue;
      }
      boolean want = c == Status.Code.ABORTED || c == Status.Code.OUT_OF_RANGE;
      assertEquals(want, map(c, "m").isRetryableTransaction(), c.name());
    }
  }

  @Test
  void messageCarriesOperationReasonAndErrno() {
    CowkvException e = map(Status.Code.FAILED_PRECONDITION, "ENOTEMPTY: directory not empty: /d");
    assertEquals("op: ENOTEMPTY: directory not empty: /d", e.getMessage());
    assertEquals("ENOTEMPTY: directory not empty: /d", e.reason());
    assertEquals("ENOTEMPTY", e.errnoName());
    assertEquals("op", e.operation());
    assertNull(map(Status.Code.NOT_FOUND, "key not found: \"k\"").errnoName());
  }

  @Test
  void fromWrapsStatusRuntimeExceptionAndKeepsCause() {
    StatusRuntimeException sre = Status.NOT_FOUND.withDescription("gone").asRuntimeException();
    RuntimeException e = Errors.from(sre, "get");
    assertInstanceOf(NotFoundException.class, e);
    assertSame(sre, e.getCause());
    CowkvException same = new ConflictException(Status.Code.ABORTED, "x", "commit", null);
    assertSame(same, Errors.from(same, "other"));
    IllegalStateException ise = new IllegalStateException("bug");
    assertSame(ise, Errors.from(ise, "x"));
  }

  /** The error cowkvd sends: google.rpc.Status{code, message, [ErrorInfo]} in its trailers. */
  private static RuntimeException withInfo(Status.Code code, String msg, String reason,
      Map<String, String> md) {
    ErrorInfo info = ErrorInfo.newBuilder().setReason(reason).setDomain("cowkv.dev")
        .putAllMetadata(md).build();
    com.google.rpc.Status st = com.google.rpc.Status.newBuilder().setCode(code.value())
        .setMessage(msg).addDetails(Any.pack(info)).build();
    return Errors.from(StatusProto.toStatusRuntimeException(st), "op");
  }

  /** The class comes from the reason, whatever the text says (chosen to mislead the fallback). */
  @Test
  void errorInfoReasonDecides() {
    record Case(Status.Code code, String reason, String msg, Class<?> cls) {}
    List<Case> cases = List.of(
        new Case(Status.Code.FAILED_PRECONDITION, "READ_ONLY_SNAPSHOT", "write refused", ReadOnlyException.class),
        new Case(Status.Code.FAILED_PRECONDITION, "EROFS", "store", ReadOnlyException.class),
        new Case(Status.Code.FAILED_PRECONDITION, "ENOTEMPTY", "read-only thing is not empty",
            FailedPreconditionException.class),
        new Case(Status.Code.RESOURCE_EXHAUSTED, "ENOSPC", "device full", NoSpaceException.class),
        new Case(Status.Code.RESOURCE_EXHAUSTED, "SERVER_BUSY", "no space in the queue",
            ResourceExhaustedException.class),
        new Case(Status.Code.RESOURCE_EXHAUSTED, "LIMIT", "no space for the response",
            ResourceExhaustedException.class),
        new Case(Status.Code.ABORTED, "CONFLICT", "x", ConflictException.class),
        new Case(Status.Code.OUT_OF_RANGE, "TOO_OLD", "x", TooOldException.class),
        new Case(Status.Code.OUT_OF_RANGE, "COMPACTED", "x", CompactedException.class),
        new Case(Status.Code.OUT_OF_RANGE, "FUTURE_REVISION", "x", FutureRevisionException.class),
        new Case(Status.Code.NOT_FOUND, "LEASE_NOT_FOUND", "x", NotFoundException.class),
        new Case(Status.Code.INTERNAL, "DEVICE_UNAVAILABLE", "x", InternalException.class),
        new Case(Status.Code.UNAVAILABLE, "STOPPING", "x", UnavailableException.class));
    for (Case c : cases) {
      RuntimeException r = withInfo(c.code(), c.msg(), c.reason(), Map.of("compact_revision", "42"));
      assertSame(c.cls(), r.getClass(), c.reason());
      CowkvException e = (CowkvException) r;
      assertEquals(c.reason(), e.errorReason());
      assertEquals(c.msg(), e.reason());
      assertEquals("42", e.errorMetadata().get("compact_revision"));
      assertEquals(c.cls() == ConflictException.class || c.cls() == TooOldException.class
          || c.cls() == CompactedException.class, e.isRetryableTransaction(), c.reason());
    }
    CompactedException ce = (CompactedException) withInfo(Status.Code.OUT_OF_RANGE, "x", "COMPACTED",
        Map.of("compact_revision", "17"));
    assertEquals(17, ce.compactRevision());
    CowkvException ro = (CowkvException) withInfo(Status.Code.FAILED_PRECONDITION, "no prefix",
        "READ_ONLY_SNAPSHOT", Map.of("errno", "EROFS"));
    assertEquals("EROFS", ro.errnoName());
  }

  @Test
  void damagedOrAbsentDetailsFallBackToTheText() {
    Metadata trailers = new Metadata();
    trailers.put(Metadata.Key.of("grpc-status-details-bin", Metadata.BINARY_BYTE_MARSHALLER),
        new byte[] {0x1a, 0x7f});
    RuntimeException bad = Errors.from(
        Status.FAILED_PRECONDITION.withDescription("EROFS: x").asRuntimeException(trailers), "op");
    assertInstanceOf(ReadOnlyException.class, bad);
    assertEquals("", ((CowkvException) bad).errorReason());
    assertInstanceOf(NoSpaceException.class,
        Errors.from(Status.RESOURCE_EXHAUSTED.withDescription("no space left").asRuntimeException(), "op"));
  }

  @Test
  void clientSideErrorsHaveNoCode() {
    InvalidArgumentException e = Errors.invalid("put", "key: a key is 1..1024 bytes, not 0");
    assertNull(e.code());
    assertTrue(e.getMessage().startsWith("put: key"));
  }
}
