package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The client against a live cowkvd, beyond the conformance scenarios: the retry helper under
 * real contention, streams and large files, iterators, tokens, deadlines, Admin.
 */
class ClientTest {
  private static CowkvClient client;
  private static Subvolume sv;

  @BeforeAll
  static void setUp() {
    client = CowkvdServer.shared().client();
    client.createSubvolume("java-client-test");
    sv = client.subvolume("java-client-test");
  }

  @AfterAll
  static void tearDown() {
    client.close();
  }

  @Test
  void keysHaveRevisionsAndAbsentKeysAreEmpty() {
    assertEquals(Optional.empty(), sv.get("nope"));
    long rev = sv.put("k".getBytes(), "v".getBytes(), Durability.DURABLE);
    assertEquals(Optional.of("v"), sv.getString("k"));
    KeyValue kv = sv.getKv("k");
    assertEquals(rev, kv.createRevision());
    assertEquals(1, kv.version());
    assertThrows(NotFoundException.class, () -> sv.delete("nope"));
    assertTrue(sv.deleteIfExists("nope").isEmpty());
  }

  /** The server's ErrorInfo gives the class, errorReason() and errnoName() (ErrorsTest: fallback). */
  @Test
  void errorInfoFromTheServer() {
    client.createSubvolume("java-errors");
    client.snapshot("java-errors", "java-errors@ro", true);
    Subvolume ro = client.subvolume("java-errors@ro");
    Subvolume w = client.subvolume("java-errors");
    ReadOnlyException put = assertThrows(ReadOnlyException.class, () -> ro.put("k", "v"));
    assertEquals("READ_ONLY_SNAPSHOT", put.errorReason());
    ReadOnlyException mk = assertThrows(ReadOnlyException.class, () -> ro.files().mkdir("/d"));
    assertEquals(List.of("READ_ONLY_SNAPSHOT", "EROFS"), List.of(mk.errorReason(), mk.errnoName()));
    w.files().mkdir("/d");
    w.files().create("/d/f");
    FailedPreconditionException ne = assertThrows(FailedPreconditionException.class,
        () -> w.files().rmdir("/d"));
    assertEquals(List.of("ENOTEMPTY", "ENOTEMPTY"), List.of(ne.errorReason(), ne.errnoName()));
    NotFoundException nf = assertThrows(NotFoundException.class, () -> w.files().stat("/none"));
    assertEquals(List.of("ENOENT", "ENOENT"), List.of(nf.errorReason(), nf.errnoName()));
    AlreadyExistsException ae = assertThrows(AlreadyExistsException.class,
        () -> client.createSubvolume("java-errors"));
    assertEquals("ALREADY_EXISTS", ae.errorReason());
  }

