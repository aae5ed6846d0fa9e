package dev.cowkv;

import io.grpc.Status;

/** The call was cancelled (ECANCELED). */
public class CancelledException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public CancelledException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
