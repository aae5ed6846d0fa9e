package dev.cowkv;

import cowkv.v1.FilesOuterClass;

/**
 * What a file write did.
 *
 * @param bytesWritten bytes written
 * @param stat the file's attributes afterwards
 */
public record WriteResult(long bytesWritten, FileStat stat) {
  static WriteResult fromProto(FilesOuterClass.WriteResponse m) {
    return new WriteResult(m.getBytesWritten(), FileStat.fromProto(m.getStat()));
  }
}
