package dev.cowkv;

import cowkv.v1.FilesOuterClass;

/**
 * The attributes {@link Files#setAttr(String, AttrChange)} changes (setattr: chmod, chown,
 * truncate and utimensat in one call); an attribute not named is kept.
 *
 * <pre>
 * FileStat st = files.setAttr("/f", new AttrChange().mode(0600).uid(1000).mtimeNow());
 * </pre>
 */
public final class AttrChange {
  private final FilesOuterClass.SetAttrRequest.Builder req = FilesOuterClass.SetAttrRequest.newBuilder();
  private int fields;

  private AttrChange field(FilesOuterClass.SetAttrField f) {
    fields |= f.getNumber();
    return this;
  }

  /** Permission bits (at most 07777; EINVAL beyond). */
  public AttrChange mode(int mode) {
    req.setMode(mode);
    return field(FilesOuterClass.SetAttrField.SET_ATTR_MODE);
  }

  public AttrChange uid(int uid) {
    req.setUid(uid);
    return field(FilesOuterClass.SetAttrField.SET_ATTR_UID);
  }

  public AttrChange gid(int gid) {
    req.setGid(gid);
    return field(FilesOuterClass.SetAttrField.SET_ATTR_GID);
  }

  /** A truncate (regular files). */
  public AttrChange size(long size) {
    req.setSize(size);
    return field(FilesOuterClass.SetAttrField.SET_ATTR_SIZE);
  }

  /** Access time, ns since the epoch. */
  public AttrChange atimeNs(long ns) {
    req.setAtimeNs(ns);
    return field(FilesOuterClass.SetAttrField.SET_ATTR_ATIME);
  }

  /** Modification time, ns since the epoch. */
  public AttrChange mtimeNs(long ns) {
    req.setMtimeNs(ns);
    return field(FilesOuterClass.SetAttrField.SET_ATTR_MTIME);
  }

  /** Access time = the server's clock (utimensat's UTIME_NOW). */
  public AttrChange atimeNow() {
    return field(FilesOuterClass.SetAttrField.SET_ATTR_ATIME_NOW);
  }

  /** Modification time = the server's clock. */
  public AttrChange mtimeNow() {
    return field(FilesOuterClass.SetAttrField.SET_ATTR_MTIME_NOW);
  }

  /** The FATTR_* mask this change sends. */
  public int fields() {
    return fields;
  }

  FilesOuterClass.SetAttrRequest request(String subvolume, String path) {
    return req.clone().setSubvolume(subvolume).setPath(path).setFields(fields).build();
  }
}
