package dev.cowkv;

import io.grpc.Status;

/** A server limit: too many open transactions for this client or the server, or a message over the size limit. */
public class ResourceExhaustedException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public ResourceExhaustedException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
