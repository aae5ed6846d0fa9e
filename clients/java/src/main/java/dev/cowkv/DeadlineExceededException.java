package dev.cowkv;

import io.grpc.Status;

/** The call's deadline passed before the server answered (ETIMEDOUT). */
public class DeadlineExceededException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public DeadlineExceededException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
