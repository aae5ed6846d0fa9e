package dev.cowkv;

import com.google.protobuf.ByteString;
import cowkv.v1.FilesOuterClass;
import cowkv.v1.Kv;
import io.grpc.Context;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

/**
 * The file tree of one subvolume (service Files), after {@link java.nio.file.Files}.
 *
 * <pre>{@code
 * Files fs = client.subvolume("data").files();
 * fs.mkdirs("/logs");
 * fs.write("/logs/a.txt", "hello\n".getBytes());
 * fs.fsync("/logs/a.txt");
 * fs.create("/logs/b.txt");
 * fs.clone("/logs/a.txt", "/logs/b.txt");          // reflink: extents shared
 * fs.fiemap("/logs/b.txt").get(0).shared();
 * }</pre>
 *
 * <p>Paths are '/'-separated from the subvolume root ("a/b" = "/a/b"); symlinks are stored,
 * never followed. File errors carry the POSIX name: {@code e.errnoName() == "ENOTEMPTY"}.
 * Thread-safe.
 */
public final class Files {
  /** Fail with {@link AlreadyExistsException} if the target exists (RENAME_NOREPLACE). */
  public static final int RENAME_NOREPLACE = 1;
  /** Swap the two names, which must both exist (RENAME_EXCHANGE). */
  public static final int RENAME_EXCHANGE = 2;
  /** Bytes per Write message (the server takes at most 4 MiB). */
  static final int WRITE_CHUNK = 1 << 20;

  private final Rpc rpc;
  private final String subvolume;

  /** A copy whose calls, unary and streaming, have the deadline {@code d} instead of the client's defaults. */
  public Files withDeadline(java.time.Duration d) {
    return new Files(rpc.withDeadline(d), subvolume);
  }

  Files(Rpc rpc, String subvolume) {
    this.rpc = rpc;
    this.subvolume = subvolume;
  }
  /**
   * Watches the file tree at {@code prefix} and below ("" or "/": every path; a rename or exchange
   * whose either path is under it), like inotify, on a KV.Watch stream the client's watchers
   * share, handing events to {@code listener} (on a thread of its own: see {@link Watcher}). Returns once the server created the watcher (within the client's default
   * deadline), so every later change is seen. Of the options only {@link
   * WatchOptions#startRevision} (replays what was recorded; {@link CompactedException} to the
   * listener when the start is before it) and {@link WatchOptions#progressNotify} apply; the
   * others are refused ({@link InvalidArgumentException}). A read-only snapshot is refused with
   * {@link FailedPreconditionException}; an unknown subvolume with {@link NotFoundException}.
   */
  public Watcher watch(String prefix, WatchOptions options, FileWatchListener listener) {
    WatchOptions o = options == null ? new WatchOptions() : options;
    if (listener == null) {
      throw Errors.invalid("watch", "listener: null");
    }
    if (o.prefix || o.rangeEnd.length > 0 || o.prevKv || o.noPut || o.noDelete) {
      throw Errors.invalid("watch", "only startRevision and progressNotify apply to a file watcher");
    }
    if (o.startRevision < 0) {
      throw Errors.invalid("watch", "startRevision: " + o.startRevision + " < 0");
    }
    String p = prefix == null ? "" : prefix;
    if (p.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > Validate.MAX_PATH_BYTES) {
      throw Errors.invalid("watch", "prefix: longer than " + Validate.MAX_PATH_BYTES + " bytes");
    }
    Kv.WatchCreateRequest create = Kv.WatchCreateRequest.newBuilder().setSubvolume(subvolume)
        .setStartRevision(o.startRevision).setProgressNotify(o.progressNotify)
        .setFiles(Kv.FileWatchCreate.newBuilder().setPrefix(p)).build();
    return new Watcher(rpc.watchStreams, rpc.kvStream(), create, listener, rpc.deadline);
  }


  public String subvolume() {
    return subvolume;
  }

  // Names and attributes.

  /** Attributes of a file, directory or symlink. */
  public FileStat stat(String path) {
    Validate.path("stat", "path", path);
    return stat(FilesOuterClass.StatRequest.newBuilder().setPath(path));
  }

