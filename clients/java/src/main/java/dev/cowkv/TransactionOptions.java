package dev.cowkv;

/**
 * Options of an interactive transaction.
 *
 * @param leaseMs the server aborts the handle after this long without a call on it
 *     (0 = the server's default, 30 s; at most 600,000)
 * @param durability when the commit is acknowledged
 * @param retry how {@link Subvolume#transaction} retries conflicts
 */
public record TransactionOptions(long leaseMs, Durability durability, RetryPolicy retry) {
  public static final TransactionOptions DEFAULT =
      new TransactionOptions(0, Durability.DEFAULT, RetryPolicy.DEFAULT);

  public TransactionOptions withLeaseMs(long leaseMs) {
    return new TransactionOptions(leaseMs, durability, retry);
  }

  public TransactionOptions withDurability(Durability durability) {
    return new TransactionOptions(leaseMs, durability, retry);
  }

  public TransactionOptions withRetry(RetryPolicy retry) {
    return new TransactionOptions(leaseMs, durability, retry);
  }
}
