package dev.cowkv;

import cowkv.v1.LeaseOuterClass.LeaseKeepAliveRequest;
import cowkv.v1.LeaseOuterClass.LeaseKeepAliveResponse;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * A running background keep-alive of one lease ({@link Leases#keepAlive}): one request on its
 * KeepAlive stream now, then one every TTL/3 after each answer, on a daemon thread of its own.
 * Ends on {@link #close()} (use it with try-with-resources), when the lease is found gone
 * ({@link #lost()}), or when the stream fails ({@link #error()}). Closing does not revoke the
 * lease: it expires after its TTL unless revoked. Thread-safe.
 */
public final class KeepAlive implements AutoCloseable {
  /** The shortest pause between two renewals, in milliseconds. */
  private static final long MIN_INTERVAL_MS = 100;

  private final long id;
  private final Context.CancellableContext context = Context.current().withCancellation();
  private final ScheduledExecutorService timer;
  private final CountDownLatch done = new CountDownLatch(1);
  private final StreamObserver<LeaseKeepAliveRequest> requests;
  private final LeaseKeepAliveRequest request;
  private volatile long ttl;
  private volatile boolean lost;
  private volatile boolean closed;
  private volatile CowkvException error;

  KeepAlive(Rpc rpc, String subvolume, long id) {
    this.id = id;
    this.request = LeaseKeepAliveRequest.newBuilder().setSubvolume(subvolume).setId(id).build();
    this.timer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "cowkv-keepalive-" + id);
      t.setDaemon(true);
      return t;
    });
    // The call belongs to the cancellable context: close() cancels it.
    Context previous = context.attach();
    try {
      this.requests = rpc.leaseStream().keepAlive(new Answers());
    } finally {
      context.detach(previous);
    }
    send();
  }

  /** The lease kept alive. */
  public long id() {
    return id;
  }

  /** The TTL of the last answer, in seconds (0 before the first). */
  public long ttl() {
    return ttl;
  }

  /** True once the keep-alive found the lease gone (the stream answered ttl 0). */
  public boolean lost() {
    return lost;
  }

  /** The failure that ended the stream, or null (close() is not a failure). */
  public CowkvException error() {
    return error;
  }

  /** True once the keep-alive has ended, for any reason. */
  public boolean isDone() {
    return done.getCount() == 0;
  }

  /** Waits at most {@code timeout} for the keep-alive to end; true if it has. */
  public boolean awaitDone(Duration timeout) throws InterruptedException {
    return done.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }

  /** Stops renewing and cancels the stream; idempotent. */
  @Override
  public void close() {
    closed = true;
    finish();
  }

  private void send() {
    synchronized (requests) {
      if (!isDone()) {
        requests.onNext(request);
      }
    }
  }

  private void finish() {
    if (done.getCount() == 0) {
      return;
    }
    timer.shutdownNow();
    context.cancel(null);
    done.countDown();
  }

  private final class Answers implements StreamObserver<LeaseKeepAliveResponse> {
    @Override
    public void onNext(LeaseKeepAliveResponse m) {
      if (m.getTtl() <= 0) {
        lost = true;
        finish();
        return;
      }
      ttl = m.getTtl();
      long wait = Math.max(TimeUnit.SECONDS.toMillis(m.getTtl()) / 3, MIN_INTERVAL_MS);
      try {
        timer.schedule(KeepAlive.this::send, wait, TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.RejectedExecutionException stopped) {
        // closed meanwhile
      }
    }

    @Override
    public void onError(Throwable t) {
      if (!closed && !lost) { // both cancel the call themselves
        RuntimeException e = Errors.from(t, "lease-keep-alive");
        error = e instanceof CowkvException c ? c
            : Errors.fromStatus(Status.fromThrowable(t), "lease-keep-alive");
      }
      finish();
    }

    @Override
    public void onCompleted() {
      if (!closed && !lost) {
        error = Errors.fromStatus(Status.UNAVAILABLE.withDescription("the KeepAlive stream ended"),
            "lease-keep-alive");
      }
      finish();
    }
  }
}
