package dev.cowkv;

import io.grpc.Status;

/** The server does not know this call (it is older than the client). */
public class UnimplementedException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public UnimplementedException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
