package dev.cowkv;

import com.google.protobuf.Descriptors;
import cowkv.v1.AdminOuterClass;
import cowkv.v1.SubvolumesOuterClass;
import io.grpc.Context;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Iterator;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A connection to one cowkvd: subvolumes and snapshots, their key spaces and file trees, and
 * Admin. Thread-safe; close it when done (try-with-resources).
 *
 * <pre>{@code
 * try (CowkvClient client = CowkvClient.connect(CowkvOptions.of("127.0.0.1:7420"))) {
 *   client.createSubvolume("data");
 *   Subvolume sv = client.subvolume("data");
 *   sv.put("k", "v");
 *   client.snapshot("data", "data@2026-11-22", true);
 * }
 * }</pre>
 */
public final class CowkvClient implements AutoCloseable {
  private final Rpc rpc;
  private final CowkvOptions options;

  private CowkvClient(CowkvOptions options) {
    this.options = options;
    this.rpc = new Rpc(options);
  }

  private CowkvClient(CowkvOptions options, Rpc rpc) {
    this.options = options;
    this.rpc = rpc;
  }

  /**
   * A view of this client whose calls, and those of the subvolumes it hands out, have the
   * deadline {@code d} (a positive duration) instead of the default ones: {@code
   * client.withDeadline(Duration.ofSeconds(2)).listSubvolumes()}. It shares the channel: closing
   * either closes both.
   */
  public CowkvClient withDeadline(Duration d) {
    return new CowkvClient(options, rpc.withDeadline(d));
  }

  /** Subvolume calls that return CompletableFutures ({@link SubvolumesAsync}), under this client's deadline. */
  public SubvolumesAsync async() {
    return new SubvolumesAsync(rpc);
  }

  /** Opens a channel to cowkvd; it connects lazily, on the first call. */
  public static CowkvClient connect(CowkvOptions options) {
    return new CowkvClient(options);
  }

  /** {@link #connect(CowkvOptions)} with every default and this address. */
  public static CowkvClient connect(String address) {
    return connect(CowkvOptions.of(address));
  }

  public CowkvOptions options() {
    return options;
  }

