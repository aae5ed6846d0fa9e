package dev.cowkv;

import io.grpc.Status;

/** A transaction conflicted at commit (something it read changed), or its handle expired: run the whole transaction again ({@link Subvolume#transaction} does). */
public class ConflictException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public ConflictException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }

  @Override
  public boolean isRetryableTransaction() {
    return true;
  }
}
