package dev.cowkv;

import io.grpc.Status;

/** A checksum or structure check failed on a read (EIO): report it and run {@link CowkvClient#check()}. */
public class DataLossException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public DataLossException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
