package dev.cowkv;

import cowkv.v1.Kv;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * A handle on one subvolume or snapshot, by name: its key space and (through {@link #files()})
 * its file tree. Making one calls nothing; a missing subvolume shows as
 * {@link NotFoundException} on the first call. Thread-safe.
 *
 * <pre>{@code
 * Subvolume sv = client.subvolume("data");
 * long rev = sv.put("user/1", "alice");
 * sv.getString("user/1");                           // Optional[alice]
 * for (KeyValue kv : sv.range(Range.prefix("user/"))) { ... }
 * long n = sv.runInTransaction(tx -> { ...; return 1L; }); // retried on conflict
 * }</pre>
 */
public final class Subvolume {
  private final Rpc rpc;
  private final String name;
  private final Files files;
  private final Leases leases;

  Subvolume(Rpc rpc, String name) {
    if (!name.isEmpty()) {
      Validate.subvolumeName("subvolume", "subvolume", name);
    }
    this.rpc = rpc;
    this.name = name;
    this.files = new Files(rpc, name);
    this.leases = new Leases(rpc, name);
  }

  /**
   * A copy of this handle whose calls (KV, files, leases; unary and streaming) have the deadline
   * {@code d} instead of the client's defaults; a passed deadline is {@link
   * DeadlineExceededException}: {@code sv.withDeadline(Duration.ofMillis(200)).get("k")}. Watchers
   * keep no deadline (it bounds only the wait for the server's create).
   */
  public Subvolume withDeadline(java.time.Duration d) {
    return new Subvolume(rpc.withDeadline(d), name);
  }

  /** The key space with calls that return CompletableFutures ({@link KvAsync}), under this handle's deadline. */
  public KvAsync async() {
    return new KvAsync(rpc, name);
  }

  /** The subvolume's name ("" = "default"). */
  public String name() {
    return name;
  }

  /** The subvolume's file tree. */
  public Files files() {
    return files;
  }

  /** The subvolume's leases (etcd's lease API). */
  public Leases leases() {
    return leases;
  }

  // Watch.

  /**
   * Watches {@code key} (with {@link WatchOptions#prefix()} every key starting with it, with
   * {@link WatchOptions#rangeEnd} a range) on a KV.Watch stream the client's watchers share,
   * handing events to {@code listener} (on a thread of its own: see {@link Watcher}). Returns once the server created the watcher (within the client's default
   * deadline), so every later change is seen; a refused create throws its error ({@link
   * NotFoundException} for an unknown subvolume, {@link InvalidArgumentException}, ...). A start
   * revision the history no longer keeps ends the watcher at once with a {@link
   * CompactedException} to the listener.
   *
   * <pre>{@code
   * try (Watcher w = sv.watch("cfg/", new WatchOptions().prefix().prevKv(), events -> { ... })) {
   *   ...
   * }
   * }</pre>
   */
  public Watcher watch(byte[] key, WatchOptions options, WatchListener listener) {
    WatchOptions o = options == null ? new WatchOptions() : options;
    if (listener == null) {
      throw Errors.invalid("watch", "listener: null");
    }
    return new Watcher(rpc.watchStreams, rpc.kvStream(), watchCreate(key, o), listener, rpc.deadline);
  }

  /** {@link #watch(byte[], WatchOptions, WatchListener)} of a UTF-8 key. */
  public Watcher watch(String key, WatchOptions options, WatchListener listener) {
    return watch(key.getBytes(StandardCharsets.UTF_8), options, listener);
  }

  private Kv.WatchCreateRequest watchCreate(byte[] key, WatchOptions o) {
    byte[] k = key == null ? new byte[0] : key;
    if (o.prefix && o.rangeEnd.length > 0) {
      throw Errors.invalid("watch", "give prefix or rangeEnd, not both");
    }
    byte[] end = o.prefix ? WatchOptions.prefixEnd(k) : o.rangeEnd;
    if (end.length == 0) {
      Validate.key("watch", k);
    } else if (k.length > Validate.MAX_KEY_BYTES) {
      throw Errors.invalid("watch", "key: " + k.length + " bytes > " + Validate.MAX_KEY_BYTES);
    }
    if (o.startRevision < 0) {
      throw Errors.invalid("watch", "startRevision: " + o.startRevision + " < 0");
    }
    Kv.WatchCreateRequest.Builder b = Kv.WatchCreateRequest.newBuilder().setSubvolume(name)
        .setKey(Range.bs(k)).setRangeEnd(Range.bs(end)).setStartRevision(o.startRevision)
        .setPrevKv(o.prevKv).setProgressNotify(o.progressNotify);
    if (o.noPut) {
      b.addFilters(Kv.WatchCreateRequest.FilterType.NOPUT);
    }
    if (o.noDelete) {
      b.addFilters(Kv.WatchCreateRequest.FilterType.NODELETE);
    }
    return b.build();
  }

  /**
   * Drops the history of revisions below {@code revision} (etcd's Compact): reads at it still
   * work, a watcher must start after it ({@link CompactedException}). Returns the subvolume's
   * compact revision.
   */
  public long compact(long revision) {
    return Rpc.call("compact", () -> rpc.kv().compact(Kv.CompactRequest.newBuilder()
        .setSubvolume(name).setRevision(revision).build())).getCompactRevision();
  }

  // Single keys.

  /** The key with its revisions; {@link NotFoundException} if absent. */
  public KeyValue getKv(byte[] key) {
    Validate.key("get", key);
    return KeyValue.fromProto(Rpc.call("get", () -> rpc.kv().get(
        Kv.GetRequest.newBuilder().setSubvolume(name).setKey(Range.bs(key)).build())).getKv());
  }

  public KeyValue getKv(String key) {
    return getKv(Range.bytes(key));
  }

  /** The key and the store revision the read saw; {@link NotFoundException} if absent. */
  public GetResult getWithRevision(byte[] key) {
    return getAtRevision(key, 0);
  }

  /**
   * The key as it was at {@code revision}, from the subvolume's history (0 = the latest), and the
   * revision read at: {@link NotFoundException} if absent then, {@link CompactedException} (with
   * its compact revision) below what the history keeps, {@link FutureRevisionException} past the
   * current revision.
   */
  public GetResult getAtRevision(byte[] key, long revision) {
    Validate.key("get", key);
    Validate.nonNegative("get", "revision", revision);
    return GetResult.fromProto(Rpc.call("get", () -> rpc.kv().get(Kv.GetRequest.newBuilder()
        .setSubvolume(name).setKey(Range.bs(key)).setRevision(revision).build())));
  }

  public GetResult getAtRevision(String key, long revision) {
    return getAtRevision(Range.bytes(key), revision);
  }

  /** The key's value, or empty if the key is absent. */
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
    return get(key).map(v -> new String(v, StandardCharsets.UTF_8));
  }

  /** Writes a key; returns the write's revision. {@link ReadOnlyException} on a snapshot. */
  public long put(byte[] key, byte[] value) {
    return put(key, value, Durability.DEFAULT);
  }

  public long put(String key, String value) {
    return put(Range.bytes(key), Range.bytes(value), Durability.DEFAULT);
  }

  public long put(byte[] key, byte[] value, Durability durability) {
    return put(key, value, durability, 0);
  }

  /** Writes a key attached to {@code lease} ({@link #leases()}); see {@link #put(byte[], byte[], Durability, long)}. */
  public long put(String key, String value, long lease) {
    return put(Range.bytes(key), Range.bytes(value), Durability.DEFAULT, lease);
  }

  /**
   * Writes a key attached to {@code lease}; lease 0 = none: the put detaches the key from any
   * lease, as etcd's. {@link NotFoundException} for an unknown lease (nothing is written).
   */
  public long put(byte[] key, byte[] value, Durability durability, long lease) {
    Validate.key("put", key);
    Validate.value("put", value);
    return Rpc.call("put", () -> rpc.kv().put(Kv.PutRequest.newBuilder().setSubvolume(name)
        .setKey(Range.bs(key)).setValue(Range.bs(value)).setDurability(durability.proto)
        .setLease(lease).build())).getRevision();
  }

  /** Deletes a key; returns the revision. {@link NotFoundException} if absent. */
  public long delete(byte[] key) {
    return delete(key, Durability.DEFAULT);
  }

  public long delete(String key) {
    return delete(Range.bytes(key), Durability.DEFAULT);
  }

  public long delete(byte[] key, Durability durability) {
    Validate.key("delete", key);
    return Rpc.call("delete", () -> rpc.kv().delete(Kv.DeleteRequest.newBuilder()
        .setSubvolume(name).setKey(Range.bs(key)).setDurability(durability.proto).build()))
        .getRevision();
  }

  /** Deletes a key if it exists; the revision, or empty if it was absent. */
  public OptionalLong deleteIfExists(byte[] key) {
    try {
      return OptionalLong.of(delete(key));
    } catch (NotFoundException e) {
      return OptionalLong.empty();
    }
  }

  public OptionalLong deleteIfExists(String key) {
    return deleteIfExists(Range.bytes(key));
  }

  // Ranges.

  /** The keys of a range, fetched a page at a time as iteration advances. */
  public RangeResults range(Range range) {
    range.validate("range");
    Kv.RangeRequest first = range.toProto(name, false).build();
    return new RangeResults(r -> Rpc.call("range", () -> rpc.kv().range(r)), first,
        range.limit(), range.pageSize());
  }

  /**
   * Exactly one Range call: the page that starts at {@code pageToken} (null or empty = the
   * first page; the token of the previous page of the same range otherwise). The range's
   * {@code limit} is this page's limit. Prefer {@link #range}, which pages by itself.
   */
  public RangePage rangePage(Range range, byte[] pageToken) {
    range.validate("range");
    Kv.RangeRequest req = range.toProto(name, false).setLimit(range.limit())
        .setPageToken(Range.bs(pageToken)).build();
    return RangePage.fromProto(Rpc.call("range", () -> rpc.kv().range(req)));
  }

  /** The exact number of keys in a range. */
  public long count(Range range) {
    range.validate("count");
    Kv.RangeRequest req = range.toProto(name, true).build();
    return Rpc.call("count", () -> rpc.kv().range(req)).getCount();
  }

  /**
   * Deletes every key in {@code [start, end)} atomically (at most 10,000 per call). At least
   * one bound is required, so a call never empties the subvolume by accident
   * ({@code start = {0}} does).
   */
  public DeleteRangeResult deleteRange(byte[] start, byte[] end) {
    return deleteRange(Range.between(start, end), Durability.DEFAULT);
  }

  public DeleteRangeResult deleteRange(String start, String end) {
    return deleteRange(Range.bytes(start), Range.bytes(end));
  }

  /** Deletes every key with this prefix (at most 10,000 per call). */
  public DeleteRangeResult deletePrefix(String prefix) {
    return deleteRange(Range.prefix(prefix), Durability.DEFAULT);
  }

  /** Deletes the keys of a range (its bounds or prefix; other options do not apply). */
  public DeleteRangeResult deleteRange(Range range, Durability durability) {
    String op = "delete-range";
    range.validate(op);
    if (!range.hasBounds()) {
      throw Errors.invalid(op, "give start, end or prefix");
    }
    Kv.DeleteRangeResponse r = Rpc.call(op, () -> rpc.kv().deleteRange(
        range.toDeleteProto(name).setDurability(durability.proto).build()));
    return new DeleteRangeResult(r.getDeleted(), r.getRevision());
  }

  // Transactions.

  /** A one-shot conditional transaction: {@code sv.txn().when(..).then(..).otherwise(..).commit()}. */
  public Txn txn() {
    return new Txn(rpc, name);
  }

  /** Begins an interactive transaction; commit it, or close it to abort. */
  public Transaction begin() {
    return begin(TransactionOptions.DEFAULT);
  }

  public Transaction begin(TransactionOptions options) {
    return new Transaction(rpc, name, options.leaseMs(), options.durability());
  }

  /**
   * Runs {@code fn} in a fresh transaction and commits it (unless {@code fn} committed or
   * aborted it itself), retrying on {@link ConflictException} and {@link TooOldException}
   * with jittered exponential backoff ({@link RetryPolicy#DEFAULT}: docs/api.md, "Retrying
   * transactions"); returns what {@code fn} returned. Other exceptions abort the transaction and
   * propagate at once. {@code fn} may run more than once: keep side effects out of it. The retry
   * helper of every cowkv client; {@link #begin()} starts a transaction without retries.
   */
  public <T> T runInTransaction(TransactionFunction<T> fn) {
    return runInTransaction(TransactionOptions.DEFAULT, fn);
  }

  public <T> T runInTransaction(TransactionOptions options, TransactionFunction<T> fn) {
    return options.retry().run(() -> attempt(options, fn));
  }

  /** The old name of {@link #runInTransaction(TransactionFunction)}. */
  @Deprecated(since = "0.2.0", forRemoval = true)
  public <T> T transaction(TransactionFunction<T> fn) {
    return runInTransaction(fn);
  }

  /** The old name of {@link #runInTransaction(TransactionOptions, TransactionFunction)}. */
  @Deprecated(since = "0.2.0", forRemoval = true)
  public <T> T transaction(TransactionOptions options, TransactionFunction<T> fn) {
    return runInTransaction(options, fn);
  }

  /** {@link #runInTransaction} for a body without a result. */
  public void runTransaction(TransactionBody body) {
    runTransaction(TransactionOptions.DEFAULT, body);
  }

  public void runTransaction(TransactionOptions options, TransactionBody body) {
    transaction(options, tx -> {
      body.accept(tx);
      return null;
    });
  }

  private <T> T attempt(TransactionOptions options, TransactionFunction<T> fn) {
    try (Transaction tx = begin(options)) {
      T result = fn.apply(tx);
      if (tx.state() == Transaction.State.OPEN) {
        tx.commit();
      }
      return result;
    }
  }

  @Override
  public String toString() {
    return "Subvolume(" + name + ")";
  }
}