  @Test
  void transactionHelperUnderContention() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(4);
    TransactionOptions opts = TransactionOptions.DEFAULT.withRetry(RetryPolicy.DEFAULT.withMaxAttempts(50));
    List<Future<Long>> results = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      results.add(pool.submit(() -> sv.runInTransaction(opts, tx -> {
        long n = tx.getString("counter").map(Long::parseLong).orElse(0L);
        tx.put("counter", Long.toString(n + 1));
        return n + 1;
      })));
    }
    for (Future<Long> f : results) {
      f.get();
    }
    pool.shutdown();
    assertEquals(Optional.of("8"), sv.getString("counter"));
  }

  @Test
  void bodyExceptionsAbortWithoutRetry() {
    AtomicInteger runs = new AtomicInteger();
    assertThrows(IllegalStateException.class, () -> sv.runTransaction(tx -> {
      runs.incrementAndGet();
      tx.put("never", "x");
      throw new IllegalStateException("no thanks");
    }));
    assertEquals(1, runs.get());
    assertEquals(Optional.empty(), sv.get("never"));
  }

  @Test
  void rangesPageAndStream() {
    for (int i = 0; i < 25; i++) {
      sv.put(String.format("r/%02d", i), "x");
    }
    List<KeyValue> all = sv.range(Range.prefix("r/").pageSize(4).reverse()).toList();
    assertEquals(25, all.size());
    assertEquals("r/24", all.get(0).keyString());
    RangeResults.Pager it = sv.range(Range.prefix("r/").pageSize(10).limit(15)).iterator();
    int n = 0;
    while (it.hasNext()) {
      it.next();
      n++;
    }
    assertEquals(15, n);
    assertEquals(2, it.pages());
    assertTrue(it.revision() > 0);
    assertEquals(25, sv.count(Range.prefix("r/")));
    assertEquals(10, sv.range(Range.prefix("r/1")).stream().count());
    assertEquals(25, sv.deletePrefix("r/").deleted());
  }

  @Test
  void largeFilesStreamBothWays() {
    Files fs = sv.files();
    byte[] data = new byte[(5 << 20) + 3];
    for (int i = 0; i < data.length; i++) {
      data[i] = (byte) (i % 251);
    }
    WriteResult w = fs.upload("/big", new ByteArrayInputStream(data));
    assertEquals(data.length, w.bytesWritten());
    assertEquals(data.length, w.stat().size());
    assertArrayEquals(data, fs.readAllBytes("/big"));
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    assertEquals(100, fs.readTo("/big", 1000, 100, out));
    assertEquals(data[1000], out.toByteArray()[0]);
    fs.mkdirs("/a/b/c");
    fs.mkdirs("/a/b");
    assertTrue(fs.exists("/a/b/c"));
    assertFalse(fs.exists("/a/x"));
    assertEquals(List.of("b"), fs.list("/a"));
    fs.unlink("/big");
  }

  @Test
  void admin() {
    assertEquals("cowkv.v1", client.version().api());
    assertTrue(client.stats().get("nodesize") >= 4096);
    assertTrue(client.stats().containsKey("kv_commits"));
    assertTrue(client.sync() > 0);
    assertTrue(client.check(Duration.ofMinutes(2)).ok());
  }

  @Test
  void tokensDeadlinesAndUnavailable() throws Exception {
    try (CowkvdServer secured = CowkvdServer.start("64M", "t0ken")) {
      try (CowkvClient anon = CowkvClient.connect(secured.address())) {
        assertThrows(UnauthenticatedException.class, anon::listSubvolumes);
      }
      CowkvOptions good = CowkvOptions.builder().address(secured.address()).token("t0ken").build();
      try (CowkvClient c = CowkvClient.connect(good)) {
        assertTrue(c.listSubvolumes().stream().anyMatch(s -> s.name().equals("default")));
      }
      CowkvOptions hurried = CowkvOptions.builder().address(secured.address()).token("t0ken")
          .defaultDeadline(Duration.ofNanos(1)).build();
      try (CowkvClient c = CowkvClient.connect(hurried)) {
        assertThrows(DeadlineExceededException.class, () -> c.subvolume("").put("k", "v"));
      }
    }
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    try (CowkvClient gone = CowkvClient.connect("127.0.0.1:" + port)) {
      assertThrows(UnavailableException.class, gone::sync);
    }
  }

  @Test
  void tls() {
    // Fails, saying so, when openssl is missing (no silent pass).
    try (CowkvdServer secured = CowkvdServer.startTls("64M")) {
      CowkvOptions opts = CowkvOptions.builder().address(secured.address())
          .tls(secured.caCertificate()).authority("localhost").build();
      try (CowkvClient c = CowkvClient.connect(opts)) {
        c.subvolume("").put("k", "over tls");
        assertEquals(Optional.of("over tls"), c.subvolume("").getString("k"));
      }
      try (CowkvClient plain = CowkvClient.connect(secured.address())) {
        CowkvException e = assertThrows(CowkvException.class, plain::sync);
        assertTrue(e instanceof UnavailableException || e instanceof InternalException, e.toString());
      }
    }
  }
}
