package dev.cowkv;

import io.grpc.Status;

/** A write to a read-only snapshot, or to a store that is read-only (opened so, or after an I/O error) (EROFS). */
public class ReadOnlyException extends FailedPreconditionException {
  private static final long serialVersionUID = 1L;

  public ReadOnlyException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
