package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Send and receive against two live cowkvd servers: a random subvolume's snapshots sent whole
 * into the same server under a new name and piped into the other, an incremental stream, a
 * resumable receive truncated mid-stream and resumed from its listed token, one whose source
 * throws mid-upload (the call cancelled) aborted, and damaged and stale tokens and a partial
 * receive's name refused with their classes and reasons. Every copy has its source's digest.
 * -Dcowkv.sendSeed=N replays a seed.
 */
class SendReceiveTest {
  private static CowkvdServer sa;
  private static CowkvdServer sb;
  private static CowkvClient a;
  private static CowkvClient b;
  private static Random rng;

  @BeforeAll
  static void start() {
    sa = CowkvdServer.start("256M", null);
    sb = CowkvdServer.start("256M", null);
    a = CowkvClient.connect(sa.address());
    b = CowkvClient.connect(sb.address());
    long seed = Long.getLong("cowkv.sendSeed", System.nanoTime());
    System.out.println("SendReceiveTest seed " + seed);
    rng = new Random(seed);
    a.createSubvolume("src");
    for (int round = 1; round <= 2; round++) {
      fill(a.subvolume("src"), round);
      a.snapshot("src", "s" + round, true);
    }
  }

  @AfterAll
  static void stop() {
    for (CowkvClient c : new CowkvClient[] {a, b}) {
      if (c != null) {
        c.close();
      }
    }
    for (CowkvdServer s : new CowkvdServer[] {sa, sb}) {
      if (s != null) {
        s.close();
      }
    }
  }

  private static void fill(Subvolume sv, int round) {
    for (int i = 0; i < 40; i++) {
      String k = String.format("k%03d", rng.nextInt(60));
      if (rng.nextInt(4) == 0) {
        try {
          sv.delete(k);
        } catch (NotFoundException e) {
          // absent already
        }
      } else {
        sv.put(k, "v" + round + "-" + rng.nextLong());
      }
    }
    byte[] big = new byte[(1 << 20) + rng.nextInt(2 << 20)];
    rng.nextBytes(big);
    sv.files().write("/big" + round, big);
    sv.files().write("/small", ("round " + round).getBytes());
  }

  private static byte[] collect(CowkvClient c, String snapshot, SendOptions o) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    c.sendTo(out, snapshot, o);
    return out.toByteArray();
  }

  private static PartialReceive waitPartial(CowkvClient c, String name) throws InterruptedException {
    for (int i = 0; i < 1000; i++) {
      for (PartialReceive p : c.partialReceives()) {
        if (p.name().equals(name) && !p.inUse()) {
          return p;
        }
      }
      Thread.sleep(20);
    }
    throw new AssertionError("partial receive " + name + " not listed");
  }

  @Test
  void fullAndIncremental() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    SendStats stats = a.sendTo(out, "s1", SendOptions.full());
    assertEquals(out.size(), stats.bytes());
    ReceiveResult got = a.receive(new ByteArrayInputStream(out.toByteArray()), ReceiveOptions.named("s1copy"));
    assertEquals("s1copy", got.name());
    assertFalse(got.incremental());
    assertEquals(a.digest("s1"), a.digest("s1copy"));
    try (SendStream s = a.send("s1", SendOptions.full())) {
      got = b.receive(s, ReceiveOptions.defaults());
      assertNotNull(s.stats());
    }
    assertEquals("s1", got.name());
    assertEquals(a.digest("s1"), b.digest("s1"));
    try (SendStream s = a.send("s2", SendOptions.incremental("s1"))) {
      got = b.receive(s, ReceiveOptions.defaults());
    }
    assertTrue(got.incremental());
    assertEquals("s1", got.parent());
    assertEquals(a.digest("s2"), b.digest("s2"));
    assertThrows(NotFoundException.class, () -> collect(a, "nosuch", SendOptions.full()));
  }

  @Test
  void resumeAndAbort() throws InterruptedException {
    byte[] full = collect(a, "s2", SendOptions.full());
    byte[] cut = Arrays.copyOf(full, full.length / 4 + rng.nextInt(full.length / 2));
    CowkvException e = assertThrows(DataLossException.class,
        () -> b.receive(new ByteArrayInputStream(cut), ReceiveOptions.named("cut").withResumable()));
    assertEquals("STREAM_CORRUPT", e.errorReason());
    PartialReceive p = waitPartial(b, "cut");
    char[] bad = p.token().toCharArray();
    bad[bad.length / 2] ^= 1;
    e = assertThrows(InvalidArgumentException.class,
        () -> collect(a, "", SendOptions.resume(new String(bad))));
    assertEquals("RESUME_TOKEN", e.errorReason());
    e = assertThrows(AlreadyExistsException.class,
        () -> b.receive(new ByteArrayInputStream(full), ReceiveOptions.named("cut")));
    assertEquals("PARTIAL_RECEIVE", e.errorReason());
    try (SendStream s = a.send("", SendOptions.resume(p.token()))) {
      assertEquals("cut", b.receive(s, ReceiveOptions.defaults()).name());
    }
    assertEquals(a.digest("s2"), b.digest("cut"));
    try (SendStream s = a.send("", SendOptions.resume(p.token()))) {
      e = assertThrows(NotFoundException.class, () -> b.receive(s, ReceiveOptions.defaults()));
    }
    assertEquals("RESUME_MISMATCH", e.errorReason());

    // A source that fails mid-upload: the call is cancelled, the exception rethrown as it is.
    IllegalStateException dropped = new IllegalStateException("upload dropped");
    Iterator<byte[]> dying = new Iterator<>() {
      private int n;

      @Override
      public boolean hasNext() {
        return true;
      }

      @Override
      public byte[] next() {
        if (n++ == 0) {
          return Arrays.copyOf(full, full.length / 2);
        }
        try {
          Thread.sleep(300);
        } catch (InterruptedException ie) {
          throw new NoSuchElementException();
        }
        throw dropped;
      }
    };
    assertSame(dropped, assertThrows(IllegalStateException.class,
        () -> b.receive(dying, ReceiveOptions.named("drop").withResumable())));
    waitPartial(b, "drop");
    b.abortReceive("drop");
    e = assertThrows(NotFoundException.class, () -> b.abortReceive("drop"));
    assertEquals("RESUME_MISMATCH", e.errorReason());
    assertEquals(List.of(), b.partialReceives());
  }
}
