package dev.cowkv;

import cowkv.v1.Kv;
import java.util.ArrayList;
import java.util.List;

/** The result of one {@link Op} of the branch that ran, in the same position. */
public sealed interface OpResult {

  /** Result of a put (the transaction's revision applies). */
  record Put() implements OpResult {}

  /** Result of a delete or deleteRange: keys removed. */
  record Delete(long deleted) implements OpResult {}

  /** Result of a range, count or get. */
  record Range(List<KeyValue> kvs, long count, boolean more) implements OpResult {
    /** The first key's value (a get's value), or null when nothing matched. */
    public byte[] value() {
      return kvs.isEmpty() ? null : kvs.get(0).value();
    }
  }

  static OpResult fromProto(Kv.ResponseOp m) {
    switch (m.getResultCase()) {
      case DELETE:
        return new Delete(m.getDelete().getDeleted());
      case RANGE:
        List<KeyValue> kvs = new ArrayList<>();
        for (Kv.KeyValue kv : m.getRange().getKvsList()) {
          kvs.add(KeyValue.fromProto(kv));
        }
        return new Range(List.copyOf(kvs), m.getRange().getCount(), m.getRange().getMore());
      default:
        return new Put();
    }
  }
}
