package dev.cowkv;

import io.grpc.Status;

/** A read at a revision the store has not reached yet (OUT_OF_RANGE, reason FUTURE_REVISION). */
public class FutureRevisionException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public FutureRevisionException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
