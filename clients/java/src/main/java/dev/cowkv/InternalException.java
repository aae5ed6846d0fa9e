package dev.cowkv;

import io.grpc.Status;

/** A device I/O error on the server, or a message that failed to parse. */
public class InternalException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public InternalException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
