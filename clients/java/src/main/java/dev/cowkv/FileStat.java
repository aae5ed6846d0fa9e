package dev.cowkv;

import cowkv.v1.FilesOuterClass;

/**
 * Attributes of one inode (cowkv.v1.FileStat); times in ns since the epoch.
 *
 * @param ino inode number; the root directory is 256
 * @param mode permission bits (07777)
 * @param nlink names that refer to it
 * @param size size in bytes
 * @param bytes bytes of data the file references (holes excluded)
 * @param generation engine generation that created the inode
 * @param transid engine generation that last changed it
 */
public record FileStat(long ino, FileKind kind, int mode, int nlink, long size, long bytes,
    int uid, int gid, long atimeNs, long mtimeNs, long ctimeNs, long btimeNs, long generation,
    long transid) {

  static FileStat fromProto(FilesOuterClass.FileStat m) {
    return new FileStat(m.getIno(), FileKind.fromProto(m.getKind()), m.getMode(), m.getNlink(),
        m.getSize(), m.getBytes(), m.getUid(), m.getGid(), m.getAtimeNs(), m.getMtimeNs(),
        m.getCtimeNs(), m.getBtimeNs(), m.getGeneration(), m.getTransid());
  }

  public boolean isDirectory() {
    return kind == FileKind.DIRECTORY;
  }

  public boolean isRegularFile() {
    return kind == FileKind.REGULAR;
  }

  public boolean isSymlink() {
    return kind == FileKind.SYMLINK;
  }
}
