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

  /**
   * The one retry rule (docs/api.md "Retrying transactions"), from
   * clients/conformance/retry_rule.json: the default policy runs a body that always conflicts
   * max_attempts times and waits within the bounds.
   */
  @Test
  void defaultPolicyKeepsTheRetryRule() throws Exception {
    com.google.gson.JsonObject rule = com.google.gson.JsonParser.parseString(
        java.nio.file.Files.readString(java.nio.file.Path.of("../conformance/retry_rule.json")))
        .getAsJsonObject();
    RetryPolicy d = RetryPolicy.DEFAULT;
    assertEquals(rule.get("max_attempts").getAsInt(), d.maxAttempts());
    assertEquals(Duration.ofMillis(rule.get("first_wait_ms").getAsLong()), d.baseBackoff());
    assertEquals(Duration.ofMillis(rule.get("max_wait_ms").getAsLong()), d.maxBackoff());
    var waits = rule.getAsJsonArray("waits_ms");
    java.util.Random random = new java.util.Random();
    for (int round = 0; round < 5; round++) {
      AtomicInteger calls = new AtomicInteger();
      List<Duration> slept = new ArrayList<>();
      assertThrows(ConflictException.class, () -> d.run(() -> {
        calls.incrementAndGet();
        throw conflict();
      }, slept::add, random::nextDouble));
      assertEquals(d.maxAttempts(), calls.get());
      assertEquals(waits.size(), slept.size());
      for (int i = 0; i < waits.size(); i++) {
        Duration lo = Duration.ofMillis(waits.get(i).getAsJsonArray().get(0).getAsLong());
        Duration hi = Duration.ofMillis(waits.get(i).getAsJsonArray().get(1).getAsLong());
        Duration got = slept.get(i);
        assertTrue(got.compareTo(lo) >= 0 && got.compareTo(hi) <= 0,
            "wait " + (i + 1) + ": " + got + " not in [" + lo + ", " + hi + "]");
      }
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
