package dev.cowkv;

import cowkv.v1.SubvolumesOuterClass;

/**
 * What the store knows about one subvolume (cowkv.v1.SubvolumeInfo).
 *
 * @param id never reused
 * @param name 1..255 bytes, no '/' or NUL
 * @param parentId the subvolume this is a snapshot of; 0 for a plain one
 * @param generation engine generation of its root (when it last changed)
 * @param lastSnapshot generation of the last snapshot taken of it (0 = none)
 * @param createdUnixMs creation time, ms since the epoch
 * @param readOnly a read-only snapshot: every write is {@link ReadOnlyException}
 */
public record SubvolumeInfo(long id, String name, long parentId, long generation,
    long lastSnapshot, long createdUnixMs, boolean readOnly) {

  static SubvolumeInfo fromProto(SubvolumesOuterClass.SubvolumeInfo m) {
    return new SubvolumeInfo(m.getId(), m.getName(), m.getParentId(), m.getGeneration(),
        m.getLastSnapshot(), m.getCreatedUnixMs(), m.getReadOnly());
  }
}
