package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Watch against a live cowkvd.
 *
 * <p>Goal: {@link Subvolume#watch} does what docs/api.md "Watch" says through this client:
 * events of puts, deletes and txns in revision order with prev_kv, prefixes, a replay from an
 * older revision, filters, close() ending the watcher with onCompleted, typed ends ({@link
 * CompactedException} with the compact revision, {@link SubvolumeDeletedException}), a
 * fragmented revision joined, refused creates. Method: direct cases, and a seeded random walk of
 * puts, deletes and txns whose watcher's events must equal the model's change list. Replay:
 * {@code COWKV_WATCH_SEED=N}.
 */
class WatchTest {
  private static final Duration WAIT = Duration.ofSeconds(10);
  private static CowkvClient client;
  private static final AtomicInteger N = new AtomicInteger();

  @BeforeAll
  static void setUp() {
    // Short deadlines: a watcher must outlive them.
    client = CowkvClient.connect(CowkvOptions.builder().address(CowkvdServer.shared().address())
        .defaultDeadline(Duration.ofMillis(1500)).streamDeadline(Duration.ofMillis(1500)).build());
  }

  @AfterAll
  static void tearDown() {
    client.close();
  }

  private static Subvolume fresh() {
    String name = "java-watch-" + N.incrementAndGet();
    client.createSubvolume(name);
    return client.subvolume(name);
  }

  private static String show(List<WatchEvent> evs) {
    List<String> out = new ArrayList<>();
    for (WatchEvent e : evs) {
      String prev = e.prevKv() == null ? "-" : e.prevKv().valueString();
      out.add(e.type() + " " + e.kv().keyString() + "=" + e.kv().valueString() + "@" + e.revision()
          + "(prev " + prev + ")");
    }
    return String.join("; ", out);
  }

  @Test
  void clientChecks() {
    CowkvClient dead = CowkvClient.connect(CowkvOptions.builder().address("127.0.0.1:1").build());
    Subvolume sv = dead.subvolume("");
    WatchQueue q = new WatchQueue();
    assertThrows(InvalidArgumentException.class, () -> sv.watch("", new WatchOptions(), q));
    assertThrows(InvalidArgumentException.class, () -> sv.watch("k".repeat(1025), new WatchOptions(), q));
    assertThrows(InvalidArgumentException.class,
        () -> sv.watch("a", new WatchOptions().prefix().rangeEnd(new byte[] {'b'}), q));
    assertTrue(Arrays.equals("a0".getBytes(StandardCharsets.UTF_8),
        WatchOptions.prefixEnd("a/".getBytes(StandardCharsets.UTF_8))));
    assertTrue(Arrays.equals(new byte[] {0}, WatchOptions.prefixEnd(new byte[] {(byte) 0xff})));
    dead.close();
  }

  @Test
  void eventsInRevisionOrderWithPrevKv() throws Exception {
    Subvolume sv = fresh();
    WatchQueue q = new WatchQueue();
    try (Watcher w = sv.watch("cfg/", new WatchOptions().prefix().prevKv(), q)) {
      Thread.sleep(2000); // past the deadlines
      long r1 = sv.put("cfg/a", "1");
      long r2 = sv.put("cfg/a", "2");
      sv.put("cfg0", "outside");
      long r3 = sv.delete("cfg/a");
      TxnResult t = sv.txn().then(Op.put("cfg/b", "x"), Op.put("cfg/c", "y")).commit();
      assertEquals("PUT cfg/a=1@" + r1 + "(prev -); PUT cfg/a=2@" + r2 + "(prev 1); DELETE cfg/a=@" + r3
          + "(prev 2); PUT cfg/b=x@" + t.revision() + "(prev -); PUT cfg/c=y@" + t.revision() + "(prev -)",
          show(q.take(5, WAIT)));
      assertTrue(w.revision() >= r1);
    }
    assertEquals(List.of(), q.drain(WAIT), "close() ends with onCompleted");
  }

  @Test
  void historyAndCompacted() throws Exception {
    Subvolume sv = fresh();
    long r1 = sv.put("h", "1");
    long r2 = sv.put("h", "2");
    long r3 = sv.put("h", "3");
    WatchQueue q = new WatchQueue();
    try (Watcher w = sv.watch("h", new WatchOptions().startRevision(r1), q)) {
      assertEquals("PUT h=1@" + r1 + "(prev -); PUT h=2@" + r2 + "(prev -); PUT h=3@" + r3 + "(prev -)",
          show(q.take(3, WAIT)));
    }
    assertEquals(r2, sv.compact(r2));
    for (long start : new long[] {r1, r2}) {
      WatchQueue c = new WatchQueue();
      Watcher w = sv.watch("h", new WatchOptions().startRevision(start), c);
      CompactedException e = assertThrows(CompactedException.class, () -> c.take(1, WAIT));
      assertEquals(r2 + 1, e.compactRevision());
      assertInstanceOf(TooOldException.class, e);
      assertFalse(e.isRetryableTransaction());
      assertTrue(w.awaitDone(WAIT));
      w.close(); // no second end
    }
    WatchQueue q2 = new WatchQueue();
    try (Watcher w = sv.watch("h", new WatchOptions().startRevision(r2 + 1), q2)) {
      assertEquals("PUT h=3@" + r3 + "(prev -)", show(q2.take(1, WAIT)));
    }
  }

  @Test
  void filters() throws Exception {
    Subvolume sv = fresh();
    WatchQueue np = new WatchQueue();
    WatchQueue nd = new WatchQueue();
    try (Watcher a = sv.watch("f", new WatchOptions().noPut(), np);
        Watcher b = sv.watch("f", new WatchOptions().noDelete(), nd)) {
      long p1 = sv.put("f", "1");
      long d = sv.delete("f");
      long p2 = sv.put("f", "2");
      assertEquals("DELETE f=@" + d + "(prev -)", show(np.take(1, WAIT)));
      assertEquals("PUT f=1@" + p1 + "(prev -); PUT f=2@" + p2 + "(prev -)", show(nd.take(2, WAIT)));
    }
  }

  @Test
  void deletedSubvolume() throws Exception {
    Subvolume sv = fresh();
    WatchQueue q = new WatchQueue();
    try (Watcher w = sv.watch("k", new WatchOptions(), q)) {
      sv.put("k", "v");
      q.take(1, WAIT);
      client.deleteSubvolume(sv.name());
      assertThrows(SubvolumeDeletedException.class, () -> q.take(1, WAIT));
    }
  }

  @Test
  void fragmentsJoined() throws Exception {
    Subvolume sv = fresh();
    List<List<WatchEvent>> batches = new ArrayList<>();
    WatchQueue q = new WatchQueue();
    WatchListener both = new WatchListener() {
      @Override
      public void onEvents(List<WatchEvent> events) {
        synchronized (batches) {
          batches.add(events);
        }
        q.onEvents(events);
      }
    };
    try (Watcher w = sv.watch("big/", new WatchOptions().prefix(), both)) {
      Op[] ops = new Op[3];
      for (int i = 0; i < 3; i++) {
        byte[] v = new byte[700_000];
        Arrays.fill(v, (byte) ('a' + i));
        ops[i] = Op.put(("big/" + i).getBytes(StandardCharsets.UTF_8), v);
      }
      TxnResult t = sv.txn().then(ops).commit();
      List<WatchEvent> evs = q.take(3, WAIT);
      for (int i = 0; i < 3; i++) {
        assertEquals(t.revision(), evs.get(i).revision());
        assertEquals(700_000, evs.get(i).kv().value().length);
        assertEquals((byte) ('a' + i), evs.get(i).kv().value()[0]);
      }
      synchronized (batches) {
        assertEquals(1, batches.size(), "one revision, one onEvents call");
      }
    }
  }

  @Test
  void refusedCreates() {
    WatchQueue q = new WatchQueue();
    assertThrows(NotFoundException.class, () -> client.subvolume("no-such").watch("k", new WatchOptions(), q));
    Subvolume sv = fresh();
    assertThrows(InvalidArgumentException.class,
        () -> sv.watch("b", new WatchOptions().rangeEnd(new byte[] {'a'}), q));
  }

  @Test
  void model() throws Exception {
    String env = System.getenv("COWKV_WATCH_SEED");
    long seed = env != null ? Long.parseLong(env) : System.nanoTime();
    Random rnd = new Random(seed);
    Subvolume sv = fresh();
    WatchQueue q = new WatchQueue();
    TreeMap<String, String> model = new TreeMap<>();
    List<String> want = new ArrayList<>();
    List<Long> revs = new ArrayList<>();
    int mid = 0;
    try (Watcher w = sv.watch("m/", new WatchOptions().prefix().prevKv(), q)) {
      for (int i = 0; i < 100; i++) {
        String k = "m/" + rnd.nextInt(4);
        int op = rnd.nextInt(10);
        if (op < 5) {
          change(model, want, revs, k, "v" + i, sv.put(k, "v" + i));
        } else if (op < 8) {
          if (model.containsKey(k)) {
            change(model, want, revs, k, null, sv.delete(k));
          }
        } else {
          String k2 = "m/" + (4 + rnd.nextInt(2));
          TxnResult t = sv.txn().then(Op.put(k, "t" + i), Op.put(k2, "t" + i)).commit();
          change(model, want, revs, k, "t" + i, t.revision());
          change(model, want, revs, k2, "t" + i, t.revision());
        }
        if (i == 50) {
          mid = want.size();
        }
      }
      assertEquals(want, lines(q.take(want.size(), WAIT)), "seed " + seed);
    }
    if (mid < want.size()) {
      WatchQueue late = new WatchQueue();
      try (Watcher w = sv.watch("m/", new WatchOptions().prefix().prevKv().startRevision(revs.get(mid)), late)) {
        assertEquals(want.subList(mid, want.size()), lines(late.take(want.size() - mid, WAIT)), "seed " + seed);
      }
    }
  }

  private static List<String> lines(List<WatchEvent> evs) {
    List<String> out = new ArrayList<>();
    for (WatchEvent e : evs) {
      out.add(show(List.of(e)));
    }
    return out;
  }

  private static void change(TreeMap<String, String> model, List<String> want, List<Long> revs, String k,
      String v, long rev) {
    String prev = model.getOrDefault(k, "-");
    if (v == null) {
      want.add("DELETE " + k + "=@" + rev + "(prev " + prev + ")");
      model.remove(k);
    } else {
      want.add("PUT " + k + "=" + v + "@" + rev + "(prev " + prev + ")");
      model.put(k, v);
    }
    revs.add(rev);
  }
}
