package dev.cowkv;

import cowkv.v1.Kv;
import java.util.ArrayList;
import java.util.List;

/**
 * One page of a range read ({@link Subvolume#rangePage}).
 *
 * @param kvs the keys of this page, in order
 * @param count keys in the range from this page's start: exact with count-only or when the
 *     page holds the rest of the range, else a lower bound
 * @param more more keys follow this page
 * @param revision the store revision the read saw
 * @param nextPageToken pass to the next {@code rangePage} call; empty when {@code more} is false
 */
public record RangePage(List<KeyValue> kvs, long count, boolean more, long revision,
    byte[] nextPageToken) {
  static RangePage fromProto(Kv.RangeResponse r) {
    List<KeyValue> kvs = new ArrayList<>();
    for (Kv.KeyValue kv : r.getKvsList()) {
      kvs.add(KeyValue.fromProto(kv));
    }
    return new RangePage(List.copyOf(kvs), r.getCount(), r.getMore(), r.getRevision(),
        r.getNextPageToken().toByteArray());
  }
}
