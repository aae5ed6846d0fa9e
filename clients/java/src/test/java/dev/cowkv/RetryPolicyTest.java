package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The retry helper without a server: attempts, give-up, what is retried, the backoff. */
class RetryPolicyTest {
  private static final RetryPolicy P =
      new RetryPolicy(5, Duration.ofMillis(10), Duration.ofMillis(50));

  private static ConflictException conflict() {
    return new ConflictException(Status.Code.ABORTED, "conflict", "commit", null);
  }

  @Test
  void capDoublesUpToTheMaximum() {
    assertEquals(Duration.ofMillis(10), P.cap(0));
    assertEquals(Duration.ofMillis(20), P.cap(1));
    assertEquals(Duration.ofMillis(40), P.cap(2));
    assertEquals(Duration.ofMillis(50), P.cap(3));
    assertEquals(Duration.ofMillis(50), P.cap(100));
    assertEquals(Duration.ofSeconds(1), RetryPolicy.DEFAULT.cap(1000));
    assertEquals(Duration.ofMillis(10), RetryPolicy.DEFAULT.cap(0));
    assertEquals(10, RetryPolicy.DEFAULT.maxAttempts());
  }

  @Test
  void backoffIsBetweenHalfTheCapAndTheCap() {
    assertEquals(Duration.ofMillis(20), P.backoff(2, () -> 0.0));
    assertEquals(Duration.ofMillis(30), P.backoff(2, () -> 0.5));
    for (int i = 0; i < 1000; i++) {
      Duration d = P.backoff(2, () -> java.util.concurrent.ThreadLocalRandom.current().nextDouble());
      assertTrue(d.compareTo(P.cap(2)) <= 0 && d.compareTo(Duration.ofMillis(20)) >= 0, d.toString());
    }
  }

  @Test
  void retriesConflictsThenReturns() {
    AtomicInteger calls = new AtomicInteger();
    List<Duration> slept = new ArrayList<>();
    String r = P.run(() -> {
      if (calls.incrementAndGet() < 3) {
        throw conflict();
      }
      return "ok";
    }, slept::add, () -> 1.0);
    assertEquals("ok", r);
    assertEquals(3, calls.get());
    assertEquals(List.of(Duration.ofMillis(10), Duration.ofMillis(20)), slept);
  }

  @Test
  void tooOldIsRetriedToo() {
    AtomicInteger calls = new AtomicInteger();
    int r = P.run(() -> {
      if (calls.incrementAndGet() == 1) {
        throw new TooOldException(Status.Code.OUT_OF_RANGE, "too old", "commit", null);
      }
      return 7;
    }, d -> { }, () -> 0.0);
    assertEquals(7, r);
    assertEquals(2, calls.get());
  }

  @Test
  void givesUpAfterMaxRetriesWithTheLastConflict() {
    AtomicInteger calls = new AtomicInteger();
    List<Duration> slept = new ArrayList<>();
    ConflictException last = conflict();
    ConflictException e = assertThrows(ConflictException.class, () -> P.run(() -> {
      calls.incrementAndGet();
      throw last;
    }, slept::add, () -> 1.0));
    assertSame(last, e);
    assertEquals(5, calls.get()); // maxAttempts
    assertEquals(4, slept.size());
    assertEquals(Duration.ofMillis(50), slept.get(3));
  }

  @Test
  void otherErrorsPropagateAtOnce() {
    AtomicInteger calls = new AtomicInteger();
    assertThrows(NotFoundException.class, () -> P.run(() -> {
      calls.incrementAndGet();
      throw new NotFoundException(Status.Code.NOT_FOUND, "no", "get", null);
    }, d -> { }, () -> 0.0));
    assertEquals(1, calls.get());
    assertThrows(IllegalStateException.class, () -> P.run(() -> {
      calls.incrementAndGet();
      throw new IllegalStateException("bug");
    }, d -> { }, () -> 0.0));
    assertEquals(2, calls.get());
  }

  @Test
  void noneNeverRetries() {
    AtomicInteger calls = new AtomicInteger();
    assertThrows(ConflictException.class, () -> RetryPolicy.NONE.run(() -> {
      calls.incrementAndGet();
      throw conflict();
    }));
    assertEquals(1, calls.get());
  }

  @Test
  void rejectsNegativeValues() {
    assertThrows(IllegalArgumentException.class,
        () -> new RetryPolicy(0, Duration.ZERO, Duration.ZERO));
  }
}
