package dev.cowkv;

import io.grpc.Status;

/** The server wants a bearer token and got none or a wrong one ({@link CowkvOptions.Builder#token}). */
public class UnauthenticatedException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public UnauthenticatedException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
