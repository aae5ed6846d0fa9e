package dev.cowkv;

import io.grpc.Status;

/** A bad key, value, name, path, range, page token, flag or lease, or a request over a size limit (EINVAL, ENAMETOOLONG, EFBIG). Fix the request. */
public class InvalidArgumentException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public InvalidArgumentException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