  /** Attributes by inode number (stable across renames). */
  public FileStat stat(long ino) {
    return stat(FilesOuterClass.StatRequest.newBuilder().setIno(ino));
  }

  private FileStat stat(FilesOuterClass.StatRequest.Builder b) {
    FilesOuterClass.StatRequest req = b.setSubvolume(subvolume).build();
    return conv(Rpc.call("stat", () -> rpc.files().stat(req)));
  }

  public boolean exists(String path) {
    try {
      stat(path);
      return true;
    } catch (NotFoundException e) {
      return false;
    }
  }

  /** Creates a directory (mode 0755); the parent must exist. */
  public FileStat mkdir(String path) {
    return mkdir(path, 0);
  }

  public FileStat mkdir(String path, int mode) {
    Validate.path("mkdir", "path", path);
    return conv(Rpc.call("mkdir", () -> rpc.files().mkdir(FilesOuterClass.MkdirRequest
        .newBuilder().setSubvolume(subvolume).setPath(path).setMode(mode).build())));
  }

  /** Creates a directory and any missing parents; an existing directory is fine. */
  public FileStat mkdirs(String path) {
    Validate.path("mkdir", "path", path);
    StringBuilder p = new StringBuilder();
    FileStat st = null;
    for (String part : path.split("/")) {
      if (part.isEmpty()) {
        continue;
      }
      p.append('/').append(part);
      try {
        st = mkdir(p.toString());
      } catch (AlreadyExistsException e) {
        st = stat(p.toString());
        if (!st.isDirectory()) {
          throw e;
        }
      }
    }
    return st != null ? st : stat("/");
  }

  /** Creates an empty regular file (mode 0644); {@link AlreadyExistsException} if taken. */
  public FileStat create(String path) {
    return create(path, 0);
  }

  public FileStat create(String path, int mode) {
    Validate.path("create", "path", path);
    return conv(Rpc.call("create", () -> rpc.files().create(FilesOuterClass.CreateFileRequest
        .newBuilder().setSubvolume(subvolume).setPath(path).setMode(mode).build())));
  }

  /** The entries of a directory in creation order, a page (of up to 10,000) per call. */
  public Iterable<DirEntry> readDir(String path) {
    return readDir(path, 0);
  }

