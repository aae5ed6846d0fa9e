package dev.cowkv;

import io.grpc.Status;

/** The server is stopping or cannot be reached: retry the call. */
public class UnavailableException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public UnavailableException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
