package dev.cowkv;

import cowkv.v1.SubvolumesOuterClass;

/**
 * What one receive made.
 *
 * @param name the subvolume made (a dry run: the name it would have had)
 * @param id its id; 0 for a dry run
 * @param incremental the stream was incremental
 * @param parent the local parent an incremental stream applied to
 * @param records records received
 * @param bytes stream bytes received
 * @param items items received
 * @param deletes items deleted
 * @param clones items whose extent was cloned
 * @param dataBytes file and value bytes received as data
 */
public record ReceiveResult(String name, long id, boolean incremental, String parent,
    long records, long bytes, long items, long deletes, long clones, long dataBytes) {

  static ReceiveResult fromProto(SubvolumesOuterClass.ReceiveResponse m) {
    return new ReceiveResult(m.getName(), m.getId(), m.getIncremental(), m.getParent(),
        m.getRecords(), m.getBytes(), m.getItems(), m.getDeletes(), m.getClones(),
        m.getDataBytes());
  }
}
