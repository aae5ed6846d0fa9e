package dev.cowkv;

import cowkv.v1.Kv;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A subvolume's key space with calls that return {@link CompletableFuture}s ({@link
 * Subvolume#async()}), as jetcd's KV: the same requests, checks and answers as the blocking
 * {@link Subvolume} methods, on gRPC's future stub, so no thread waits. A failed call completes
 * its future exceptionally with the same {@link CowkvException} subclass the blocking method
 * throws (a request the client refuses, such as an empty key, is a future failed at once with
 * {@link InvalidArgumentException}); {@link CompletableFuture#cancel} cancels the RPC (the
 * future then completes with a {@link java.util.concurrent.CancellationException}). Every call
 * has the deadline of the subvolume handle it came from: the client's default, or {@link
 * #withDeadline}'s; a passed deadline is {@link DeadlineExceededException}. Callbacks run on a
 * gRPC thread: hand long work to an executor ({@code thenApplyAsync}).
 *
 * <pre>{@code
 * KvAsync kv = client.subvolume("data").async();
 * kv.put("k", "v").thenCompose(rev -> kv.get("k")).thenAccept(v -> ...);
 * kv.withDeadline(Duration.ofMillis(200)).get("k").exceptionally(...);
 * }</pre>
 */
public final class KvAsync {
  private final Rpc rpc;
  private final String name;

  KvAsync(Rpc rpc, String name) {
    this.rpc = rpc;
    this.name = name;
  }

  /** A copy whose calls have the deadline {@code d} (a positive duration) instead of the client's default. */
  public KvAsync withDeadline(Duration d) {
    return new KvAsync(rpc.withDeadline(d), name);
  }

  /** The key with its revisions; {@link NotFoundException} if absent. */
  public CompletableFuture<KeyValue> getKv(byte[] key) {
    return Rpc.future("get", () -> {
      Validate.key("get", key);
      return rpc.kvFuture().get(Kv.GetRequest.newBuilder().setSubvolume(name)
          .setKey(Range.bs(key)).build());
    }, r -> KeyValue.fromProto(r.getKv()));
  }

  public CompletableFuture<KeyValue> getKv(String key) {
    return getKv(Range.bytes(key));
  }

  /** The key as it was at {@code revision} (0 = the latest) and the revision read at. */
  public CompletableFuture<GetResult> getAtRevision(byte[] key, long revision) {
    return Rpc.future("get", () -> {
      Validate.key("get", key);
      Validate.nonNegative("get", "revision", revision);
      return rpc.kvFuture().get(Kv.GetRequest.newBuilder().setSubvolume(name)
          .setKey(Range.bs(key)).setRevision(revision).build());
    }, GetResult::fromProto);
  }

  /** The key's value, or empty if the key is absent. */
  public CompletableFuture<Optional<byte[]>> get(byte[] key) {
    return getKv(key).handle((kv, e) -> {
      if (e == null) {
        return Optional.of(kv.value());
      }
      Throwable c = e instanceof java.util.concurrent.CompletionException ? e.getCause() : e;
      if (c instanceof NotFoundException) {
        return Optional.<byte[]>empty();
      }
      throw c instanceof RuntimeException r ? r : new java.util.concurrent.CompletionException(c);
    });
  }

  public CompletableFuture<Optional<byte[]>> get(String key) {
    return get(Range.bytes(key));
  }

  /** The key's value as UTF-8 text, or empty if absent. */
  public CompletableFuture<Optional<String>> getString(String key) {
    return get(key).thenApply(v -> v.map(b -> new String(b, StandardCharsets.UTF_8)));
  }

  /** Writes a key; the write's revision. */
  public CompletableFuture<Long> put(String key, String value) {
    return put(Range.bytes(key), Range.bytes(value), Durability.DEFAULT, 0);
  }

  public CompletableFuture<Long> put(byte[] key, byte[] value) {
    return put(key, value, Durability.DEFAULT, 0);
  }

  /** Writes a key with a durability and a lease (0 = none), as {@link Subvolume#put(byte[], byte[], Durability, long)}. */
  public CompletableFuture<Long> put(byte[] key, byte[] value, Durability durability, long lease) {
    return Rpc.future("put", () -> {
      Validate.key("put", key);
      Validate.value("put", value);
      return rpc.kvFuture().put(Kv.PutRequest.newBuilder().setSubvolume(name).setKey(Range.bs(key))
          .setValue(Range.bs(value)).setDurability(durability.proto).setLease(lease).build());
    }, Kv.PutResponse::getRevision);
  }

  /** Deletes a key; the revision. {@link NotFoundException} if absent. */
  public CompletableFuture<Long> delete(String key) {
    return delete(Range.bytes(key), Durability.DEFAULT);
  }

  public CompletableFuture<Long> delete(byte[] key, Durability durability) {
    return Rpc.future("delete", () -> {
      Validate.key("delete", key);
      return rpc.kvFuture().delete(Kv.DeleteRequest.newBuilder().setSubvolume(name)
          .setKey(Range.bs(key)).setDurability(durability.proto).build());
    }, Kv.DeleteResponse::getRevision);
  }

  /** One Range call: the page at {@code pageToken} (null or empty = the first), as {@link Subvolume#rangePage}. */
  public CompletableFuture<RangePage> rangePage(Range range, byte[] pageToken) {
    return Rpc.future("range", () -> {
      range.validate("range");
      return rpc.kvFuture().range(range.toProto(name, false).setLimit(range.limit())
          .setPageToken(Range.bs(pageToken)).build());
    }, RangePage::fromProto);
  }

  /** The exact number of keys in a range. */
  public CompletableFuture<Long> count(Range range) {
    return Rpc.future("count", () -> {
      range.validate("count");
      return rpc.kvFuture().range(range.toProto(name, true).build());
    }, Kv.RangeResponse::getCount);
  }

  /** Deletes the keys of a range (its bounds or prefix), as {@link Subvolume#deleteRange(Range, Durability)}. */
  public CompletableFuture<DeleteRangeResult> deleteRange(Range range, Durability durability) {
    String op = "delete-range";
    return Rpc.future(op, () -> {
      range.validate(op);
      if (!range.hasBounds()) {
        throw Errors.invalid(op, "give start, end or prefix");
      }
      return rpc.kvFuture().deleteRange(range.toDeleteProto(name).setDurability(durability.proto)
          .build());
    }, r -> new DeleteRangeResult(r.getDeleted(), r.getRevision()));
  }

  /** A one-shot conditional transaction; send it with {@link Txn#commitAsync()}. */
  public Txn txn() {
    return new Txn(rpc, name);
  }

  /** Drops the history below {@code revision}; the subvolume's compact revision. */
  public CompletableFuture<Long> compact(long revision) {
    return Rpc.future("compact", () -> rpc.kvFuture().compact(Kv.CompactRequest.newBuilder()
        .setSubvolume(name).setRevision(revision).build()), Kv.CompactResponse::getCompactRevision);
  }
}