  /** Closes the channel; calls in flight are cancelled after a short grace period. */
  @Override
  public void close() {
    rpc.channel.shutdown();
    try {
      if (!rpc.channel.awaitTermination(5, TimeUnit.SECONDS)) {
        rpc.channel.shutdownNow();
      }
    } catch (InterruptedException e) {
      rpc.channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  // Subvolumes and snapshots.

  /**
   * A handle on a subvolume (or snapshot) by name; no call is made. "" is "default". A bad
   * name is refused here with {@link InvalidArgumentException}.
   */
  public Subvolume subvolume(String name) {
    return new Subvolume(rpc, name);
  }

  /** Creates an empty subvolume; {@link AlreadyExistsException} if the name is taken. */
  public SubvolumeInfo createSubvolume(String name) {
    Validate.subvolumeName("create", "name", name);
    return SubvolumeInfo.fromProto(Rpc.call("create", () -> rpc.subvolumes().create(
        SubvolumesOuterClass.CreateSubvolumeRequest.newBuilder().setName(name).build())));
  }

  /** Every live subvolume and snapshot, "default" included, in id order. */
  public List<SubvolumeInfo> listSubvolumes() {
    return listSubvolumes(false, false, List.of());
  }

  /**
   * The list filtered and sorted by the server, as btrfs's {@code subvolume list -r -s --sort}:
   * {@code readOnly} keeps read-only subvolumes, {@code snapshotsOnly} snapshots (parentId != 0);
   * {@code sort} keys are "[+|-]FIELD" (gen, ogen, rootid, path; "-" descending, ties by id). An
   * unknown key is {@link InvalidArgumentException} naming it.
   */
  public List<SubvolumeInfo> listSubvolumes(boolean readOnly, boolean snapshotsOnly,
      List<String> sort) {
    SubvolumesOuterClass.ListSubvolumesRequest req = SubvolumesOuterClass.ListSubvolumesRequest
        .newBuilder().setReadOnly(readOnly).setSnapshotsOnly(snapshotsOnly).addAllSort(sort).build();
    SubvolumesOuterClass.ListSubvolumesResponse r = Rpc.call("list", () -> rpc.subvolumes()
        .list(req));
    List<SubvolumeInfo> out = new ArrayList<>();
    for (SubvolumesOuterClass.SubvolumeInfo m : r.getSubvolumesList()) {
      out.add(SubvolumeInfo.fromProto(m));
    }
    return Collections.unmodifiableList(out);
  }

  /**
   * Waits until deleted subvolumes' trees are dropped and their space is free (btrfs {@code
   * subvolume sync}): the given ids, or every subvolume deleted before the call (empty). Returns the
   * ids it waited for (an id dropped already is not listed). {@link NotFoundException} for an id
   * that never was a subvolume, {@link FailedPreconditionException} for a live one; {@link
   * DeadlineExceededException} (naming the ids still pending) when the default deadline comes first.
   */
  public List<Long> syncSubvolumes(List<Long> ids) {
    long timeoutMs = 0;
    if (rpc.deadline != null) {
      // The server stops first, so its answer names what is pending.
      long ms = rpc.deadline.toMillis();
      timeoutMs = Math.max(1, ms - Math.min(500, ms / 10));
    }
    SubvolumesOuterClass.SyncSubvolumesRequest req = SubvolumesOuterClass.SyncSubvolumesRequest
        .newBuilder().addAllIds(ids).setTimeoutMs(timeoutMs).build();
    return List.copyOf(Rpc.call("sync-subvolumes", () -> rpc.subvolumes().sync(req)).getSyncedList());
  }

  /** One subvolume; {@link NotFoundException} if no subvolume has the name. */
  public SubvolumeInfo showSubvolume(String name) {
    Validate.subvolumeName("show", "name", name);
    return SubvolumeInfo.fromProto(Rpc.call("show", () -> rpc.subvolumes().show(
        SubvolumesOuterClass.ShowSubvolumeRequest.newBuilder().setName(name).build())));
  }

  /** Renames a subvolume; its id, contents and snapshots stay. */
  public void renameSubvolume(String name, String newName) {
    Validate.subvolumeName("rename", "name", name);
    Validate.subvolumeName("rename", "new_name", newName);
    Rpc.call("rename", () -> rpc.subvolumes().rename(SubvolumesOuterClass.RenameSubvolumeRequest
        .newBuilder().setName(name).setNewName(newName).build()));
  }

  /** Deletes a subvolume by exact name ("default": {@link FailedPreconditionException}). */
  public void deleteSubvolume(String name) {
    Validate.subvolumeName("delete", "name", name);
    Rpc.call("delete", () -> rpc.subvolumes().delete(
        SubvolumesOuterClass.DeleteSubvolumeRequest.newBuilder().setName(name).build()));
  }

  /**
   * Snapshots {@code source} as {@code name} (O(1)); a read-only snapshot refuses every write
   * with {@link ReadOnlyException}.
   */
  public SubvolumeInfo snapshot(String source, String name, boolean readOnly) {
    Validate.subvolumeName("snapshot", "source", source);
    Validate.subvolumeName("snapshot", "name", name);
    return SubvolumeInfo.fromProto(Rpc.call("snapshot", () -> rpc.subvolumes().snapshot(
        SubvolumesOuterClass.SnapshotRequest.newBuilder().setSource(source).setName(name)
            .setReadOnly(readOnly).build())));
  }

  // Send and receive (docs/api.md "Subvolumes"; docs/operations.md "Backup and restore").

  /**
   * The send stream of the read-only {@code snapshot}: the whole of it ({@link SendOptions#full}),
   * its difference from an older read-only snapshot ({@link SendOptions#incremental}), or the rest
   * of the stream a resumable receive stopped in ({@link SendOptions#resume}, {@code snapshot}
   * then ""). The chunks come as they arrive; errors come from the iteration: {@link
   * NotFoundException} for an unknown snapshot, {@link FailedPreconditionException} for a writable
   * one, {@link InvalidArgumentException} (reason RESUME_TOKEN) for a damaged token, {@link
   * NotFoundException} (RESUME_MISMATCH) for one whose snapshots are not here. The stream deadline
   * ({@link CowkvOptions#streamDeadline}, or {@link #withDeadline}) bounds the whole stream.
   */
  public SendStream send(String snapshot, SendOptions opts) {
    if (!snapshot.isEmpty() || opts.resumeToken().isEmpty()) {
      Validate.subvolumeName("send", "snapshot", snapshot);
    }
    if (!opts.parent().isEmpty()) {
      Validate.subvolumeName("send", "parent", opts.parent());
    }
    SubvolumesOuterClass.SendRequest req = SubvolumesOuterClass.SendRequest.newBuilder()
        .setSnapshot(snapshot).setParent(opts.parent()).setResumeToken(opts.resumeToken()).build();
    Context.CancellableContext ctx = Context.current().withCancellation();
    try {
      return new SendStream(ctx, ctx.call(() -> rpc.subvolumesStream().send(req)));
    } catch (Exception e) {
      ctx.cancel(null);
      throw Errors.from(e, "send");
    }
  }

  /** Writes the whole send stream (as {@link #send}) to {@code out}; returns the send's stats. */
  public SendStats sendTo(OutputStream out, String snapshot, SendOptions opts) {
    try (SendStream s = send(snapshot, opts)) {
      while (s.hasNext()) {
        out.write(s.next());
      }
      out.flush();
      return s.stats();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Receives a send stream, its chunks from {@code source} (another server's {@link SendStream},
   * or any iterator of bytes), into a new read-only subvolume that appears only once the whole
   * stream arrived and verified. Errors: {@link DataLossException} (reason STREAM_CORRUPT) for a
   * damaged or truncated stream, {@link NotFoundException} / {@link FailedPreconditionException}
   * (PARENT_MISMATCH) for an incremental stream whose parent is missing or differs, {@link
   * AlreadyExistsException} for a taken name (PARTIAL_RECEIVE: a partial receive's),
   * RESUME_MISMATCH for a continuation that does not fit. An exception thrown by {@code source}
   * cancels the call (a resumable receive keeps what arrived) and is rethrown as it is.
   */
  public ReceiveResult receive(Iterator<byte[]> source, ReceiveOptions opts) {
    if (!opts.name().isEmpty()) {
      Validate.subvolumeName("receive", "name", opts.name());
    }
    return Receiver.run(rpc, source, opts);
  }

  /** {@link #receive(Iterator, ReceiveOptions)} reading {@code in} 1 MiB at a time. */
  public ReceiveResult receive(InputStream in, ReceiveOptions opts) {
    return receive(Receiver.chunks(in), opts);
  }

  /** The partial receives this server keeps, each with its resume token. */
  public List<PartialReceive> partialReceives() {
    SubvolumesOuterClass.PartialReceivesResponse m = Rpc.call("partial_receives",
        () -> rpc.subvolumes().partialReceives(
            SubvolumesOuterClass.PartialReceivesRequest.getDefaultInstance()));
    List<PartialReceive> out = new ArrayList<>();
    m.getPartialList().forEach(p -> out.add(PartialReceive.fromProto(p)));
    return out;
  }

  /**
   * Drops a partial receive: {@link NotFoundException} (RESUME_MISMATCH) if there is none, {@link
   * FailedPreconditionException} (PARTIAL_RECEIVE) while a receive writes to it.
   */
  public void abortReceive(String name) {
    Validate.subvolumeName("abort_receive", "name", name);
    Rpc.call("abort_receive", () -> rpc.subvolumes().abortReceive(
        SubvolumesOuterClass.AbortReceiveRequest.newBuilder().setName(name).build()));
  }

  /** SHA-256 (64 hex digits) over a subvolume's items and file data; equal for a sent snapshot and its copy. */
  public String digest(String name) {
    Validate.subvolumeName("digest", "name", name);
    return Rpc.call("digest", () -> rpc.subvolumes().digest(
        SubvolumesOuterClass.DigestSubvolumeRequest.newBuilder().setName(name).build())).getSha256();
  }

  // Admin.

  /** Commits the engine transaction: everything written before survives a crash. */
  public long sync() {
    return Rpc.call("sync", () -> rpc.admin(null).sync(
        AdminOuterClass.SyncRequest.getDefaultInstance())).getGeneration();
  }

  /**
   * Every engine and server counter, by the field names of StatsResponse (its counters only: a
   * read replica's status, {@code server_replicas}, is not a counter and is left out).
   */
  public Map<String, Long> stats() {
    AdminOuterClass.StatsResponse r = Rpc.call("stats", () -> rpc.admin(null).stats(
        AdminOuterClass.StatsRequest.getDefaultInstance()));
    Map<String, Long> out = new LinkedHashMap<>();
    for (Descriptors.FieldDescriptor f : r.getDescriptorForType().getFields()) {
      if (f.isRepeated() || f.getJavaType() == Descriptors.FieldDescriptor.JavaType.MESSAGE) {
        continue;
      }
      out.put(f.getName(), ((Number) r.getField(f)).longValue());
    }
    return Collections.unmodifiableMap(out);
  }

  /** Online read-only verification; findings are data, not an exception. */
  public CheckResult check() {
    return check(null);
  }

  /** {@link #check()} with its own deadline (a check of a large store takes a while). */
  public CheckResult check(Duration timeout) {
    AdminOuterClass.CheckResponse r = Rpc.call("check", () -> rpc.admin(timeout).check(
        AdminOuterClass.CheckRequest.getDefaultInstance()));
    return new CheckResult(r.getOk(), List.copyOf(r.getProblemsList()), r.getGeneration(),
        r.getFsid(), r.getNodesize(), r.getTotalBytes(), r.getTrees(), r.getNodes(),
        r.getItems(), r.getExtents(), r.getUsedBytes(), r.getRechecked());
  }

  /** Versions of the server, the API and its libraries. */
  public VersionInfo version() {
    AdminOuterClass.VersionResponse r = Rpc.call("version", () -> rpc.admin(null).version(
        AdminOuterClass.VersionRequest.getDefaultInstance()));
    return new VersionInfo(r.getVersion(), r.getApi(), r.getGrpcVersion(),
        r.getProtobufVersion(), r.getNodesize());
  }

  /** The KV.Watch streams open now (tests). */
  int watchStreamCount() {
    return rpc.watchStreams.count();
  }
}
