package dev.cowkv;

import io.grpc.Status;

/** An absent key, subvolume, snapshot or file (ENOENT), or an unknown or finished transaction handle. */
public class NotFoundException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public NotFoundException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
