package dev.cowkv;

import java.util.Arrays;

/**
 * What to watch and how ({@link Subvolume#watch}): a fluent builder; the default is the key
 * alone, from the next change, every event type, without prev_kv.
 *
 * <pre>{@code
 * new WatchOptions().prefix().prevKv().startRevision(last + 1)
 * }</pre>
 */
public final class WatchOptions {
  boolean prefix;
  byte[] rangeEnd = new byte[0];
  long startRevision;
  boolean prevKv;
  boolean noPut;
  boolean noDelete;
  boolean progressNotify;

  /** Every key that starts with the key. */
  public WatchOptions prefix() {
    prefix = true;
    return this;
  }

  /** The keys in [key, end) ({@code {0}}: every key from key on). Not with {@link #prefix()}. */
  public WatchOptions rangeEnd(byte[] end) {
    rangeEnd = end == null ? new byte[0] : end.clone();
    return this;
  }

  /**
   * Starts at an older revision, served from the history (a {@link CompactedException} ends the
   * watcher if it is gone); 0 = the next change.
   */
  public WatchOptions startRevision(long revision) {
    startRevision = revision;
    return this;
  }

  /** Each event carries the key before the change. */
  public WatchOptions prevKv() {
    prevKv = true;
    return this;
  }

  /** Leaves put events out. */
  public WatchOptions noPut() {
    noPut = true;
    return this;
  }

  /** Leaves delete events out. */
  public WatchOptions noDelete() {
    noDelete = true;
    return this;
  }

  /** Asks for empty responses now and then while nothing changes ({@link Watcher#revision()} advances). */
  public WatchOptions progressNotify() {
    progressNotify = true;
    return this;
  }

  /** etcd's GetPrefixRangeEnd: the end of the keys starting with {@code p} ({@code {0}}, every key, for 0xff bytes). */
  public static byte[] prefixEnd(byte[] p) {
    int n = p.length;
    while (n > 0 && p[n - 1] == (byte) 0xff) {
      n--;
    }
    if (n == 0) {
      return new byte[] {0};
    }
    byte[] end = Arrays.copyOf(p, n);
    end[n - 1]++;
    return end;
  }
}
