package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A client's watchers share KV.Watch streams (as Go's TestWatchSharedStreams and Rust's
 * watch_shared_streams).
 *
 * <p>Goal: against a cowkvd that allows a client only 3 calls at a time, 60 watchers (one stream)
 * each get exactly their own key's events; a third closed by the test and a third closed from
 * inside their own listener end alone (onCompleted, nothing more) and the rest still get events;
 * a slow listener ends alone with a {@link SlowReaderException} while a fast watcher on the same
 * stream gets every event; once every watcher is gone the stream is closed and a new watch works;
 * a stream that fails ends every watcher on it with the same error class; the per-stream bound
 * (1,000) opens a second stream; watchers opened and closed from several threads at once.
 */
class WatchSharedTest {
  private static final Duration WAIT = Duration.ofSeconds(30);
  private static final int N = 60;

  @Test
  void sharedStreams() throws Exception {
    try (CowkvdServer server = CowkvdServer.startWith("256M", List.of("--max-calls-per-client", "3"));
        CowkvClient client = CowkvClient.connect(CowkvOptions.builder().address(server.address())
            .defaultDeadline(Duration.ofSeconds(20)).build())) {
      client.createSubvolume("shared");
      Subvolume sv = client.subvolume("shared");
      List<WatchQueue> qs = new ArrayList<>();
      Watcher[] ws = new Watcher[N];
      for (int i = 0; i < N; i++) {
        Watcher[] self = new Watcher[1];
        WatchQueue q = new WatchQueue();
        WatchListener l = new WatchListener() {
          @Override
          public void onEvents(List<WatchEvent> events) {
            q.onEvents(events);
            if (events.get(0).kv().valueString().equals("bye")) {
              self[0].close(); // from the listener's own thread: must not wait for itself
            }
          }

          @Override
          public void onError(CowkvException error) {
            q.onError(error);
          }

          @Override
          public void onCompleted() {
            q.onCompleted();
          }
        };
        qs.add(q);
        ws[i] = sv.watch("s/" + i, new WatchOptions(), l);
        self[0] = ws[i];
      }
      assertEquals(1, client.watchStreamCount(), "60 watchers share one stream");
      for (int i = 0; i < N; i++) {
        sv.put("s/" + i, "a");
      }
      for (int i = 0; i < N; i++) {
        WatchEvent e = qs.get(i).take(1, WAIT).get(0);
        assertEquals("s/" + i + "=a", e.kv().keyString() + "=" + e.kv().valueString(), "watcher " + i);
      }
      closeThirds(sv, ws, qs);
      for (int i = 0; i < N; i++) {
        sv.put("s/" + i, "b");
      }
      for (int i = 0; i < N; i++) {
        List<Object> rest = i % 3 == 2 ? List.copyOf(qs.get(i).take(1, WAIT)) : qs.get(i).drainAny(WAIT);
        List<String> got = new ArrayList<>();
        for (Object o : rest) {
          got.add(((WatchEvent) o).kv().valueString());
        }
        assertEquals(i % 3 == 2 ? List.of("b") : List.of(), got, "watcher " + i + " after the closes");
      }
      slowAndFast(sv);
      for (int i = 2; i < N; i += 3) {
        sv.put("s/" + i, "c");
        assertEquals("c", qs.get(i).take(1, WAIT).get(0).kv().valueString(), "watcher " + i + " after the slow one");
        assertEquals(0, qs.get(i).pending(), "watcher " + i + " got another watcher's events");
        ws[i].close();
      }
      assertEquals(0, client.watchStreamCount(), "the stream closes with its last watcher");
      WatchQueue again = new WatchQueue();
      try (Watcher w = sv.watch("again", new WatchOptions(), again)) {
        sv.put("again", "x");
        assertEquals("x", again.take(1, WAIT).get(0).kv().valueString());
      }
      streamFailure(server, sv);
    }
  }

  /**
   * The per-stream bound: 1,000 watchers share one stream, the 1,001st opens a second; watchers
   * created and closed from several threads at once each get exactly their own key's events, and
   * every stream closes with its last watcher. Replay: {@code COWKV_WATCH_SEED=N}.
   */
  @Test
  void boundAndConcurrentWatchers() throws Exception {
    String env = System.getenv("COWKV_WATCH_SEED");
    long seed = env != null ? Long.parseLong(env) : System.nanoTime();
    try (CowkvClient client = CowkvClient.connect(CowkvOptions.builder()
        .address(CowkvdServer.shared().address()).defaultDeadline(Duration.ofSeconds(20)).build())) {
      String name = "java-watch-shared-" + seed;
      client.createSubvolume(name);
      Subvolume sv = client.subvolume(name);
      List<Watcher> ws = new ArrayList<>();
      for (int i = 0; i < WatchStreams.MAX_WATCHERS_PER_STREAM; i++) {
        ws.add(sv.watch("n/" + i, new WatchOptions(), new WatchQueue()));
      }
      assertEquals(1, client.watchStreamCount(), "1,000 watchers on one stream");
      WatchQueue last = new WatchQueue();
      ws.add(sv.watch("n/last", new WatchOptions(), last));
      assertEquals(2, client.watchStreamCount(), "the 1,001st watcher on a second stream");
      sv.put("n/last", "x");
      assertEquals("n/last", last.take(1, WAIT).get(0).kv().keyString());
      Thread[] ts = new Thread[4];
      Throwable[] failed = new Throwable[1];
      for (int t = 0; t < ts.length; t++) {
        long s = seed + t;
        int id = t;
        List<Watcher> mine = new ArrayList<>(ws.subList(id * 250, id * 250 + 250));
        ts[t] = new Thread(() -> {
          try {
            churn(sv, id, new java.util.Random(s), mine);
          } catch (Throwable e) {
            synchronized (failed) {
              failed[0] = e;
            }
          }
        });
        ts[t].start();
      }
      for (Thread t : ts) {
        t.join();
      }
      if (failed[0] != null) {
        throw new AssertionError("seed " + seed + ": " + failed[0], failed[0]);
      }
      ws.get(ws.size() - 1).close();
      assertEquals(0, client.watchStreamCount(), "seed " + seed + ": the streams close with their last watchers");
    }
  }

