package dev.cowkv;

import com.google.protobuf.ByteString;
import cowkv.v1.Kv;
import java.nio.charset.StandardCharsets;

/**
 * The keys a range read covers and how to read them: {@code [start, end)} (null = open) or
 * every key with a prefix, in key order or reversed, a page at a time.
 *
 * <pre>{@code
 * for (KeyValue kv : sv.range(Range.prefix("user/").pageSize(100))) { ... }
 * sv.range(Range.between("a", "m").reverse().limit(10)).toList();
 * }</pre>
 */
public final class Range {
  private byte[] start;
  private byte[] end;
  private byte[] prefix;
  private long limit;
  private long pageSize;
  private boolean reverse;
  private boolean keysOnly;
  private boolean countOnly;
  private String snapshot = "";
  private long revision;

  private Range() {}

  /** Every key. */
  public static Range all() {
    return new Range();
  }

  /** Keys in {@code [start, end)}; null bounds are open. */
  public static Range between(byte[] start, byte[] end) {
    Range r = new Range();
    r.start = start;
    r.end = end;
    return r;
  }

  public static Range between(String start, String end) {
    return between(bytes(start), bytes(end));
  }

  /** Keys from {@code start} (inclusive) to the last. */
  public static Range from(byte[] start) {
    return between(start, null);
  }

  public static Range from(String start) {
    return from(bytes(start));
  }

  /** Exactly the keys that start with {@code prefix}. */
  public static Range prefix(byte[] prefix) {
    Range r = new Range();
    r.prefix = prefix;
    return r;
  }

  public static Range prefix(String prefix) {
    return prefix(bytes(prefix));
  }

  /** Sets the first key (inclusive); null = from the first key. */
  public Range start(byte[] start) {
    this.start = start;
    return this;
  }

  public Range start(String start) {
    return start(bytes(start));
  }

  /** Sets the exclusive end; null = through the last key. */
  public Range end(byte[] end) {
    this.end = end;
    return this;
  }

  public Range end(String end) {
    return end(bytes(end));
  }

  /** At most this many keys in all (0 = no cap). */
  public Range limit(long limit) {
    this.limit = limit;
    return this;
  }

  /** At most this many keys per call (0 = the server's page limit, 10,000). */
  public Range pageSize(long pageSize) {
    this.pageSize = pageSize;
    return this;
  }

  /** Largest keys first. */
  public Range reverse() {
    return reverse(true);
  }

  public Range reverse(boolean reverse) {
    this.reverse = reverse;
    return this;
  }

  /** Keys and revisions without values. */
  public Range keysOnly() {
    this.keysOnly = true;
    return this;
  }

  /**
   * Only count the keys: a {@link Subvolume#rangePage} or {@link Op#range} then returns
   * {@code count} and no keys.
   */
  public Range countOnly() {
    this.countOnly = true;
    return this;
  }

  /**
   * Read this read-only snapshot of the subvolume instead of the live subvolume: one
   * consistent view across pages.
   */
  public Range snapshot(String snapshot) {
    this.snapshot = snapshot == null ? "" : snapshot;
    return this;
  }

  /**
   * Read the range as it was at {@code revision}, from the subvolume's history (every page at it;
   * 0 = the latest): {@link CompactedException} below what the history keeps, {@link
   * FutureRevisionException} past the current revision.
   */
  public Range atRevision(long revision) {
    this.revision = revision;
    return this;
  }

  boolean hasBounds() {
    return !empty(start) || !empty(end) || !empty(prefix);
  }

  private static boolean empty(byte[] b) {
    return b == null || b.length == 0;
  }

  Kv.DeleteRangeRequest.Builder toDeleteProto(String subvolume) {
    return Kv.DeleteRangeRequest.newBuilder().setSubvolume(subvolume).setStart(bs(start))
        .setEnd(bs(end)).setPrefix(bs(prefix));
  }

  long limit() {
    return limit;
  }

  long pageSize() {
    return pageSize;
  }

  void validate(String op) {
    Validate.bound(op, "start", start);
    Validate.bound(op, "end", end);
    Validate.bound(op, "prefix", prefix);
    Validate.nonNegative(op, "limit", limit);
    Validate.nonNegative(op, "pageSize", pageSize);
    Validate.nonNegative(op, "revision", revision);
    if (!empty(prefix) && (!empty(start) || !empty(end))) {
      throw Errors.invalid(op, "prefix: start and end must be empty with a prefix");
    }
    if (!snapshot.isEmpty()) {
      Validate.subvolumeName(op, "snapshot", snapshot);
    }
  }

  Kv.RangeRequest.Builder toProto(String subvolume, boolean countOnly) {
    return Kv.RangeRequest.newBuilder()
        .setSubvolume(subvolume)
        .setStart(bs(start))
        .setEnd(bs(end))
        .setPrefix(bs(prefix))
        .setReverse(reverse)
        .setKeysOnly(keysOnly)
        .setCountOnly(countOnly || this.countOnly)
        .setSnapshot(snapshot)
        .setRevision(revision);
  }

  Kv.RangeOp toOp(boolean countOnly) {
    return Kv.RangeOp.newBuilder()
        .setStart(bs(start))
        .setEnd(bs(end))
        .setPrefix(bs(prefix))
        .setLimit(limit)
        .setReverse(reverse)
        .setKeysOnly(keysOnly)
        .setCountOnly(countOnly || this.countOnly)
        .build();
  }

  static ByteString bs(byte[] b) {
    return b == null ? ByteString.EMPTY : ByteString.copyFrom(b);
  }

  static byte[] bytes(String s) {
    return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
  }
}
