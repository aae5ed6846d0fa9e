package dev.cowkv;

import cowkv.v1.SubvolumesOuterClass;

/**
 * A resumable receive that stopped before its end.
 *
 * @param name the subvolume it will become
 * @param token the resume token: give it to the sender's {@link SendOptions#resumeToken}
 * @param records records applied so far
 * @param bytes stream bytes applied so far
 * @param uuid the snapshot being received
 * @param generation the snapshot's generation at the sender
 * @param parentUuid its parent (incremental streams), else ""
 * @param inUse a receive is writing to it now
 */
public record PartialReceive(String name, String token, long records, long bytes, String uuid,
    long generation, String parentUuid, boolean inUse) {

  static PartialReceive fromProto(SubvolumesOuterClass.PartialReceive p) {
    return new PartialReceive(p.getName(), p.getToken(), p.getRecords(), p.getBytes(), p.getUuid(),
        p.getGeneration(), p.getParentUuid(), p.getInUse());
  }
}
