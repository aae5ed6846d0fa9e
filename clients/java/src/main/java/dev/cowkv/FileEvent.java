package dev.cowkv;

/**
 * One change of the file tree (a file watcher's event, {@link Files#watch}; docs/api.md "File
 * watchers").
 *
 * @param type what happened
 * @param revision the change's revision (the store-wide revisions KV changes take too)
 * @param ino the inode changed
 * @param path relative to the subvolume root, no leading "/"; a data or attribute change names
 *     one of the inode's names
 * @param newPath the other path of a {@link Type#RENAME} or {@link Type#EXCHANGE} ("" otherwise)
 * @param pathsLost the paths were too long to record (both empty): rescan
 */
public record FileEvent(Type type, long revision, long ino, String path, String newPath,
    boolean pathsLost) {
  /** What happened in the file tree (FileWatchEvent.Type). */
  public enum Type {
    CREATE, MKDIR, SYMLINK, LINK, UNLINK, RMDIR, RENAME, EXCHANGE,
    /** A write, truncate, fallocate or clone. */
    MODIFY,
    /** A setattr. */
    ATTRIB,
    XATTR,
    /** A type this client does not know (a newer server's). */
    UNKNOWN;

    static Type of(String protoName) {
      for (Type t : values()) {
        if (t.name().equals(protoName)) {
          return t;
        }
      }
      return UNKNOWN;
    }
  }
}
