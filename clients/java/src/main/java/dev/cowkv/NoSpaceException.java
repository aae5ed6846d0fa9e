package dev.cowkv;

import io.grpc.Status;

/** The device is full (ENOSPC); nothing was changed. */
public class NoSpaceException extends ResourceExhaustedException {
  private static final long serialVersionUID = 1L;

  public NoSpaceException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
