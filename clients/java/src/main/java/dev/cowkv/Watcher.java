package dev.cowkv;

import cowkv.v1.KVGrpc;
import cowkv.v1.Kv;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * One watcher ({@link Subvolume#watch}): the changes of a key or a range as they become durable,
 * in revision order, handed to a {@link WatchListener}; or a file watcher ({@link Files#watch})
 * handing the file tree's changes to a {@link FileWatchListener}. A client's watchers share its
 * KV.Watch streams (up to 1,000 watchers a stream); each watcher has its own bounded queue and its
 * listener runs on a thread of its own, one call at a time, so a slow listener holds back neither
 * the stream nor the other watchers (one that falls {@link #QUEUED_BATCHES} revisions or about
 * {@link #QUEUED_BYTES} behind ends alone with a {@link SlowReaderException}). Ends on {@link
 * #close()} (use it with try-with-resources) or when the server ends it with a reason ({@link
 * WatchListener#onError}). Thread-safe.
 */
public final class Watcher implements AutoCloseable {
  private static final String OP = "watch";
  private static final Logger LOG = Logger.getLogger(Watcher.class.getName());
  /** A watcher's bound of revisions queued for its listener. */
  public static final int QUEUED_BATCHES = 4096;
  /** A watcher's bound of event bytes queued for its listener (one larger revision still passes). */
  public static final long QUEUED_BYTES = 16L << 20;

  private final WatchListener listener; // a key watcher's, else null
  private final FileWatchListener fileListener; // a file watcher's, else null
  private final CompletableFuture<Kv.WatchResponse> created = new CompletableFuture<>();
  private final CountDownLatch done = new CountDownLatch(1);
  private volatile WatchStreams.Stream stream;
  private volatile long id;
  private volatile long revision;
  private volatile boolean closed;

  // Fragments of a revision being joined (the stream's gRPC thread only).
  private final List<Kv.WatchResponse> fragments = new ArrayList<>();

  // The listener's queue (under `this`): revision batches, then at most one End.
  private final ArrayDeque<Object> queue = new ArrayDeque<>();
  private int queuedBatches;
  private long queuedBytes;
  private boolean draining;
  private boolean endQueued;
  private volatile Thread drainer;

  /** The end handed to the listener: onError with {@code error}, or onCompleted for null. */
  private record End(CowkvException error) {}

  /** One revision's events and their size. */
  private record Batch(List<?> events, long bytes) {}

  /** Registers on a shared stream and waits (up to {@code createTimeout}, null = no limit) for the create's answer. */
  Watcher(WatchStreams mux, KVGrpc.KVStub stub, Kv.WatchCreateRequest create, WatchListener listener,
      Duration createTimeout) {
    this(mux, stub, create, listener, null, createTimeout);
  }

  /** A file watcher ({@code create} has {@code files} set). */
  Watcher(WatchStreams mux, KVGrpc.KVStub stub, Kv.WatchCreateRequest create,
      FileWatchListener fileListener, Duration createTimeout) {
    this(mux, stub, create, null, fileListener, createTimeout);
  }

  private Watcher(WatchStreams mux, KVGrpc.KVStub stub, Kv.WatchCreateRequest create,
      WatchListener listener, FileWatchListener fileListener, Duration createTimeout) {
    this.listener = listener;
    this.fileListener = fileListener;
    mux.add(stub, create, this);
    Kv.WatchResponse first = awaitCreated(createTimeout);
    revision = Math.max(revision, first.getRevision());
  }

  /** Set by the stream once it registered the watcher under {@code id}. */
  void attach(WatchStreams.Stream s, long id) {
    this.stream = s;
    this.id = id;
  }

  private Kv.WatchResponse awaitCreated(Duration timeout) {
    try {
      return timeout == null ? created.get() : created.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      abandon(true);
      throw new DeadlineExceededException(Status.Code.DEADLINE_EXCEEDED,
          "the server did not create the watcher in time", OP, e);
    } catch (InterruptedException e) {
      abandon(true);
      Thread.currentThread().interrupt();
      throw new CancelledException(Status.Code.CANCELLED, "interrupted", OP, e);
    } catch (ExecutionException e) {
      abandon(false);
      throw Errors.from(e.getCause(), OP);
    }
  }

  /** The watcher's id on its stream (chosen by the client, unique on the stream). */
  public long id() {
    return id;
  }

  /** The latest store revision the server reported to this watcher. */
  public long revision() {
    return revision;
  }

  /** True once the watcher has ended (closed, or ended by the server) and its listener heard so. */
  public boolean isDone() {
    return done.getCount() == 0;
  }

  /** Waits at most {@code timeout} for the watcher to end; true if it has. */
  public boolean awaitDone(Duration timeout) throws InterruptedException {
    return done.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }

  /**
   * Ends the watcher (cancelling only its id on the shared stream, which closes with its last
   * watcher); events not yet handed to the listener are dropped and its onCompleted follows
   * (unless it had ended). Returns once the listener heard its end, at once when called from the
   * listener itself. Idempotent.
   */
  @Override
  public void close() {
    closed = true;
    WatchStreams.Stream s = stream;
    if (s != null) {
      s.remove(id, true);
    }
    queueEnd(null);
    if (Thread.currentThread() != drainer) {
      try {
        done.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A create that failed: the constructor throws, the listener hears nothing. */
  private void abandon(boolean cancel) {
    synchronized (this) {
      endQueued = true;
      queue.clear();
    }
    WatchStreams.Stream s = stream;
    if (s != null) {
      s.remove(id, cancel);
    }
    done.countDown();
  }

  /** The stream under the watcher failed with {@code e} (it has dropped the watcher). */
  void streamFailed(CowkvException e) {
    if (!created.isDone()) {
      created.completeExceptionally(e);
      return;
    }
    queueEnd(closed ? null : e);
  }

  /** One response for this watcher (on the stream's gRPC thread, in order); never blocks. */
  void deliver(Kv.WatchResponse r) {
    revision = Math.max(revision, r.getRevision());
    if (!created.isDone()) {
      if (r.getCanceled()) {
        created.completeExceptionally(cancelError(r)); // the constructor drops the id
      } else {
        created.complete(r);
      }
      return;
    }
    if (r.getCanceled()) {
      stream.remove(id, false);
      queueEnd(r.getCancelCode() == Kv.WatchCancelCode.WATCH_CANCEL_CLIENT ? null : cancelError(r));
      return;
    }
    if (r.getEventsCount() == 0 && r.getFileEventsCount() == 0) {
      return; // progress: the revision advanced
    }
    fragments.add(r);
    if (r.getFragment()) {
      return;
    }
    Batch b = batch();
    if (!offer(b)) {
      stream.remove(id, true);
      queueEnd(new SlowReaderException(Status.Code.RESOURCE_EXHAUSTED,
          "the watcher's events were read slower than they came (client queue full)", OP, null)
          .withErrorInfo("SLOW_READER", java.util.Map.of()));
    }
  }

  /** The joined fragments as one revision's events. */
  private Batch batch() {
    List<Object> events = new ArrayList<>();
    long bytes = 0;
    for (Kv.WatchResponse f : fragments) {
      for (Kv.WatchEvent e : f.getEventsList()) {
        events.add(eventFrom(e));
        bytes += e.getKv().getKey().size() + e.getKv().getValue().size() + 32
            + e.getPrevKv().getKey().size() + e.getPrevKv().getValue().size();
      }
      for (Kv.FileWatchEvent e : f.getFileEventsList()) {
        events.add(fileEventFrom(e));
        bytes += e.getPath().length() + e.getNewPath().length() + 32;
      }
    }
    fragments.clear();
    return new Batch(List.copyOf(events), bytes);
  }

  /** Queues a revision for the listener; false if the watcher is too far behind. */
  private synchronized boolean offer(Batch b) {
    if (endQueued || closed) {
      return true;
    }
    if (queuedBatches >= QUEUED_BATCHES || (queuedBytes > 0 && queuedBytes + b.bytes() > QUEUED_BYTES)) {
      return false;
    }
    queue.add(b);
    queuedBatches++;
    queuedBytes += b.bytes();
    schedule();
    return true;
  }

  /** Queues the end once (a close drops the events not yet handed over). */
  private synchronized void queueEnd(CowkvException error) {
    if (endQueued) {
      return;
    }
    endQueued = true;
    if (error == null) {
      queue.clear();
    }
    queue.add(new End(error));
    schedule();
  }

  private void schedule() { // under `this`
    if (!draining) {
      draining = true;
      WatchStreams.LISTENERS.execute(this::drain);
    }
  }

  /** Hands the queue to the listener, one call at a time, until it is empty. */
  private void drain() {
    drainer = Thread.currentThread();
    try {
      for (;;) {
        Object item;
        synchronized (this) {
          item = queue.poll();
          if (item == null) {
            draining = false;
            return;
          }
          if (item instanceof Batch b) {
            queuedBatches--;
            queuedBytes -= b.bytes();
          }
        }
        if (item instanceof End e) {
          try {
            callEnd(e.error());
          } finally {
            done.countDown();
          }
        } else if (!closed) {
          callEvents(((Batch) item).events());
        }
      }
    } finally {
      drainer = null;
    }
  }

  @SuppressWarnings("unchecked")
  private void callEvents(List<?> events) {
    try {
      if (listener != null) {
        listener.onEvents((List<WatchEvent>) events);
      } else {
        fileListener.onEvents((List<FileEvent>) events);
      }
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "a watch listener's onEvents threw", e);
    }
  }

  private void callEnd(CowkvException error) {
    try {
      if (error != null && listener != null) {
        listener.onError(error);
      } else if (error != null) {
        fileListener.onError(error);
      } else if (listener != null) {
        listener.onCompleted();
      } else {
        fileListener.onCompleted();
      }
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "a watch listener's end call threw", e);
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

  static CowkvException asCowkv(Throwable t) {
    RuntimeException e = Errors.from(t, OP);
    return e instanceof CowkvException c ? c : Errors.fromStatus(Status.fromThrowable(t), OP);
  }
}
