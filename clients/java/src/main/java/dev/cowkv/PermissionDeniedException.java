package dev.cowkv;

import io.grpc.Status;

/** The caller may not do this. */
public class PermissionDeniedException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public PermissionDeniedException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
