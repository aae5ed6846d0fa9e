package dev.cowkv;

import io.grpc.Status;

/** The server ended a watcher whose events were read slower than they came (past its buffer bound): restart after the last event read. */
public class SlowReaderException extends CowkvException {
  private static final long serialVersionUID = 1L;

  public SlowReaderException(Status.Code code, String reason, String operation, Throwable cause) {
    super(code, reason, operation, cause);
  }
}
