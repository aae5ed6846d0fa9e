package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The CompletableFuture API (KvAsync, SubvolumesAsync, Txn.commitAsync) and per-call deadlines
 * (withDeadline on the client, subvolume, files, leases and the async views) against a live
 * cowkvd: answers equal the blocking API's, errors complete the future exceptionally with the
 * blocking API's class, a deadline against a SIGSTOPped server is DeadlineExceededException in
 * about the deadline, cancel() cancels the call, and a longer per-call deadline outlives a pause
 * the default would not.
 */
class AsyncTest {
  private static final Duration SHORT = Duration.ofMillis(300);

  /** The exception a failed future completes with (within 10 s). */
  private static Throwable failure(CompletableFuture<?> f) throws Exception {
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    return e.getCause();
  }

  private static <T> T get(CompletableFuture<T> f) throws Exception {
    return f.get(10, TimeUnit.SECONDS);
  }

  @Test
  void callsAndErrors() throws Exception {
    try (CowkvClient client = CowkvClient.connect(CowkvdServer.shared().address())) {
      SubvolumesAsync subs = client.async();
      assertEquals("java-async", get(subs.create("java-async")).name());
      assertInstanceOf(AlreadyExistsException.class, failure(subs.create("java-async")));
      assertTrue(get(subs.list()).stream().anyMatch(s -> s.name().equals("java-async")));
      KvAsync kv = client.subvolume("java-async").async();
      long r1 = get(kv.put("a", "1"));
      long r2 = get(kv.put("b", "2"));
      assertTrue(r2 > r1);
      assertEquals(Optional.of("1"), get(kv.getString("a")));
      assertEquals(Optional.empty(), get(kv.get("nope")));
      assertInstanceOf(NotFoundException.class, failure(kv.getKv("nope")));
      assertInstanceOf(NotFoundException.class, failure(kv.delete("nope")));
      // Refused by the client: a failed future, nothing sent.
      assertInstanceOf(InvalidArgumentException.class, failure(kv.getKv(new byte[0])));
      assertEquals(r1, get(kv.getAtRevision("a".getBytes(StandardCharsets.UTF_8), r1)).kv().modRevision());
      assertEquals(2, get(kv.count(Range.prefix(""))));
      RangePage p = get(kv.rangePage(Range.prefix("").pageSize(1).limit(1), null));
      assertEquals(1, p.kvs().size());
      assertTrue(p.more());
      TxnResult t = get(kv.txn().when(Compare.value("a").eq("1")).then(Op.put("c", "3")).commitAsync());
      assertTrue(t.succeeded());
      assertEquals(3, client.subvolume("java-async").count(Range.prefix("")), "the blocking API sees it");
      assertEquals(3, get(kv.deleteRange(Range.between("a", "d"), Durability.DEFAULT)).deleted());
      get(subs.snapshot("java-async", "java-async-ro", true));
      assertInstanceOf(ReadOnlyException.class,
          failure(client.subvolume("java-async-ro").async().put("k", "v")));
      assertTrue(get(subs.show("java-async-ro")).readOnly());
      get(subs.delete("java-async-ro"));
      assertInstanceOf(NotFoundException.class, failure(subs.show("java-async-ro")));
      assertInstanceOf(InvalidArgumentException.class,
          assertThrows(InvalidArgumentException.class, () -> kv.withDeadline(Duration.ZERO)));
    }
  }

  @Test
  void deadlinesAndCancellation() throws Exception {
    CowkvdServer server = CowkvdServer.start("64M", null);
    // A long default: only the per-call deadlines can end the calls below in time.
    CowkvOptions opts = CowkvOptions.builder().address(server.address())
        .defaultDeadline(Duration.ofSeconds(60)).build();
    try (CowkvClient client = CowkvClient.connect(opts);
        CowkvClient hurried = CowkvClient.connect(CowkvOptions.builder().address(server.address())
            .defaultDeadline(SHORT).build())) {
      client.createSubvolume("d");
      Subvolume sv = client.subvolume("d");
      sv.put("k", "v");
      sv.files().write("f", "data".getBytes(StandardCharsets.UTF_8));
      hurried.subvolume("d").get("k"); // its channel is up
      server.pause();
      try {
        expectDeadline("async get", () -> failure(sv.async().withDeadline(SHORT).get("k")));
        expectDeadline("async view", () -> failure(sv.withDeadline(SHORT).async().put("k", "w")));
        expectDeadline("async txn", () -> failure(sv.withDeadline(SHORT).async().txn()
            .then(Op.put("k", "x")).commitAsync()));
        expectDeadline("async list", () -> failure(client.async().withDeadline(SHORT).list()));
        expectDeadline("get", () -> assertThrows(CowkvException.class, () -> sv.withDeadline(SHORT).get("k")));
        expectDeadline("stat", () -> assertThrows(CowkvException.class,
            () -> sv.files().withDeadline(SHORT).stat("f")));
        expectDeadline("read (a stream)", () -> assertThrows(CowkvException.class,
            () -> sv.files().withDeadline(SHORT).readAllBytes("f")));
        expectDeadline("client", () -> assertThrows(CowkvException.class,
            () -> client.withDeadline(SHORT).listSubvolumes()));
        expectDeadline("leases", () -> assertThrows(CowkvException.class,
            () -> sv.leases().withDeadline(SHORT).list()));
        expectDeadline("default", () -> failure(hurried.subvolume("d").async().get("k")));

        // Cancellation: the future ends at once as cancelled; the call is cancelled.
        CompletableFuture<Optional<byte[]>> slow = sv.async().get("k");
        assertTrue(slow.cancel(true));
        assertThrows(CancellationException.class, () -> slow.get(1, TimeUnit.SECONDS));

        // A longer per-call deadline than the default outlives a short pause.
        CompletableFuture<Optional<byte[]>> patient =
            hurried.subvolume("d").async().withDeadline(Duration.ofSeconds(20)).get("k");
        Thread.sleep(800);
        server.resume();
        assertArrayEquals("v".getBytes(StandardCharsets.UTF_8), get(patient).orElseThrow());
      } finally {
        server.resume();
      }
    } finally {
      server.close();  // stops it and removes its device
    }
  }

  private interface Failing {
    Throwable run() throws Exception;
  }

  /** {@code f} must fail with DeadlineExceededException in [SHORT, 5 s). */
  private static void expectDeadline(String what, Failing f) throws Exception {
    long t0 = System.nanoTime();
    Throwable e = f.run();
    Duration took = Duration.ofNanos(System.nanoTime() - t0);
    assertInstanceOf(DeadlineExceededException.class, e, what + ": " + e);
    assertTrue(took.compareTo(SHORT.minusMillis(20)) >= 0 && took.compareTo(Duration.ofSeconds(5)) < 0,
        what + ": took " + took);
  }
}
