package dev.cowkv;

import cowkv.v1.Kv;

/**
 * A key read with the store revision the read saw.
 *
 * @param kv the key, its value and revisions
 * @param revision the store revision the read saw (in a transaction: its read revision)
 */
public record GetResult(KeyValue kv, long revision) {
  static GetResult fromProto(Kv.GetResponse r) {
    return new GetResult(KeyValue.fromProto(r.getKv()), r.getRevision());
  }
}
