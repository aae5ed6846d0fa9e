package dev.cowkv;

import cowkv.v1.LeaseOuterClass.LeaseGrantRequest;
import cowkv.v1.LeaseOuterClass.LeaseKeepAliveRequest;
import cowkv.v1.LeaseOuterClass.LeaseKeepAliveResponse;
import cowkv.v1.LeaseOuterClass.LeaseLeasesRequest;
import cowkv.v1.LeaseOuterClass.LeaseRevokeRequest;
import cowkv.v1.LeaseOuterClass.LeaseTimeToLiveRequest;
import cowkv.v1.LeaseOuterClass.LeaseTimeToLiveResponse;
import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * The leases of one subvolume ({@link Subvolume#leases()}): etcd's lease API. A key put with a
 * lease ({@link Subvolume#put(byte[], byte[], Durability, long)}, {@link Op#put(byte[], byte[],
 * long)}) is deleted when the lease is revoked or expires; a put without one detaches the key.
 * An unknown lease (or one whose deadline passed) is {@link NotFoundException}. Thread-safe.
 *
 * <pre>{@code
 * Leases leases = sv.leases();
 * LeaseGrant g = leases.grant(10);                  // TTL 10 s; the server picks the id
 * sv.put("svc/a", "1", g.id());
 * try (KeepAlive ka = leases.keepAlive(g.id())) {   // renews every TTL/3 until closed
 *   ...
 * }
 * leases.revoke(g.id());                            // deletes svc/a in one revision
 * }</pre>
 */
public final class Leases {
  /** The largest lease TTL, in seconds (the smallest is 1). */
  public static final long MAX_TTL_SECONDS = Spec.MAX_LEASE_TTL_SECONDS;

  private final Rpc rpc;
  private final String subvolume;

  /** A copy whose calls have the deadline {@code d} instead of the client's default. */
  public Leases withDeadline(java.time.Duration d) {
    return new Leases(rpc.withDeadline(d), subvolume);
  }

  Leases(Rpc rpc, String subvolume) {
    this.rpc = rpc;
    this.subvolume = subvolume;
  }

  /** A new lease of {@code ttl} seconds (1..9,000,000,000) with an id the server picks. */
  public LeaseGrant grant(long ttl) {
    return grant(ttl, 0, Durability.DEFAULT);
  }

  /** A new lease with this id (>= 1; 0 = the server picks). {@link AlreadyExistsException} for an id in use. */
  public LeaseGrant grant(long ttl, long id) {
    return grant(ttl, id, Durability.DEFAULT);
  }

  public LeaseGrant grant(long ttl, long id, Durability durability) {
    String op = "lease-grant";
    if (ttl < 1 || ttl > MAX_TTL_SECONDS) {
      throw Errors.invalid(op, "ttl: " + ttl + " out of range 1.." + MAX_TTL_SECONDS);
    }
    Validate.nonNegative(op, "id", id);
    var r = Rpc.call(op, () -> rpc.lease().grant(LeaseGrantRequest.newBuilder()
        .setSubvolume(subvolume).setTtl(ttl).setId(id).setDurability(durability.proto).build()));
    return new LeaseGrant(r.getId(), r.getTtl());
  }

  /**
   * Deletes the lease and every key attached to it, in one revision (returned; the current
   * revision if no key was left). {@link NotFoundException} if there is no such lease.
   */
  public long revoke(long id) {
    return revoke(id, Durability.DEFAULT);
  }

  public long revoke(long id, Durability durability) {
    return Rpc.call("lease-revoke", () -> rpc.lease().revoke(LeaseRevokeRequest.newBuilder()
        .setSubvolume(subvolume).setId(id).setDurability(durability.proto).build())).getRevision();
  }

  /**
   * Renews the lease once, on a KeepAlive stream of its own (under the unary deadline); returns
   * the restarted TTL in seconds. {@link NotFoundException} if the lease is gone.
   */
  public long keepAliveOnce(long id) {
    String op = "lease-keep-alive";
    CompletableFuture<Long> answer = new CompletableFuture<>();
    rpc.leaseAsync().keepAlive(new ClientResponseObserver<LeaseKeepAliveRequest, LeaseKeepAliveResponse>() {
      private ClientCallStreamObserver<LeaseKeepAliveRequest> requests;

      @Override
      public void beforeStart(ClientCallStreamObserver<LeaseKeepAliveRequest> requests) {
        this.requests = requests;
      }

      @Override
      public void onNext(LeaseKeepAliveResponse m) {
        answer.complete(m.getTtl());
        requests.cancel("answered", null); // one answer is all this call wants
      }

      @Override
      public void onError(Throwable t) {
        answer.completeExceptionally(t);
      }

      @Override
      public void onCompleted() {
        answer.completeExceptionally(Status.INTERNAL
            .withDescription("the KeepAlive stream ended without an answer").asRuntimeException());
      }
    }).onNext(LeaseKeepAliveRequest.newBuilder().setSubvolume(subvolume).setId(id).build());
    long ttl;
    try {
      ttl = answer.get();
    } catch (ExecutionException e) {
      throw Errors.from(e.getCause(), op);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw Errors.from(Status.CANCELLED.withDescription("interrupted").asRuntimeException(), op);
    }
    if (ttl <= 0) {
      throw new NotFoundException(Status.Code.NOT_FOUND,
          "lease " + id + " not found (the KeepAlive stream answered ttl 0)", op, null);
    }
    return ttl;
  }

  /**
   * Keeps the lease alive in the background, on one KeepAlive stream without a deadline: it
   * renews now and then every TTL/3 after each answer, until {@link KeepAlive#close()}.
   */
  public KeepAlive keepAlive(long id) {
    return new KeepAlive(rpc, subvolume, id);
  }

  /**
   * The lease's remaining and granted TTL, and with {@code keys} its attached keys.
   * {@link NotFoundException} if there is no such lease.
   */
  public LeaseInfo timeToLive(long id, boolean keys) {
    LeaseTimeToLiveResponse r = Rpc.call("lease-time-to-live", () -> rpc.lease().timeToLive(
        LeaseTimeToLiveRequest.newBuilder().setSubvolume(subvolume).setId(id).setKeys(keys).build()));
    List<byte[]> out = r.getKeysList().stream().map(ByteString::toByteArray).toList();
    return new LeaseInfo(r.getId(), r.getTtl(), r.getGrantedTtl(), out);
  }

  /** The ids of the subvolume's leases, in increasing order. */
  public List<Long> list() {
    return List.copyOf(Rpc.call("lease-list", () -> rpc.lease().leases(
        LeaseLeasesRequest.newBuilder().setSubvolume(subvolume).build())).getIdsList());
  }
}
