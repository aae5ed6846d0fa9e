package dev.cowkv;

import cowkv.v1.FilesOuterClass;

/** What an inode is. */
public enum FileKind {
  REGULAR,
  DIRECTORY,
  SYMLINK;

  static FileKind fromProto(FilesOuterClass.FileKind k) {
    switch (k) {
      case FILE_KIND_DIRECTORY:
        return DIRECTORY;
      case FILE_KIND_SYMLINK:
        return SYMLINK;
      default:
        return REGULAR;
    }
  }
}
