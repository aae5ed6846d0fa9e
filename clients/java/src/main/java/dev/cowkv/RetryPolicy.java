package dev.cowkv;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.DoubleSupplier;
import java.util.function.Supplier;

/**
 * How {@link Subvolume#transaction} retries a transaction that failed with a retryable error
 * ({@link ConflictException}, {@link TooOldException}): at most {@code maxAttempts} runs in
 * all, waiting a random time in {@code [d/2, d]} before retry n (0-based), with
 * {@code d = min(maxBackoff, baseBackoff * 2^n)}, so that contending clients spread out.
 * The defaults (10 attempts, 10 ms doubling to 1 s) are those of every cowkv client (docs/api.md,
 * "Retrying transactions").
 *
 * @param maxAttempts runs of the transaction in all (1 = never retry)
 * @param baseBackoff the wait bound before the first retry
 * @param maxBackoff the largest wait bound
 */
public record RetryPolicy(int maxAttempts, Duration baseBackoff, Duration maxBackoff) {
  /** 10 attempts, waits of 10 ms doubling up to 1 s. */
  public static final RetryPolicy DEFAULT =
      new RetryPolicy(10, Duration.ofMillis(10), Duration.ofSeconds(1));
  /** One attempt, no retry. */
  public static final RetryPolicy NONE = new RetryPolicy(1, Duration.ZERO, Duration.ZERO);

  public RetryPolicy {
    if (maxAttempts < 1 || baseBackoff.isNegative() || maxBackoff.isNegative()) {
      throw new IllegalArgumentException("retry policy: maxAttempts >= 1, durations >= 0");
    }
  }

  public RetryPolicy withMaxAttempts(int n) {
    return new RetryPolicy(n, baseBackoff, maxBackoff);
  }

  /** The wait bound d before retry number {@code attempt} (0-based). */
  public Duration cap(int attempt) {
    long base = baseBackoff.toNanos();
    long cap = maxBackoff.toNanos();
    long v = attempt >= 62 || base > (cap >> Math.min(attempt, 62)) ? cap : base << attempt;
    return Duration.ofNanos(Math.min(v, cap));
  }

  /** A random wait in {@code [d/2, d]}, d = cap(attempt); {@code random} yields [0, 1). */
  public Duration backoff(int attempt, DoubleSupplier random) {
    long d = cap(attempt).toNanos();
    return Duration.ofNanos(d / 2 + (long) ((d - d / 2) * random.getAsDouble()));
  }

  /** Sleeps between attempts (a seam for tests). */
  @FunctionalInterface
  interface Sleeper {
    void sleep(Duration d) throws InterruptedException;
  }

  static final Sleeper THREAD_SLEEP = d -> Thread.sleep(d.toMillis(), (int) (d.toNanos() % 1_000_000));

  /**
   * Runs {@code attempt} until it returns, retrying retryable CowkvExceptions as the policy
   * says; any other exception propagates at once.
   */
  <T> T run(Supplier<T> attempt, Sleeper sleeper, DoubleSupplier random) {
    for (int n = 0;; n++) {
      try {
        return attempt.get();
      } catch (CowkvException e) {
        if (!e.isRetryableTransaction() || n + 1 >= maxAttempts) {
          throw e;
        }
      }
      try {
        sleeper.sleep(backoff(n, random));
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
        throw new CancelledException(null, "interrupted while waiting to retry", "transaction", ie);
      }
    }
  }

  <T> T run(Supplier<T> attempt) {
    return run(attempt, THREAD_SLEEP, () -> ThreadLocalRandom.current().nextDouble());
  }
}
