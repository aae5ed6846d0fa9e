package dev.cowkv;

import cowkv.v1.Kv;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A one-shot conditional transaction (etcd-style): if every compare holds run the
 * {@code then} ops, else the {@code otherwise} ops, atomically under one revision. A compare
 * that does not hold is not an error: {@link TxnResult#succeeded()} is false.
 *
 * <pre>{@code
 * TxnResult r = sv.txn()
 *     .when(Compare.value("owner").eq("alice"), Compare.missing("lock"))
 *     .then(Op.put("lock", "alice"))
 *     .otherwise(Op.get("lock"))
 *     .commit();
 * }</pre>
 */
public final class Txn {
  private final Rpc rpc;
  private final String subvolume;
  private final List<Compare> compares = new ArrayList<>();
  private final List<Op> success = new ArrayList<>();
  private final List<Op> failure = new ArrayList<>();
  private Durability durability = Durability.DEFAULT;

  Txn(Rpc rpc, String subvolume) {
    this.rpc = rpc;
    this.subvolume = subvolume;
  }

  /** Conditions; all must hold for the {@code then} branch (none = always). */
  public Txn when(Compare... c) {
    compares.addAll(Arrays.asList(c));
    return this;
  }

  /** Ops run when every compare holds. */
  public Txn then(Op... ops) {
    success.addAll(Arrays.asList(ops));
    return this;
  }

  /** Ops run otherwise. */
  public Txn otherwise(Op... ops) {
    failure.addAll(Arrays.asList(ops));
    return this;
  }

  public Txn durability(Durability d) {
    this.durability = d;
    return this;
  }

  /** Sends the transaction. */
  public TxnResult commit() {
    Kv.TxnRequest req = request();
    return result(Rpc.call("txn", () -> rpc.kv().txn(req)));
  }

  /**
   * Sends the transaction on gRPC's future stub ({@link KvAsync}): the future completes with the
   * result, or exceptionally with the CowkvException {@link #commit()} would throw; cancelling
   * it cancels the call.
   */
  public CompletableFuture<TxnResult> commitAsync() {
    return Rpc.future("txn", () -> rpc.kvFuture().txn(request()), Txn::result);
  }

  private Kv.TxnRequest request() {
    Kv.TxnRequest.Builder req = Kv.TxnRequest.newBuilder().setSubvolume(subvolume)
        .setDurability(durability.proto);
    for (Compare c : compares) {
      c.validate("txn");
      req.addCompare(c.proto);
    }
    for (Op o : success) {
      o.validate("txn");
      req.addSuccess(o.proto);
    }
    for (Op o : failure) {
      o.validate("txn");
      req.addFailure(o.proto);
    }
    return req.build();
  }

  private static TxnResult result(Kv.TxnResponse r) {
    List<OpResult> results = new ArrayList<>();
    for (Kv.ResponseOp op : r.getResponsesList()) {
      results.add(OpResult.fromProto(op));
    }
    return new TxnResult(r.getSucceeded(), r.getRevision(), List.copyOf(results));
  }
}
