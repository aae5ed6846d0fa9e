package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * The opt-in retry of UNAVAILABLE (docs/api.md "Retrying UNAVAILABLE"): the method list and
 * defaults equal clients/conformance/unavailable_retry.json; against a server down for the first
 * attempt(s) that comes back on its port, a read succeeds with the option and fails fast with
 * UnavailableException without it; a write is never retried.
 */
class RetryUnavailableTest {
  @Test
  void policyMatchesTheSpec() throws Exception {
    JsonObject spec = JsonParser.parseString(java.nio.file.Files.readString(
        Path.of("..", "conformance", "unavailable_retry.json"))).getAsJsonObject();
    List<String> methods = new ArrayList<>();
    spec.getAsJsonArray("methods").forEach(m -> methods.add(m.getAsString()));
    assertEquals(methods, UnavailableRetry.METHODS);
    JsonObject d = spec.getAsJsonObject("defaults");
    assertEquals(d.get("max_attempts").getAsInt(), UnavailableRetry.DEFAULT.maxAttempts());
    assertEquals(d.get("initial_backoff_ms").getAsLong(), UnavailableRetry.DEFAULT.initialBackoff().toMillis());
    assertEquals(d.get("max_backoff_ms").getAsLong(), UnavailableRetry.DEFAULT.maxBackoff().toMillis());
    assertEquals(d.get("backoff_multiplier").getAsDouble(), UnavailableRetry.DEFAULT.backoffMultiplier());
    assertThrows(InvalidArgumentException.class,
        () -> new UnavailableRetry(6, Duration.ofMillis(1), Duration.ofMillis(2), 2));
  }

  @Test
  void aReadOutlivesARestartOnlyWithTheOption() throws Exception {
    CowkvdServer server = CowkvdServer.start("64M", null);
    try {
      try (CowkvClient c = CowkvClient.connect(server.address())) {
        c.subvolume("").put("k", "v");
      }
      server.stop();
      try (CowkvClient plain = CowkvClient.connect(server.address())) {
        long t0 = System.nanoTime();
        assertThrows(UnavailableException.class, () -> plain.subvolume("").get("k"));
        assertTrue(System.nanoTime() - t0 < 5_000_000_000L);
      }
      // Backoffs of seconds: a retry comes after the channel reconnected.
      CowkvOptions opts = CowkvOptions.builder().address(server.address()).retryUnavailable(
          new UnavailableRetry(5, Duration.ofSeconds(2), Duration.ofSeconds(5), 2)).build();
      try (CowkvClient patient = CowkvClient.connect(opts)) {
        assertThrows(UnavailableException.class, () -> patient.subvolume("").put("k", "w"));
        CompletableFuture<Void> restarted = CompletableFuture.runAsync(() -> {
          try {
            Thread.sleep(300);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          server.startOnSamePort();
        });
        long t0 = System.nanoTime();
        try {
          assertEquals(Optional.of("v"), patient.subvolume("").getString("k"));
          assertTrue(System.nanoTime() - t0 >= 300_000_000L);
        } finally {
          restarted.join();
        }
      }
    } finally {
      server.close();
    }
  }
}
