package dev.cowkv;

import io.grpc.Status;

/** A condition on the store's state does not hold: not a directory, is a directory, directory not empty, link to a directory (ENOTDIR, EISDIR, ENOTEMPTY, EPERM, EMLINK), deleting "default". Retrying does not help until something changes. */
public class FailedPreconditionException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public FailedPreconditionException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
