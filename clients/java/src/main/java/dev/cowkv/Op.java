package dev.cowkv;

import cowkv.v1.Kv;

/** One operation of a one-shot transaction's branch ({@link Subvolume#txn()}). */
public final class Op {
  final Kv.RequestOp proto;

  private Op(Kv.RequestOp proto) {
    this.proto = proto;
  }

  /** Writes a key. */
  public static Op put(byte[] key, byte[] value) {
    return new Op(Kv.RequestOp.newBuilder()
        .setPut(Kv.PutOp.newBuilder().setKey(Range.bs(key)).setValue(Range.bs(value))).build());
  }

  public static Op put(String key, String value) {
    return put(Range.bytes(key), Range.bytes(value));
  }

  /** Writes a key attached to {@code lease} (0 = none: the key is detached from any lease). */
  public static Op put(byte[] key, byte[] value, long lease) {
    return new Op(Kv.RequestOp.newBuilder().setPut(Kv.PutOp.newBuilder().setKey(Range.bs(key))
        .setValue(Range.bs(value)).setLease(lease)).build());
  }

  public static Op put(String key, String value, long lease) {
    return put(Range.bytes(key), Range.bytes(value), lease);
  }

  /** Deletes a key (an absent key is fine: {@code deleted} is 0). */
  public static Op delete(byte[] key) {
    return new Op(Kv.RequestOp.newBuilder()
        .setDelete(Kv.DeleteOp.newBuilder().setKey(Range.bs(key))).build());
  }

  public static Op delete(String key) {
    return delete(Range.bytes(key));
  }

  /** Deletes the keys in {@code [start, end)} (null = open). */
  public static Op deleteRange(byte[] start, byte[] end) {
    return new Op(Kv.RequestOp.newBuilder().setDeleteRange(
        Kv.DeleteRangeOp.newBuilder().setStart(Range.bs(start)).setEnd(Range.bs(end))).build());
  }

  public static Op deleteRange(String start, String end) {
    return deleteRange(Range.bytes(start), Range.bytes(end));
  }

  /** Reads a range (no paging; its limit applies); it sees the state before the Txn's writes. */
  public static Op range(Range range) {
    return new Op(Kv.RequestOp.newBuilder().setRange(range.toOp(false)).build());
  }

  /** Counts the keys of a range. */
  public static Op count(Range range) {
    return new Op(Kv.RequestOp.newBuilder().setRange(range.toOp(true)).build());
  }

  /** Reads one key (a range of exactly that key). */
  public static Op get(byte[] key) {
    byte[] end = java.util.Arrays.copyOf(key, key.length + 1);
    return range(Range.between(key, end).limit(1));
  }

  public static Op get(String key) {
    return get(Range.bytes(key));
  }

  void validate(String op) {
    switch (proto.getOpCase()) {
      case PUT:
        Validate.key(op, proto.getPut().getKey().toByteArray());
        Validate.value(op, proto.getPut().getValue().toByteArray());
        break;
      case DELETE:
        Validate.key(op, proto.getDelete().getKey().toByteArray());
        break;
      case DELETE_RANGE:
        Validate.bound(op, "start", proto.getDeleteRange().getStart().toByteArray());
        Validate.bound(op, "end", proto.getDeleteRange().getEnd().toByteArray());
        break;
      default:
        break;
    }
  }
}
