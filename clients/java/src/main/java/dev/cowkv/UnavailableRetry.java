package dev.cowkv;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The opt-in retry of UNAVAILABLE on idempotent reads ({@link
 * CowkvOptions.Builder#retryUnavailable}; docs/api.md "Retrying UNAVAILABLE"): gRPC's
 * retryPolicy in a service config for {@link #METHODS}, given to the channel with {@code
 * defaultServiceConfig(...)} and {@code enableRetry()}. At most {@code maxAttempts} calls (2..5),
 * the wait before retry n random in [0, b], b = min(maxBackoff, initialBackoff *
 * backoffMultiplier^(n-1)). Writes are never retried: an UNAVAILABLE write may have been applied.
 *
 * @param maxAttempts calls in all, the first included (2..5)
 * @param initialBackoff the bound of the first wait
 * @param maxBackoff the largest bound
 * @param backoffMultiplier the bound's growth per retry
 */
public record UnavailableRetry(int maxAttempts, Duration initialBackoff, Duration maxBackoff,
    double backoffMultiplier) {
  /** 5 attempts, 100 ms doubling to 1 s (clients/conformance/unavailable_retry.json). */
  public static final UnavailableRetry DEFAULT =
      new UnavailableRetry(5, Duration.ofMillis(100), Duration.ofSeconds(1), 2);

  /** The idempotent methods retried ("service/method"; clients/conformance/unavailable_retry.json). */
  public static final List<String> METHODS = List.of(
      "cowkv.v1.KV/Get", "cowkv.v1.KV/Range",
      "cowkv.v1.Files/Stat", "cowkv.v1.Files/ReadDir", "cowkv.v1.Files/Read",
      "cowkv.v1.Files/ReadLink", "cowkv.v1.Files/Fiemap", "cowkv.v1.Files/GetXattr",
      "cowkv.v1.Files/ListXattrs",
      "cowkv.v1.Subvolumes/List", "cowkv.v1.Subvolumes/Show",
      "cowkv.v1.Lease/TimeToLive", "cowkv.v1.Lease/Leases",
      "cowkv.v1.Admin/Stats", "cowkv.v1.Admin/Version");

  public UnavailableRetry {
    if (maxAttempts < 2 || maxAttempts > 5) {
      throw Errors.invalid("connect", "retryUnavailable: maxAttempts " + maxAttempts + " not in [2, 5]");
    }
    if (initialBackoff == null || maxBackoff == null || initialBackoff.isNegative()
        || initialBackoff.isZero() || maxBackoff.compareTo(initialBackoff) < 0 || backoffMultiplier <= 0) {
      throw Errors.invalid("connect",
          "retryUnavailable: want 0 < initialBackoff <= maxBackoff and backoffMultiplier > 0");
    }
  }

  /** The service config, as ManagedChannelBuilder.defaultServiceConfig takes it (numbers as Double). */
  Map<String, Object> serviceConfig() {
    List<Object> names = new ArrayList<>();
    for (String m : METHODS) {
      String[] p = m.split("/");
      names.add(Map.of("service", p[0], "method", p[1]));
    }
    Map<String, Object> policy = Map.of(
        "maxAttempts", (double) maxAttempts,
        "initialBackoff", seconds(initialBackoff),
        "maxBackoff", seconds(maxBackoff),
        "backoffMultiplier", backoffMultiplier,
        "retryableStatusCodes", List.of("UNAVAILABLE"));
    return Map.of("methodConfig", List.of(Map.of("name", names, "retryPolicy", policy)));
  }

  private static String seconds(Duration d) {
    return String.format(java.util.Locale.ROOT, "%.3fs", d.toNanos() / 1e9);
  }
}
