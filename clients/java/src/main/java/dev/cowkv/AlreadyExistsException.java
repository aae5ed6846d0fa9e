package dev.cowkv;

import io.grpc.Status;

/** A subvolume or file name is taken (EEXIST). */
public class AlreadyExistsException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public AlreadyExistsException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
