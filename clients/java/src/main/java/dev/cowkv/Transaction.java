package dev.cowkv;

import cowkv.v1.Kv;
import java.util.Optional;

/**
 * An interactive transaction on one subvolume (KV.Begin .. Commit/Abort).
 *
 * <p>Every call goes to the server, which knows whether the handle is still open: a call on a
 * committed or aborted transaction is {@link NotFoundException} (an expired one
 * {@link ConflictException}), the same in every cowkv client.
 *
 * <p>Reads ({@link #get}, {@link #range}) see the latest state plus this transaction's own
 * writes and are recorded; writes ({@link #put}, {@link #delete}, {@link #deleteRange}) are
 * buffered until {@link #commit}, which validates the reads ({@link ConflictException} if one
 * changed, {@link TooOldException} past the conflict window). The server aborts a handle unused
 * for longer than its lease. Closing an uncommitted transaction aborts it, so
 * try-with-resources never leaks a handle:
 *
 * <pre>{@code
 * try (Transaction tx = sv.begin()) {
 *   long n = Long.parseLong(tx.getString("counter").orElse("0"));
 *   tx.put("counter", Long.toString(n + 1));
 *   tx.commit();
 * }
 * }</pre>
 *
 * <p>Not thread-safe. Prefer {@link Subvolume#transaction}, which retries conflicts.
 */
public final class Transaction implements AutoCloseable {
  /** Where a transaction is in its life. */
  public enum State {
    OPEN,
    COMMITTED,
    /** By {@link #abort}, {@link #close} or a failed commit. */
    ABORTED
  }

  private final Rpc rpc;
  private final String subvolume;
  private final Durability durability;
  private final long handle;
  private final long readRevision;
  private final long leaseMs;
  private long revision = -1;
  private State state = State.OPEN;

  Transaction(Rpc rpc, String subvolume, long leaseMs, Durability durability) {
    if (leaseMs < 0 || leaseMs > Validate.MAX_LEASE_MS) {
      throw Errors.invalid("begin", "lease_ms: at most " + Validate.MAX_LEASE_MS + ", not " + leaseMs);
    }
    this.rpc = rpc;
    this.subvolume = subvolume;
    this.durability = durability;
    Kv.BeginResponse r = Rpc.call("begin", () -> rpc.kv().begin(
        Kv.BeginRequest.newBuilder().setSubvolume(subvolume).setLeaseMs(leaseMs).build()));
    this.handle = r.getHandle();
    this.readRevision = r.getReadRevision();
    this.leaseMs = r.getLeaseMs();
  }

  public String subvolume() {
    return subvolume;
  }

  /** The server's handle. */
  public long handle() {
    return handle;
  }

  /** The revision the transaction reads at. */
  public long readRevision() {
    return readRevision;
  }

  /** The lease the server granted, ms. */
  public long leaseMs() {
    return leaseMs;
  }

  public State state() {
    return state;
  }

  /** The commit's revision (-1 before a successful commit). */
  public long revision() {
    return revision;
  }

  /** The key with its revisions; {@link NotFoundException} if absent. */
  public KeyValue getKv(byte[] key) {
    Validate.key("get", key);
    return KeyValue.fromProto(Rpc.call("get", () -> rpc.kv().txnGet(
        Kv.TxnGetRequest.newBuilder().setHandle(handle).setKey(Range.bs(key)).build())).getKv());
  }

  /** The key and the transaction's read revision; {@link NotFoundException} if absent. */
  public GetResult getWithRevision(byte[] key) {
    Validate.key("get", key);
    return GetResult.fromProto(Rpc.call("get", () -> rpc.kv().txnGet(
        Kv.TxnGetRequest.newBuilder().setHandle(handle).setKey(Range.bs(key)).build())));
  }

  /** The key's value, or empty if absent (the absence is still recorded). */
  public Optional<byte[]> get(byte[] key) {
    try {
      return Optional.of(getKv(key).value());
    } catch (NotFoundException e) {
      return Optional.empty();
    }
  }

  public Optional<byte[]> get(String key) {
    return get(Range.bytes(key));
  }

  /** The key's value as UTF-8 text, or empty if absent. */
  public Optional<String> getString(String key) {
    return get(key).map(v -> new String(v, java.nio.charset.StandardCharsets.UTF_8));
  }

  /** Keys of a range, paged (own writes included; the snapshot option does not apply). */
  public RangeResults range(Range range) {
    range.validate("range");
    Kv.RangeRequest first = range.toProto("", false).build();
    return new RangeResults(r -> Rpc.call("range", () -> rpc.kv().txnRange(
        Kv.TxnRangeRequest.newBuilder().setHandle(handle).setRange(r).build())),
        first, range.limit(), range.pageSize());
  }

  /** Number of keys in the range (own writes included). */
  public long count(Range range) {
    range.validate("count");
    Kv.RangeRequest req = range.toProto("", true).build();
    return Rpc.call("count", () -> rpc.kv().txnRange(
        Kv.TxnRangeRequest.newBuilder().setHandle(handle).setRange(req).build())).getCount();
  }

  /** Buffers a write. */
  public void put(byte[] key, byte[] value) {
    Validate.key("put", key);
    Validate.value("put", value);
    Rpc.call("put", () -> rpc.kv().txnPut(Kv.TxnPutRequest.newBuilder().setHandle(handle)
        .setKey(Range.bs(key)).setValue(Range.bs(value)).build()));
  }

  public void put(String key, String value) {
    put(Range.bytes(key), Range.bytes(value));
  }

  /** Buffers the delete of one key. */
  public void delete(byte[] key) {
    Validate.key("delete", key);
    Rpc.call("delete", () -> rpc.kv().txnDelete(
        Kv.TxnDeleteRequest.newBuilder().setHandle(handle).setKey(Range.bs(key)).build()));
  }

  public void delete(String key) {
    delete(Range.bytes(key));
  }

  /** Buffers the delete of {@code [start, end)} (end null = through the last key). */
  public void deleteRange(byte[] start, byte[] end) {
    Validate.bound("delete-range", "start", start);
    Validate.bound("delete-range", "end", end);
    Rpc.call("delete-range", () -> rpc.kv().txnDelete(Kv.TxnDeleteRequest.newBuilder()
        .setHandle(handle).setKey(Range.bs(start)).setRange(true).setEnd(Range.bs(end)).build()));
  }

  public void deleteRange(String start, String end) {
    deleteRange(Range.bytes(start), Range.bytes(end));
  }

  /** Validates and applies the transaction; returns its revision. Finished whatever happens. */
  public long commit() {
    return commit(durability);
  }

  public long commit(Durability d) {
    try {
      revision = Rpc.call("commit", () -> rpc.kv().commit(Kv.CommitRequest.newBuilder()
          .setHandle(handle).setDurability(d.proto).build())).getRevision();
    } catch (RuntimeException e) {
      state = State.ABORTED;
      throw e;
    }
    state = State.COMMITTED;
    return revision;
  }

  /** Drops the transaction and its buffered writes (idempotent). */
  public void abort() {
    if (state != State.OPEN) {
      return;
    }
    state = State.ABORTED;
    Rpc.call("abort", () -> rpc.kv().abort(Kv.AbortRequest.newBuilder().setHandle(handle).build()));
  }

  /** Aborts unless committed; errors of the abort (an expired handle) are ignored. */
  @Override
  public void close() {
    try {
      abort();
    } catch (CowkvException ignored) {
      // The handle may have expired or the server gone; nothing is left to release.
    }
  }
}
