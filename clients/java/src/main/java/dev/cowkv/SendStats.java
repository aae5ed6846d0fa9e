package dev.cowkv;

import cowkv.v1.SubvolumesOuterClass;

/**
 * What one send did (the stream's last message).
 *
 * @param records records in the stream
 * @param bytes bytes in the stream
 * @param items items sent (whole, as extents, or as clones)
 * @param deletes items the parent had and the snapshot has not
 * @param clones items sent as clones of an extent the receiver has
 * @param dataBytes file and value bytes sent as data
 * @param nodesRead tree nodes the comparison read
 * @param subtreesSkipped shared subtrees skipped unread
 */
public record SendStats(long records, long bytes, long items, long deletes, long clones,
    long dataBytes, long nodesRead, long subtreesSkipped) {

  static SendStats fromProto(SubvolumesOuterClass.SendStats s) {
    return new SendStats(s.getRecords(), s.getBytes(), s.getItems(), s.getDeletes(), s.getClones(),
        s.getDataBytes(), s.getNodesRead(), s.getSubtreesSkipped());
  }
}