  /** One thread's random walk: closes its old watchers, opens and checks new ones, closes them. */
  private static void churn(Subvolume sv, int thread, java.util.Random rnd, List<Watcher> old)
      throws Exception {
    List<Watcher> live = new ArrayList<>();
    List<WatchQueue> qs = new ArrayList<>();
    List<String> keys = new ArrayList<>();
    for (int step = 0; step < 60; step++) {
      if (!old.isEmpty() && rnd.nextBoolean()) {
        for (int k = 0; k < 25 && !old.isEmpty(); k++) {
          old.remove(old.size() - 1).close();
        }
      } else if (live.isEmpty() || rnd.nextInt(3) > 0) {
        String key = "c/" + thread + "/" + step;
        WatchQueue q = new WatchQueue();
        live.add(sv.watch(key, new WatchOptions(), q));
        qs.add(q);
        keys.add(key);
      } else {
        int i = rnd.nextInt(live.size());
        sv.put(keys.get(i), "v" + step);
        WatchEvent e = qs.get(i).take(1, WAIT).get(0);
        assertEquals(keys.get(i) + "=v" + step, e.kv().keyString() + "=" + e.kv().valueString());
        if (rnd.nextBoolean()) {
          live.remove(i).close();
          assertEquals(List.of(), qs.remove(i).drainAny(WAIT), "after close");
          keys.remove(i);
        }
      }
    }
    for (int i = 0; i < live.size(); i++) {
      live.get(i).close();
      assertEquals(List.of(), qs.get(i).drainAny(WAIT), "watcher of " + keys.get(i) + " got others' events");
    }
    for (Watcher w : old) {
      w.close();
    }
  }

  /** Closes a third by close() and a third from inside their listeners ("bye"). */
  private static void closeThirds(Subvolume sv, Watcher[] ws, List<WatchQueue> qs) throws Exception {
    for (int i = 0; i < N; i += 3) {
      ws[i].close();
      assertTrue(ws[i].isDone(), "close() returns once the listener heard its end");
      sv.put("s/" + (i + 1), "bye");
    }
    for (int i = 1; i < N; i += 3) {
      assertEquals("bye", qs.get(i).take(1, WAIT).get(0).kv().valueString());
      assertTrue(ws[i].awaitDone(WAIT), "watcher " + i + " closed by its listener");
    }
  }

  /** A listener that blocks and a fast one on the same key: the slow one alone ends. */
  private static void slowAndFast(Subvolume sv) throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    LinkedBlockingQueue<Object> slowItems = new LinkedBlockingQueue<>();
    WatchListener slowListener = new WatchListener() {
      @Override
      public void onEvents(List<WatchEvent> events) {
        slowItems.addAll(events);
        try {
          release.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }

      @Override
      public void onError(CowkvException error) {
        slowItems.add(error);
      }
    };
    WatchQueue fastQ = new WatchQueue();
    int puts = 20;
    try (Watcher slow = sv.watch("big", new WatchOptions(), slowListener);
        Watcher fast = sv.watch("big", new WatchOptions(), fastQ)) {
      for (int i = 0; i < puts; i++) {
        byte[] v = new byte[1 << 20];
        Arrays.fill(v, (byte) i);
        sv.put("big".getBytes(java.nio.charset.StandardCharsets.UTF_8), v);
      }
      List<WatchEvent> got = fastQ.take(puts, WAIT);
      for (int i = 0; i < puts; i++) {
        assertEquals((byte) i, got.get(i).kv().value()[0], "the fast watcher's event " + i);
      }
      release.countDown();
      int seen = 0;
      for (;;) {
        Object it = slowItems.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
        if (it instanceof WatchEvent) {
          seen++;
          continue;
        }
        assertInstanceOf(SlowReaderException.class, it, "the slow watcher after " + seen + " events");
        break;
      }
      assertTrue(seen < puts, "the slow watcher got every event");
      assertTrue(slow.awaitDone(WAIT));
      assertTrue(!fast.isDone(), "the fast watcher goes on");
    }
  }

  /** The server stops: every watcher of the stream ends with the same error class. */
  private static void streamFailure(CowkvdServer server, Subvolume sv) throws Exception {
    List<WatchQueue> qs = new ArrayList<>();
    List<Watcher> ws = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      WatchQueue q = new WatchQueue();
      qs.add(q);
      ws.add(sv.watch("f/" + i, new WatchOptions(), q));
    }
    server.stop();
    List<Class<?>> classes = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      WatchQueue q = qs.get(i);
      CowkvException e = assertThrows(CowkvException.class, () -> q.take(1, WAIT), "watcher " + i);
      classes.add(e.getClass());
      assertTrue(ws.get(i).awaitDone(WAIT));
    }
    assertEquals(List.of(classes.get(0), classes.get(0), classes.get(0), classes.get(0),
        classes.get(0)), classes, "one error class for every watcher of the failed stream");
  }
}
