package dev.cowkv;

import cowkv.v1.FilesOuterClass;
import java.io.ByteArrayOutputStream;

/**
 * A file open on the server ({@link Files#openHandle}, {@link Files#createTmpfile}), with a lease
 * every call on it renews; one unused for longer is closed by the server (calls then throw {@link
 * NotFoundException}, errno EBADF). A file unlinked while open lives on (nlink 0) until its last
 * handle closes; an O_TMPFILE gets a name with {@link #link} and is deleted if closed without one.
 */
public final class FileHandle implements AutoCloseable {
  private final Files files;
  private final Rpc rpc;
  private final long handle;
  private final long ino;
  private final long leaseMs;
  private final FileStat openedStat;
  private boolean closed;

  FileHandle(Files files, Rpc rpc, FilesOuterClass.OpenResponse m) {
    this.files = files;
    this.rpc = rpc;
    this.handle = m.getHandle();
    this.ino = m.getIno();
    this.leaseMs = m.getLeaseMs();
    this.openedStat = FileStat.fromProto(m.getStat());
  }

  /** The server's handle. */
  public long handle() {
    return handle;
  }

  /** The file's inode number. */
  public long ino() {
    return ino;
  }

  /** The handle's lease in milliseconds. */
  public long leaseMs() {
    return leaseMs;
  }

  /** The attributes at open. */
  public FileStat openedStat() {
    return openedStat;
  }

  /** The file's attributes now (nlink 0 once its last name went). */
  public FileStat stat() {
    return FileStat.fromProto(Rpc.call("stat", () -> rpc.files().stat(FilesOuterClass.StatRequest
        .newBuilder().setSubvolume(files.subvolume()).setHandle(handle).build())));
  }

  /** {@code length} bytes from {@code offset} (0 = to EOF). */
  public byte[] read(long offset, long length) {
    Validate.nonNegative("read", "offset", offset);
    Validate.nonNegative("read", "length", length);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    files.readTo(FilesOuterClass.ReadRequest.newBuilder().setSubvolume(files.subvolume())
        .setHandle(handle).setOffset(offset).setLength(length).build(), out);
    return out.toByteArray();
  }

  /** Writes {@code data} at {@code offset} on one Write stream. */
  public WriteResult write(long offset, byte[] data) {
    return files.writeHandle(handle, offset, data);
  }

  /** Sets the file's size. */
  public FileStat truncate(long size) {
    return FileStat.fromProto(Rpc.call("truncate", () -> rpc.files().truncate(
        FilesOuterClass.TruncateRequest.newBuilder().setSubvolume(files.subvolume())
            .setHandle(handle).setSize(size).build())));
  }

  /** Makes the file durable (also one without a name). */
  public void fsync(boolean datasync) {
    Rpc.call("fsync", () -> rpc.files().fsync(FilesOuterClass.FsyncRequest.newBuilder()
        .setSubvolume(files.subvolume()).setHandle(handle).setDatasync(datasync).build()));
  }

  /**
   * Gives the file the name {@code newPath} (linkat): an O_TMPFILE's first name; a file whose
   * names all went is {@link NotFoundException} (ENOENT).
   */
  public FileStat link(String newPath) {
    Validate.path("link", "new_path", newPath);
    return FileStat.fromProto(Rpc.call("link", () -> rpc.files().link(FilesOuterClass.LinkRequest
        .newBuilder().setSubvolume(files.subvolume()).setHandle(handle).setNewPath(newPath)
        .build())));
  }

  /** Closes the handle (idempotent); the last one of a file without a name deletes it. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    Rpc.call("close", () -> rpc.files().closeHandle(
        FilesOuterClass.CloseRequest.newBuilder().setHandle(handle).build()));
  }
}
