package dev.cowkv;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;

/**
 * How to reach cowkvd: address, TLS, bearer token and default deadlines.
 *
 * <pre>{@code
 * CowkvOptions opts = CowkvOptions.builder()
 *     .address("127.0.0.1:7420")
 *     .token("s3cret")                       // cowkvd --auth-token-file
 *     .tls(Path.of("ca.pem"))                // cowkvd --tls-cert/--tls-key
 *     .defaultDeadline(Duration.ofSeconds(10))
 *     .build();
 * }</pre>
 */
public final class CowkvOptions {
  /** cowkvd's default listen address. */
  public static final String DEFAULT_ADDRESS = "127.0.0.1:7420";
  /** Deadline of a unary call unless set (gRPC sets none by itself). */
  public static final Duration DEFAULT_DEADLINE = Duration.ofSeconds(30);
  /** Deadline of a streaming file read or write unless set. */
  public static final Duration DEFAULT_STREAM_DEADLINE = Duration.ofMinutes(10);
  /** The server's message limit, both directions (docs/api.md, "Limits"). */
  public static final int MAX_MESSAGE_BYTES = 20 << 20;

  private final String address;
  private final boolean tls;
  private final Path trustedCertificates;
  private final String authority;
  private final String token;
  private final Duration defaultDeadline;
  private final Duration streamDeadline;
  private final UnavailableRetry retryUnavailable;

  private CowkvOptions(Builder b) {
    this.address = b.address;
    this.tls = b.tls;
    this.trustedCertificates = b.trustedCertificates;
    this.authority = b.authority;
    this.token = b.token;
    this.defaultDeadline = b.defaultDeadline;
    this.streamDeadline = b.streamDeadline;
    this.retryUnavailable = b.retryUnavailable;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Options with every default and this address. */
  public static CowkvOptions of(String address) {
    return builder().address(address).build();
  }

  public String address() {
    return address;
  }

  public boolean tls() {
    return tls;
  }

  /** PEM file of the certificates to trust; null = the JVM's default trust store. */
  public Path trustedCertificates() {
    return trustedCertificates;
  }

  /** The authority (TLS server name) to expect instead of the address's host; may be null. */
  public String authority() {
    return authority;
  }

  /** The bearer token, or null. */
  public String token() {
    return token;
  }

  /** Deadline of each unary call; null = none. */
  public Duration defaultDeadline() {
    return defaultDeadline;
  }

  /** Deadline of each streaming file read or write; null = none. */
  /** The UNAVAILABLE retry policy, or null (off). */
  public UnavailableRetry retryUnavailable() {
    return retryUnavailable;
  }

  public Duration streamDeadline() {
    return streamDeadline;
  }

  /** Builds {@link CowkvOptions}. */
  public static final class Builder {
    private String address = DEFAULT_ADDRESS;
    private boolean tls;
    private Path trustedCertificates;
    private String authority;
    private String token;
    private Duration defaultDeadline = DEFAULT_DEADLINE;
    private Duration streamDeadline = DEFAULT_STREAM_DEADLINE;
    private UnavailableRetry retryUnavailable;

    private Builder() {}

    /** "host:port" of cowkvd (default 127.0.0.1:7420). */
    public Builder address(String address) {
      this.address = Objects.requireNonNull(address, "address");
      return this;
    }

    /** Use TLS, trusting the JVM's default certificates. */
    public Builder tls(boolean tls) {
      this.tls = tls;
      return this;
    }

    /** Use TLS, trusting the certificates in this PEM file. */
    public Builder tls(Path trustedCertificates) {
      this.tls = true;
      this.trustedCertificates = trustedCertificates;
      return this;
    }

    /** The server name to expect in its certificate when it differs from the address's host. */
    public Builder authority(String authority) {
      this.authority = authority;
      return this;
    }

    /** Sent as {@code authorization: Bearer <token>} on every call (cowkvd --auth-token-file). */
    public Builder token(String token) {
      this.token = token;
      return this;
    }

    /** Deadline of each unary call (default 30 s); null = none. */
    public Builder defaultDeadline(Duration deadline) {
      this.defaultDeadline = deadline;
      return this;
    }

    /** Deadline of each streaming file read or write (default 10 min); null = none. */
    public Builder streamDeadline(Duration deadline) {
      this.streamDeadline = deadline;
      return this;
    }

    /**
     * Retry the idempotent reads ({@link UnavailableRetry#METHODS}) that fail UNAVAILABLE with
     * this policy ({@link UnavailableRetry#DEFAULT}); null (the default) = off.
     */
    public Builder retryUnavailable(UnavailableRetry policy) {
      this.retryUnavailable = policy;
      return this;
    }

    public CowkvOptions build() {
      return new CowkvOptions(this);
    }
  }
}
