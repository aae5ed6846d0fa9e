package dev.cowkv;

import cowkv.v1.KVGrpc;
import cowkv.v1.Kv;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One watcher ({@link Subvolume#watch}): the changes of a key or a range as they become durable,
 * in revision order, handed to a {@link WatchListener}; or a file watcher ({@link Files#watch})
 * handing the file tree's changes to a {@link FileWatchListener}. Each watcher has a KV.Watch stream of its
 * own: simple, and a slow listener of one watcher never holds back another. Ends on {@link
 * #close()} (use it with try-with-resources) or when the server ends it with a reason ({@link
 * WatchListener#onError}). Thread-safe.
 */
public final class Watcher implements AutoCloseable {
  private static final String OP = "watch";

  private final Context.CancellableContext context = Context.current().withCancellation();
  private final WatchListener listener; // a key watcher's, else null
  private final FileWatchListener fileListener; // a file watcher's, else null
  private final CompletableFuture<Kv.WatchResponse> created = new CompletableFuture<>();
  private final CountDownLatch done = new CountDownLatch(1);
  private final AtomicBoolean ended = new AtomicBoolean();
  private final StreamObserver<Kv.WatchRequest> requests;
  private volatile long id;
  private volatile long revision;
  private volatile boolean closed;

  /** Opens the stream and waits (up to {@code createTimeout}, null = no limit) for the create's answer. */
  Watcher(KVGrpc.KVStub stub, Kv.WatchCreateRequest create, WatchListener listener, Duration createTimeout) {
    this(stub, create, listener, null, createTimeout);
  }

  /** A file watcher ({@code create} has {@code files} set). */
  Watcher(KVGrpc.KVStub stub, Kv.WatchCreateRequest create, FileWatchListener fileListener,
      Duration createTimeout) {
    this(stub, create, null, fileListener, createTimeout);
  }

  private Watcher(KVGrpc.KVStub stub, Kv.WatchCreateRequest create, WatchListener listener,
      FileWatchListener fileListener, Duration createTimeout) {
    this.listener = listener;
    this.fileListener = fileListener;
    Context previous = context.attach();
    try {
      this.requests = stub.watch(new Responses());
    } finally {
      context.detach(previous);
    }
    requests.onNext(Kv.WatchRequest.newBuilder().setCreateRequest(create).build());
    Kv.WatchResponse first = awaitCreated(createTimeout);
    id = first.getWatchId();
  }

  private Kv.WatchResponse awaitCreated(Duration timeout) {
    try {
      return timeout == null ? created.get() : created.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      abandon();
      throw new DeadlineExceededException(Status.Code.DEADLINE_EXCEEDED,
          "the server did not create the watcher in time", OP, e);
    } catch (InterruptedException e) {
      abandon();
      Thread.currentThread().interrupt();
      throw new CancelledException(Status.Code.CANCELLED, "interrupted", OP, e);
    } catch (ExecutionException e) {
      abandon();
      throw Errors.from(e.getCause(), OP);
    }
  }

  /** The watcher's id on its stream. */
  public long id() {
    return id;
  }

  /** The latest store revision the server reported on the stream. */
  public long revision() {
    return revision;
  }

  /** True once the watcher has ended (closed, or ended by the server). */
  public boolean isDone() {
    return done.getCount() == 0;
  }

  /** Waits at most {@code timeout} for the watcher to end; true if it has. */
  public boolean awaitDone(Duration timeout) throws InterruptedException {
    return done.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }

  /** Ends the watcher and its stream; the listener's onCompleted follows (unless it had ended). Idempotent. */
  @Override
  public void close() {
    closed = true;
    cancelStream();
    end(null);
  }

  /** A create that failed: the constructor throws, the listener hears nothing. */
  private void abandon() {
    ended.set(true);
    done.countDown();
    cancelStream();
  }

  private void cancelStream() {
    context.cancel(null);
  }

  /** Ends once: onError with {@code error}, or onCompleted for null. */
  private void end(CowkvException error) {
    if (!ended.compareAndSet(false, true)) {
      return;
    }
    try {
      if (created.isDone()) {
        if (error != null && listener != null) {
          listener.onError(error);
        } else if (error != null) {
          fileListener.onError(error);
        } else if (listener != null) {
          listener.onCompleted();
        } else {
          fileListener.onCompleted();
        }
      }
    } finally {
      done.countDown();
    }
  }

  /** The error of a watcher the server ended: its cancel code decides the class, never its text. */
  static CowkvException cancelError(Kv.WatchResponse r) {
    Status.Code code = r.getErrorCode() == 0 ? null : Status.fromCodeValue(r.getErrorCode()).getCode();
    String reason = r.getCancelReason();
    Spec.WatchEnd end = Spec.WATCH_CANCEL.get(r.getCancelCodeValue());
    if (end != null && end.cls().equals("compacted")) {
      return new CompactedException(reason, r.getCompactRevision(), OP);
    }
    if (end != null) { // SUBVOLUME_DELETED, SLOW_READER
      return Errors.create(end.cls(), code, reason, OP, null);
    }
    // REFUSED, SERVER: the error a call would have given
    Status st = Status.fromCode(code == null ? Status.Code.UNKNOWN : code).withDescription(reason);
    com.google.rpc.ErrorInfo info = r.getErrorReason().isEmpty() ? null
        : com.google.rpc.ErrorInfo.newBuilder().setReason(r.getErrorReason()).build();
    return Errors.fromStatus(st, info, OP);
  }

  static WatchEvent eventFrom(Kv.WatchEvent e) {
    WatchEvent.Type type = e.getType() == Kv.WatchEvent.EventType.DELETE
        ? WatchEvent.Type.DELETE : WatchEvent.Type.PUT;
    return new WatchEvent(type, KeyValue.fromProto(e.getKv()),
        e.hasPrevKv() ? KeyValue.fromProto(e.getPrevKv()) : null);
  }

  static FileEvent fileEventFrom(Kv.FileWatchEvent f) {
    return new FileEvent(FileEvent.Type.of(f.getType().name()), f.getRevision(), f.getIno(),
        f.getPath(), f.getNewPath(), f.getPathsLost());
  }

  private final class Responses implements StreamObserver<Kv.WatchResponse> {
    private List<WatchEvent> events = new ArrayList<>();
    private List<FileEvent> fileEvents = new ArrayList<>();

    @Override
    public void onNext(Kv.WatchResponse r) {
      revision = Math.max(revision, r.getRevision());
      if (!created.isDone()) {
        if (r.getCanceled()) {
          created.completeExceptionally(cancelError(r));
          return;
        }
        created.complete(r);
      }
      if (r.getCanceled()) {
        cancelStream();
        end(r.getCancelCode() == Kv.WatchCancelCode.WATCH_CANCEL_CLIENT ? null : cancelError(r));
        return;
      }
      for (Kv.WatchEvent e : r.getEventsList()) {
        events.add(eventFrom(e));
      }
      for (Kv.FileWatchEvent f : r.getFileEventsList()) {
        fileEvents.add(fileEventFrom(f));
      }
      if (r.getFragment() || closed) {
        return;
      }
      if (!events.isEmpty()) {
        List<WatchEvent> batch = List.copyOf(events);
        events = new ArrayList<>();
        listener.onEvents(batch);
      }
      if (!fileEvents.isEmpty()) {
        List<FileEvent> batch = List.copyOf(fileEvents);
        fileEvents = new ArrayList<>();
        fileListener.onEvents(batch);
      }
    }

    @Override
    public void onError(Throwable t) {
      CowkvException e = asCowkv(t);
      if (!created.isDone()) {
        created.completeExceptionally(e);
      }
      end(closed ? null : e);
    }

    @Override
    public void onCompleted() {
      CowkvException e = Errors.fromStatus(
          Status.UNAVAILABLE.withDescription("the watch stream ended"), OP);
      if (!created.isDone()) {
        created.completeExceptionally(e);
      }
      end(closed ? null : e);
    }
  }

  private static CowkvException asCowkv(Throwable t) {
    RuntimeException e = Errors.from(t, OP);
    return e instanceof CowkvException c ? c : Errors.fromStatus(Status.fromThrowable(t), OP);
  }
}
