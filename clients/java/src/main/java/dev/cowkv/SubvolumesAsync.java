package dev.cowkv;

import cowkv.v1.SubvolumesOuterClass;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Subvolume management with calls that return {@link CompletableFuture}s ({@link
 * CowkvClient#async()}): the blocking {@link CowkvClient} methods' requests, checks and answers
 * on gRPC's future stub. Errors, cancellation and deadlines as {@link KvAsync}.
 */
public final class SubvolumesAsync {
  private final Rpc rpc;

  SubvolumesAsync(Rpc rpc) {
    this.rpc = rpc;
  }

  /** A copy whose calls have the deadline {@code d} instead of the client's default. */
  public SubvolumesAsync withDeadline(Duration d) {
    return new SubvolumesAsync(rpc.withDeadline(d));
  }

  /** The key space of a subvolume, asynchronously, under this deadline. */
  public KvAsync kv(String name) {
    return new Subvolume(rpc, name).async();
  }

  /** Creates an empty subvolume; {@link AlreadyExistsException} if the name is taken. */
  public CompletableFuture<SubvolumeInfo> create(String name) {
    return Rpc.future("create", () -> {
      Validate.subvolumeName("create", "name", name);
      return rpc.subvolumesFuture().create(
          SubvolumesOuterClass.CreateSubvolumeRequest.newBuilder().setName(name).build());
    }, SubvolumeInfo::fromProto);
  }

  /** Every live subvolume and snapshot, in id order. */
  public CompletableFuture<List<SubvolumeInfo>> list() {
    return Rpc.future("list", () -> rpc.subvolumesFuture().list(
        SubvolumesOuterClass.ListSubvolumesRequest.getDefaultInstance()), r -> {
          List<SubvolumeInfo> out = new ArrayList<>();
          for (SubvolumesOuterClass.SubvolumeInfo m : r.getSubvolumesList()) {
            out.add(SubvolumeInfo.fromProto(m));
          }
          return Collections.unmodifiableList(out);
        });
  }

  /** One subvolume; {@link NotFoundException} if no subvolume has the name. */
  public CompletableFuture<SubvolumeInfo> show(String name) {
    return Rpc.future("show", () -> {
      Validate.subvolumeName("show", "name", name);
      return rpc.subvolumesFuture().show(
          SubvolumesOuterClass.ShowSubvolumeRequest.newBuilder().setName(name).build());
    }, SubvolumeInfo::fromProto);
  }

  /** A snapshot of {@code source} named {@code name}, as {@link CowkvClient#snapshot}. */
  public CompletableFuture<SubvolumeInfo> snapshot(String source, String name, boolean readOnly) {
    return Rpc.future("snapshot", () -> {
      Validate.subvolumeName("snapshot", "source", source);
      Validate.subvolumeName("snapshot", "name", name);
      return rpc.subvolumesFuture().snapshot(SubvolumesOuterClass.SnapshotRequest.newBuilder()
          .setSource(source).setName(name).setReadOnly(readOnly).build());
    }, SubvolumeInfo::fromProto);
  }

  /** Deletes a subvolume by exact name. */
  public CompletableFuture<Void> delete(String name) {
    return Rpc.future("delete", () -> {
      Validate.subvolumeName("delete", "name", name);
      return rpc.subvolumesFuture().delete(
          SubvolumesOuterClass.DeleteSubvolumeRequest.newBuilder().setName(name).build());
    }, r -> null);
  }
}