  /** {@link #readDir(String)} with {@code pageSize} entries per call (0 = the server's 10,000). */
  public Iterable<DirEntry> readDir(String path, int pageSize) {
    Validate.path("readdir", "path", path);
    Validate.nonNegative("readdir", "pageSize", pageSize);
    return () -> new Iterator<DirEntry>() {
      private final ArrayList<DirEntry> page = new ArrayList<>();
      private int pos;
      private long cookie;
      private boolean more = true;

      @Override
      public boolean hasNext() {
        while (pos >= page.size() && more) {
          FilesOuterClass.ReadDirResponse r = Rpc.call("readdir", () -> rpc.files().readDir(
              FilesOuterClass.ReadDirRequest.newBuilder().setSubvolume(subvolume).setPath(path)
                  .setCookie(cookie).setLimit(pageSize).build()));
          page.clear();
          pos = 0;
          for (FilesOuterClass.DirEntry e : r.getEntriesList()) {
            page.add(new DirEntry(e.getName(), e.getIno(), FileKind.fromProto(e.getKind()),
                e.getCookie()));
          }
          cookie = r.getNextCookie();
          more = r.getMore();
        }
        return pos < page.size();
      }

      @Override
      public DirEntry next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        return page.get(pos++);
      }
    };
  }

  /** The names in a directory, in creation order. */
  public List<String> list(String path) {
    List<String> out = new ArrayList<>();
    for (DirEntry e : readDir(path)) {
      out.add(e.name());
    }
    return out;
  }

  /** Renames (moves) a name; an existing file at {@code to} is replaced. */
  public void rename(String from, String to) {
    rename(from, to, 0);
  }

  /** Renames with {@link #RENAME_NOREPLACE} or {@link #RENAME_EXCHANGE}. */
  public void rename(String from, String to, int flags) {
    Validate.path("rename", "from", from);
    Validate.path("rename", "to", to);
    Rpc.call("rename", () -> rpc.files().rename(FilesOuterClass.RenameRequest.newBuilder()
        .setSubvolume(subvolume).setFrom(from).setTo(to).setFlags(flags).build()));
  }

  /** Adds a hard link to a file (a directory: EPERM). */
  public FileStat link(String existing, String newPath) {
    Validate.path("link", "existing", existing);
    Validate.path("link", "new_path", newPath);
    return conv(Rpc.call("link", () -> rpc.files().link(FilesOuterClass.LinkRequest.newBuilder()
        .setSubvolume(subvolume).setExisting(existing).setNewPath(newPath).build())));
  }

  /** Creates a symlink at {@code path} holding {@code target} (never resolved). */
  public FileStat symlink(String target, String path) {
    Validate.symlinkTarget("symlink", target);
    Validate.path("symlink", "path", path);
    return conv(Rpc.call("symlink", () -> rpc.files().symlink(FilesOuterClass.SymlinkRequest
        .newBuilder().setSubvolume(subvolume).setTarget(target).setPath(path).build())));
  }

  public String readLink(String path) {
    Validate.path("readlink", "path", path);
    return Rpc.call("readlink", () -> rpc.files().readLink(FilesOuterClass.ReadLinkRequest
        .newBuilder().setSubvolume(subvolume).setPath(path).build())).getTarget();
  }

  /** Removes a name of a file or symlink (a directory: EISDIR). */
  public void unlink(String path) {
    Validate.path("unlink", "path", path);
    Rpc.call("unlink", () -> rpc.files().unlink(FilesOuterClass.UnlinkRequest.newBuilder()
        .setSubvolume(subvolume).setPath(path).build()));
  }

  /** Removes an empty directory (ENOTEMPTY otherwise). */
  public void rmdir(String path) {
    Validate.path("rmdir", "path", path);
    Rpc.call("rmdir", () -> rpc.files().rmdir(FilesOuterClass.RmdirRequest.newBuilder()
        .setSubvolume(subvolume).setPath(path).build()));
  }

  /** Sets a regular file's size (cuts, or extends with a hole). */
  public FileStat truncate(String path, long size) {
    Validate.path("truncate", "path", path);
    Validate.nonNegative("truncate", "size", size);
    return conv(Rpc.call("truncate", () -> rpc.files().truncate(FilesOuterClass.TruncateRequest
        .newBuilder().setSubvolume(subvolume).setPath(path).setSize(size).build())));
  }

  // Data.

  /** The whole file. */
  public byte[] readAllBytes(String path) {
    return read(path, 0, 0);
  }

  /** {@code length} bytes from {@code offset} (0 = to EOF); shorter at EOF. */
  public byte[] read(String path, long offset, long length) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    readTo(path, offset, length, out);
    return out.toByteArray();
  }

  /** Streams a byte range of the file into {@code out}; returns bytes copied. */
  public long readTo(String path, long offset, long length, OutputStream out) {
    Validate.path("read", "path", path);
    Validate.nonNegative("read", "offset", offset);
    Validate.nonNegative("read", "length", length);
    return readTo(FilesOuterClass.ReadRequest.newBuilder().setSubvolume(subvolume).setPath(path)
        .setOffset(offset).setLength(length).build(), out);
  }

  /** One Read stream into {@code out} (a path's or a handle's). */
  long readTo(FilesOuterClass.ReadRequest req, OutputStream out) {
    Context.CancellableContext ctx = Context.current().withCancellation();
    try {
      return ctx.call(() -> {
        long n = 0;
        Iterator<FilesOuterClass.ReadResponse> it = rpc.filesStream().read(req);
        while (it.hasNext()) {
          ByteString data = it.next().getData();
          data.writeTo(out);
          n += data.size();
        }
        return n;
      });
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (Exception e) {
      throw Errors.from(e, "read");
    } finally {
      ctx.cancel(null); // stops the stream if it was abandoned
    }
  }

  /** Creates or replaces the file's contents. */
  public WriteResult write(String path, byte[] data) {
    return write(path, 0, data, true, true);
  }

  /** Writes {@code data} at {@code offset} of an existing file (no create, no truncate). */
  public WriteResult writeAt(String path, long offset, byte[] data) {
    return write(path, offset, data, false, false);
  }

  /**
   * Writes {@code data} at {@code offset}; {@code create} makes the file if absent (0644),
   * {@code truncate} cuts it to {@code offset} first. Data over 4 MiB goes in several chunks
   * of one stream; each chunk is atomic, the stream is not.
   */
  public WriteResult write(String path, long offset, byte[] data, boolean create,
      boolean truncate) {
    Validate.path("write", "path", path);
    Validate.nonNegative("write", "offset", offset);
    Iterator<ByteString> chunks = chunks(data);
    return WriteResult.fromProto(writeStream(head(path, offset, create, truncate), chunks));
  }

  /** Streams a local input stream into {@code path} (create + truncate). */
  public WriteResult upload(String path, InputStream in) {
    Validate.path("write", "path", path);
    Iterator<ByteString> chunks = new Iterator<>() {
      private ByteString next;
      private boolean eof;

      @Override
      public boolean hasNext() {
        if (next == null && !eof) {
          try {
            byte[] buf = in.readNBytes(WRITE_CHUNK);
            if (buf.length == 0) {
              eof = true;
            } else {
              next = ByteString.copyFrom(buf);
            }
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
        return next != null;
      }

      @Override
      public ByteString next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        ByteString b = next;
        next = null;
        return b;
      }
    };
    return WriteResult.fromProto(writeStream(head(path, 0, true, true), chunks));
  }

  private FilesOuterClass.WriteRequest head(String path, long offset, boolean create,
      boolean truncate) {
    return FilesOuterClass.WriteRequest.newBuilder().setSubvolume(subvolume).setPath(path)
        .setOffset(offset).setCreate(create).setTruncate(truncate).build();
  }

  private static Iterator<ByteString> chunks(byte[] data) {
    List<ByteString> out = new ArrayList<>();
    for (int i = 0; i < data.length; i += WRITE_CHUNK) {
      out.add(ByteString.copyFrom(data, i, Math.min(WRITE_CHUNK, data.length - i)));
    }
    return out.iterator();
  }

  /** A Write by handle: {@code data} at {@code offset}. */
  WriteResult writeHandle(long handle, long offset, byte[] data) {
    Validate.nonNegative("write", "offset", offset);
    FilesOuterClass.WriteRequest head = FilesOuterClass.WriteRequest.newBuilder()
        .setSubvolume(subvolume).setHandle(handle).setOffset(offset).build();
    return WriteResult.fromProto(writeStream(head, chunks(data)));
  }

  /**
   * Opens a file on the server ({@code leaseMs} 0 = the server's 30 s): while the handle is open,
   * removing the file's last name does not delete it. Close it (try-with-resources).
   */
  public FileHandle openHandle(String path, long leaseMs) {
    Validate.path("open", "path", path);
    return new FileHandle(this, rpc, Rpc.call("open", () -> rpc.files().open(
        FilesOuterClass.OpenRequest.newBuilder().setSubvolume(subvolume).setPath(path)
            .setLeaseMs(leaseMs).build())));
  }

  /**
   * O_TMPFILE: a new regular file without a name in directory {@code dir} ({@code mode} 0 =
   * 0644), opened; {@link FileHandle#link} names it, closing it without a name deletes it.
   */
  public FileHandle createTmpfile(String dir, int mode, long leaseMs) {
    Validate.path("tmpfile", "dir_path", dir);
    return new FileHandle(this, rpc, Rpc.call("tmpfile", () -> rpc.files().createTmpfile(
        FilesOuterClass.CreateTmpfileRequest.newBuilder().setSubvolume(subvolume).setDirPath(dir)
            .setMode(mode).setLeaseMs(leaseMs).build())));
  }

  /** One Write RPC: {@code head} names the file, then one message per chunk, with flow control. */
  private FilesOuterClass.WriteResponse writeStream(FilesOuterClass.WriteRequest head,
      Iterator<ByteString> chunks) {
    Upload<FilesOuterClass.WriteRequest, FilesOuterClass.WriteResponse> call =
        new Upload<>("write", rpc.filesAsyncStream()::write);
    try {
      call.send(head);
      while (chunks.hasNext() && call.awaitReady()) {
        call.send(FilesOuterClass.WriteRequest.newBuilder().setData(chunks.next()).build());
      }
      call.finish();
    } catch (InterruptedException e) {
      throw call.interrupted(e);
    } catch (RuntimeException e) {
      call.cancel("client failed", e);
      throw e;
    }
    return call.answer();
  }

  // Data sharing and durability.

  /** Reflink: {@code dst} (which must exist) shares all of {@code src}'s extents. */
  public void clone(String src, String dst) {
    clone(src, 0, dst, 0, 0);
  }

  /** Reflink a range ({@code length} 0 = to the source's EOF); no data is copied. */
  public void clone(String src, long srcOffset, String dst, long dstOffset, long length) {
    Validate.path("clone", "src_path", src);
    Validate.path("clone", "dst_path", dst);
    Rpc.call("clone", () -> rpc.files().clone(FilesOuterClass.CloneRequest.newBuilder()
        .setSubvolume(subvolume).setSrcPath(src).setSrcOffset(srcOffset).setDstPath(dst)
        .setDstOffset(dstOffset).setLength(length).build()));
  }

  /** Makes a file (a directory: and its entries) survive a crash. */
  public void fsync(String path) {
    fsync(path, false);
  }

  /** {@code datasync}: fdatasync (skip the names of an inode older than the running commit). */
  public void fsync(String path, boolean datasync) {
    Validate.path("fsync", "path", path);
    Rpc.call("fsync", () -> rpc.files().fsync(FilesOuterClass.FsyncRequest.newBuilder()
        .setSubvolume(subvolume).setPath(path).setDatasync(datasync).build()));
  }

  /**
   * A range fsync (sync_file_range): at least the data of {@code [offset, offset + length)} is
   * durable when it returns ({@code length} 0 = to EOF; the server syncs the whole file today).
   */
  public void fsync(String path, boolean datasync, long offset, long length) {
    Validate.path("fsync", "path", path);
    Rpc.call("fsync", () -> rpc.files().fsync(FilesOuterClass.FsyncRequest.newBuilder()
        .setSubvolume(subvolume).setPath(path).setDatasync(datasync).setOffset(offset)
        .setLength(length).build()));
  }

  /** fallocate(2) mode: keep the size (the range may lie past EOF). */
  public static final int FALLOC_FL_KEEP_SIZE = 0x01;
  /** fallocate(2) mode: make the range a hole (with {@link #FALLOC_FL_KEEP_SIZE}). */
  public static final int FALLOC_FL_PUNCH_HOLE = 0x02;
  /** fallocate(2) mode: make the range read as zeros (preallocated extents). */
  public static final int FALLOC_FL_ZERO_RANGE = 0x10;

  /**
   * fallocate(2) on a regular file: with {@code mode} 0 the range's holes get preallocated extents
   * (reading as zeros, {@link Extent#FLAG_UNWRITTEN} in fiemap) and the file grows to {@code offset
   * + length}; {@code mode} is made of the {@code FALLOC_FL_*} values. Punch hole with zero range,
   * or {@code length} 0, is {@link InvalidArgumentException} (EINVAL); a full device {@link
   * NoSpaceException} with nothing changed. Returns the file's attributes.
   */
  public FileStat fallocate(String path, long offset, long length, int mode) {
    Validate.path("fallocate", "path", path);
    return FileStat.fromProto(Rpc.call("fallocate", () -> rpc.files().fallocate(
        FilesOuterClass.FallocateRequest.newBuilder().setSubvolume(subvolume).setPath(path)
            .setOffset(offset).setLength(length).setMode(mode).build())));
  }

  /** setxattr(2) flag: {@link AlreadyExistsException} (EEXIST) if the name is set. */
  public static final int XATTR_CREATE = 1;
  /** setxattr(2) flag: {@link NotFoundException} (ENODATA) if the name is not set. */
  public static final int XATTR_REPLACE = 2;

  /**
   * setattr: changes the attributes {@code change} names in one call and returns them afterwards;
   * ctime becomes now when anything changes.
   */
  public FileStat setAttr(String path, AttrChange change) {
    Validate.path("setattr", "path", path);
    return FileStat.fromProto(Rpc.call("setattr",
        () -> rpc.files().setAttr(change.request(subvolume, path))));
  }

  /** Sets the permission bits (at most 07777). */
  public FileStat chmod(String path, int mode) {
    return setAttr(path, new AttrChange().mode(mode));
  }

  /** Sets the owner; -1 keeps that id (as chown(2)). */
  public FileStat chown(String path, int uid, int gid) {
    AttrChange c = new AttrChange();
    if (uid != -1) {
      c.uid(uid);
    }
    if (gid != -1) {
      c.gid(gid);
    }
    return setAttr(path, c);
  }

  /** Sets an extended attribute; {@code flags} 0, {@link #XATTR_CREATE} or {@link #XATTR_REPLACE}. */
  public void setXattr(String path, String name, byte[] value, int flags) {
    Validate.path("setxattr", "path", path);
    Rpc.call("setxattr", () -> rpc.files().setXattr(FilesOuterClass.SetXattrRequest.newBuilder()
        .setSubvolume(subvolume).setPath(path).setName(name).setValue(ByteString.copyFrom(value))
        .setFlags(flags).build()));
  }

  /** An extended attribute's value; {@link NotFoundException} (errno ENODATA) if it is not set. */
  public byte[] getXattr(String path, String name) {
    Validate.path("getxattr", "path", path);
    return Rpc.call("getxattr", () -> rpc.files().getXattr(FilesOuterClass.GetXattrRequest
        .newBuilder().setSubvolume(subvolume).setPath(path).setName(name).build())).getValue()
        .toByteArray();
  }

  /** The names of a file's extended attributes, sorted. */
  public List<String> listXattrs(String path) {
    Validate.path("listxattr", "path", path);
    return List.copyOf(Rpc.call("listxattr", () -> rpc.files().listXattrs(
        FilesOuterClass.ListXattrsRequest.newBuilder().setSubvolume(subvolume).setPath(path)
            .build())).getNamesList());
  }

  /** Removes an extended attribute; {@link NotFoundException} (errno ENODATA) if it is not set. */
  public void removeXattr(String path, String name) {
    Validate.path("removexattr", "path", path);
    Rpc.call("removexattr", () -> rpc.files().removeXattr(FilesOuterClass.RemoveXattrRequest
        .newBuilder().setSubvolume(subvolume).setPath(path).setName(name).build()));
  }

  /** Every extent of the file, in file order. */
  public List<Extent> fiemap(String path) {
    return fiemap(path, 0, 0);
  }

  /** The extents holding a byte range ({@code length} 0 = to EOF), in file order. */
  public List<Extent> fiemap(String path, long offset, long length) {
    Validate.path("fiemap", "path", path);
    Validate.nonNegative("fiemap", "offset", offset);
    Validate.nonNegative("fiemap", "length", length);
    List<Extent> out = new ArrayList<>();
    long stop = length > 0 ? offset + length : 0;
    long off = offset;
    while (true) {
      FilesOuterClass.FiemapRequest req = FilesOuterClass.FiemapRequest.newBuilder()
          .setSubvolume(subvolume).setPath(path).setOffset(off)
          .setLength(stop > 0 ? stop - off : 0).build();
      FilesOuterClass.FiemapResponse r = Rpc.call("fiemap", () -> rpc.files().fiemap(req));
      for (FilesOuterClass.FiemapExtent e : r.getExtentsList()) {
        out.add(new Extent(e.getLogical(), e.getPhysical(), e.getLength(), e.getFlags()));
      }
      if (!r.getMore() || r.getExtentsCount() == 0) {
        return out;
      }
      FilesOuterClass.FiemapExtent last = r.getExtents(r.getExtentsCount() - 1);
      off = last.getLogical() + last.getLength();
      if (stop > 0 && off >= stop) {
        return out;
      }
    }
  }

  private static FileStat conv(FilesOuterClass.FileStat m) {
    return FileStat.fromProto(m);
  }
}
