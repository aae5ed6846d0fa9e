package dev.cowkv;

import cowkv.v1.KVGrpc;
import cowkv.v1.Kv;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The KV.Watch streams a client's watchers share (as the Go client's watch_stream.go, the Rust
 * client's watch_stream.rs and etcd's clientv3 do).
 *
 * <p>A stream carries up to {@link #MAX_WATCHERS_PER_STREAM} watchers (the server's bound), of any
 * subvolume, each with a client-chosen id unique on the stream and never reused (a late response
 * for a removed watcher is recognised and dropped). The stream's responses arrive on a gRPC thread,
 * which hands each to its watcher ({@link Watcher#deliver}) without ever waiting: the watcher
 * queues it (bounded) and its listener runs on a thread of {@link #LISTENERS}, so a slow listener
 * holds back neither the stream nor the other watchers; a watcher too far behind ends alone with a
 * {@link SlowReaderException}. A stream closes with its last watcher; a stream that fails ends
 * every watcher on it with the same error, and the next watch opens a new one.
 *
 * <p>Invariants (under the stream's monitor): {@code watchers.size() <= MAX_WATCHERS_PER_STREAM}
 * (creating ones included); a dead stream is not in the mux, takes no new watcher and sends
 * nothing; a watcher is in {@code watchers} until its end is decided.
 */
final class WatchStreams {
  /** The server's bound of watchers per stream (docs/api.md "Watch"). */
  static final int MAX_WATCHERS_PER_STREAM = 1000;

  /** Runs the listeners (one drain at a time per watcher); daemon threads, idle ones expire. */
  static final ExecutorService LISTENERS = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "cowkv-watch-listener");
    t.setDaemon(true);
    return t;
  });

  private final List<Stream> streams = new ArrayList<>();

  /** Registers {@code w} on a stream with room (opening one if needed) and sends its create. */
  Stream add(KVGrpc.KVStub stub, Kv.WatchCreateRequest create, Watcher w) {
    Stream s;
    long id;
    synchronized (this) {
      s = null;
      for (Stream c : streams) {
        if (c.reserve()) {
          s = c;
          break;
        }
      }
      if (s == null) {
        s = new Stream(stub);
        streams.add(s);
        s.reserve();
      }
      id = s.put(w);
    }
    w.attach(s, id);
    if (!s.send(Kv.WatchRequest.newBuilder()
        .setCreateRequest(create.toBuilder().setWatchId(id)).build())) {
      w.streamFailed(ended());
    }
    return s;
  }

  /** The open streams (for tests: a stream closes with its last watcher). */
  synchronized int count() {
    return streams.size();
  }

  private synchronized void drop(Stream s) {
    streams.remove(s);
  }

  static CowkvException ended() {
    return Errors.fromStatus(Status.UNAVAILABLE.withDescription("the watch stream ended"), "watch");
  }

  /** One shared stream. */
  final class Stream implements StreamObserver<Kv.WatchResponse> {
    private final Context.CancellableContext context = Context.ROOT.withCancellation();
    private final StreamObserver<Kv.WatchRequest> requests;
    private final Map<Long, Watcher> watchers = new HashMap<>();
    private long nextId;
    private int reserved;
    private boolean dead;

    Stream(KVGrpc.KVStub stub) {
      Context previous = context.attach();
      try {
        requests = stub.watch(this);
      } finally {
        context.detach(previous);
      }
    }

    /** Makes room for one more watcher; false if there is none (or the stream is dead). */
    private synchronized boolean reserve() {
      if (dead || watchers.size() + reserved >= MAX_WATCHERS_PER_STREAM) {
        return false;
      }
      reserved++;
      return true;
    }

    private synchronized long put(Watcher w) {
      reserved--;
      long id = ++nextId;
      if (!dead) {
        watchers.put(id, w);
      }
      return id;
    }

    /** Sends {@code r} unless the stream is dead; false if it is. */
    private synchronized boolean send(Kv.WatchRequest r) {
      if (dead) {
        return false;
      }
      requests.onNext(r);
      return true;
    }

    /**
     * Drops watcher {@code id} (closed, abandoned, or ended by the server or as too slow); with
     * {@code cancel} the server is told. The stream closes with its last watcher.
     */
    void remove(long id, boolean cancel) {
      synchronized (this) {
        if (dead || watchers.remove(id) == null) {
          return;
        }
        if (!watchers.isEmpty() || reserved > 0) {
          if (cancel) {
            requests.onNext(Kv.WatchRequest.newBuilder()
                .setCancelRequest(Kv.WatchCancelRequest.newBuilder().setWatchId(id)).build());
          }
          return;
        }
        dead = true;
      }
      drop(this);
      context.cancel(null);
    }

    @Override
    public void onNext(Kv.WatchResponse r) {
      Watcher w;
      synchronized (this) {
        w = r.getWatchId() < 0 ? null : watchers.get(r.getWatchId());
      }
      if (w != null) { // else a progress answer for the whole stream, or a removed watcher
        w.deliver(r);
      }
    }

    @Override
    public void onError(Throwable t) {
      fail(Watcher.asCowkv(t));
    }

    @Override
    public void onCompleted() {
      fail(ended());
    }

    /** Ends every watcher of a stream that ended under them with the same error. */
    private void fail(CowkvException e) {
      List<Watcher> ws;
      synchronized (this) {
        dead = true;
        ws = new ArrayList<>(watchers.values());
        watchers.clear();
      }
      drop(this);
      context.cancel(null);
      for (Watcher w : ws) {
        w.streamFailed(e);
      }
    }
  }
}
