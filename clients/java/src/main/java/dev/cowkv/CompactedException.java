package dev.cowkv;

import io.grpc.Status;

/**
 * A read, or a watcher's start, at a revision the history no longer keeps (a kind of
 * OUT_OF_RANGE): go on from {@link #compactRevision()}, the oldest revision still served.
 */
public class CompactedException extends TooOldException {
  private static final long serialVersionUID = 1L;
  private final long compactRevision;

  public CompactedException(String reason, long compactRevision, String operation) {
    super(Status.Code.OUT_OF_RANGE, reason, operation, null);
    this.compactRevision = compactRevision;
  }

  /** The oldest revision still served. */
  public long compactRevision() {
    return compactRevision;
  }

  /**
   * True for a read's (in a transaction: its read revision left the history), as TOO_OLD
   * (docs/api.md); false for a watcher's.
   */
  @Override
  public boolean isRetryableTransaction() {
    return !"watch".equals(operation());
  }
}
