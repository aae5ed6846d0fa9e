package dev.cowkv;

import io.grpc.Status;

/** The server ended a watcher because its subvolume was deleted. */
public class SubvolumeDeletedException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public SubvolumeDeletedException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
