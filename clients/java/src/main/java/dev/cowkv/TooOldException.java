package dev.cowkv;

import io.grpc.Status;

/** A transaction outlived the engine's conflict window: run it again. */
public class TooOldException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public TooOldException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }

  @Override
  public boolean isRetryableTransaction() {
    return true;
  }
}
