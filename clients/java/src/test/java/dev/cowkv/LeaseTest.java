package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Leases against a live cowkvd.
 *
 * <p>Goal: the lease surface (grant, put/Op.put with a lease, timeToLive, list, revoke,
 * keepAliveOnce, the background KeepAlive) does what docs/api.md "Leases" says, with expiry and
 * errors. Method: direct cases with TTLs of 1-2 s, and a seeded random walk of grants, puts with
 * and without leases, deletes and revokes checked against a model after every step. Replay:
 * {@code COWKV_LEASE_SEED=N}.
 */
class LeaseTest {
  private static CowkvClient client;
  private static final AtomicInteger N = new AtomicInteger();

  @BeforeAll
  static void setUp() {
    // Short deadlines: the background keep-alive must not inherit them.
    client = CowkvClient.connect(CowkvOptions.builder().address(CowkvdServer.shared().address())
        .defaultDeadline(Duration.ofSeconds(5)).streamDeadline(Duration.ofMillis(800)).build());
  }

  @AfterAll
  static void tearDown() {
    client.close();
  }

  private static Subvolume fresh() {
    String name = "java-lease-" + N.incrementAndGet();
    client.createSubvolume(name);
    return client.subvolume(name);
  }

  private static List<String> keys(Subvolume sv) {
    List<String> out = new ArrayList<>();
    for (KeyValue kv : sv.range(Range.prefix("k").keysOnly())) {
      out.add(new String(kv.key(), StandardCharsets.UTF_8));
    }
    return out;
  }

  private static List<String> strs(List<byte[]> keys) {
    return keys.stream().map(k -> new String(k, StandardCharsets.UTF_8)).toList();
  }

  @Test
  void clientChecks() {
    Leases l = client.subvolume("").leases();
    for (long ttl : new long[] {0, -1, Leases.MAX_TTL_SECONDS + 1}) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> l.grant(ttl));
      assertNull(e.code(), "refused by the client: " + e);
    }
    assertThrows(InvalidArgumentException.class, () -> l.grant(10, -1));
  }

  @Test
  void grantPutTimeToLiveRevoke() {
    Subvolume sv = fresh();
    Leases l = sv.leases();
    LeaseGrant g = l.grant(60);
    assertTrue(g.id() > 0);
    assertEquals(60, g.ttl());
    assertEquals(77, l.grant(30, 77).id());
    assertThrows(AlreadyExistsException.class, () -> l.grant(30, 77));
    sv.put("k1", "a", g.id());
    sv.txn().then(Op.put("k2", "b", g.id()), Op.put("k3", "c")).commit();
    sv.put("k4".getBytes(), "d".getBytes(), Durability.DURABLE, 77);
    LeaseInfo info = l.timeToLive(g.id(), true);
    assertEquals(g.id(), info.id());
    assertEquals(60, info.grantedTtl());
    assertTrue(info.ttl() > 0 && info.ttl() <= 60, info.toString());
    assertEquals(List.of("k1", "k2"), strs(info.keys()));
    assertTrue(l.timeToLive(g.id(), false).keys().isEmpty());
    assertEquals(new ArrayList<>(new TreeSet<>(List.of(77L, g.id()))), l.list());
    assertEquals(60, l.keepAliveOnce(g.id()));
    assertTrue(l.revoke(g.id()) > 0);
    assertEquals(List.of("k3", "k4"), keys(sv));
    assertEquals(List.of(77L), l.list());
  }

  @Test
  void expiryDeletesTheKeys() throws Exception {
    Subvolume sv = fresh();
    LeaseGrant g = sv.leases().grant(1);
    sv.put("k", "v", g.id());
    Thread.sleep(1800);
    assertTrue(sv.get("k").isEmpty());
    assertThrows(NotFoundException.class, () -> sv.leases().timeToLive(g.id(), false));
  }

  @Test
  void keepAliveKeepsALeasePastItsTtl() throws Exception {
    Subvolume sv = fresh();
    Leases l = sv.leases();
    LeaseGrant g = l.grant(1);
    sv.put("k", "v", g.id());
    KeepAlive ka;
    try (KeepAlive k = l.keepAlive(g.id())) {
      ka = k;
      Thread.sleep(2500);
      assertEquals("v", sv.getString("k").orElse(null), "2.5 s into a kept-alive 1 s lease");
      assertEquals(1, k.ttl());
      assertFalse(k.isDone() || k.lost());
      assertNull(k.error());
    }
    assertTrue(ka.isDone());
    assertNull(ka.error(), "close() is not an error");
    ka.close(); // twice is fine
    Thread.sleep(1800);
    assertTrue(sv.get("k").isEmpty(), "expired after the keep-alive closed");

    // A lease that goes: the keep-alive ends by itself, lost.
    LeaseGrant gone = l.grant(5);
    l.revoke(gone.id());
    try (KeepAlive k = l.keepAlive(gone.id())) {
      assertTrue(k.awaitDone(Duration.ofSeconds(10)));
      assertTrue(k.lost());
      assertNull(k.error());
    }
  }

  @Test
  void unknownLeaseIsNotFound() {
    Subvolume sv = fresh();
    Leases l = sv.leases();
    long id = 424242;
    assertThrows(NotFoundException.class, () -> l.revoke(id));
    assertThrows(NotFoundException.class, () -> l.timeToLive(id, true));
    assertThrows(NotFoundException.class, () -> l.keepAliveOnce(id));
    assertThrows(NotFoundException.class, () -> sv.put("k", "v", id));
    assertThrows(NotFoundException.class, () -> sv.txn().then(Op.put("k", "v", id)).commit());
    assertTrue(sv.get("k").isEmpty());
    assertThrows(NotFoundException.class, () -> client.subvolume("no-such-subvolume").leases().list());
  }

  @Test
  void randomWalkMatchesAModel() {
    String env = System.getenv("COWKV_LEASE_SEED");
    long seed = env != null ? Long.parseLong(env) : System.nanoTime();
    Random rng = new Random(seed);
    Subvolume sv = fresh();
    Leases l = sv.leases();
    Map<String, Long> owner = new TreeMap<>(); // key -> lease (0 = none)
    Set<Long> leases = new TreeSet<>();
    for (int step = 0; step < 120; step++) {
      String at = "seed=" + seed + " step=" + step + " (replay: COWKV_LEASE_SEED=" + seed + ")";
      String key = "k" + rng.nextInt(6);
      long id = 1 + rng.nextInt(3);
      switch (rng.nextInt(5)) {
        case 0 -> {
          if (leases.contains(id)) {
            assertThrows(AlreadyExistsException.class, () -> l.grant(60, id), at);
          } else {
            l.grant(60, id);
            leases.add(id);
          }
        }
        case 1, 2 -> {
          long lease = rng.nextInt(3) == 0 ? 0 : id;
          if (lease != 0 && !leases.contains(lease)) {
            assertThrows(NotFoundException.class, () -> sv.put(key, "v", lease), at);
          } else {
            sv.put(key, "v", lease);
            owner.put(key, lease);
          }
        }
        case 3 -> {
          if (owner.remove(key) != null) {
            sv.delete(key);
          }
        }
        default -> {
          if (leases.remove(id)) {
            l.revoke(id);
            owner.values().removeIf(o -> o == id);
          } else {
            assertThrows(NotFoundException.class, () -> l.revoke(id), at);
          }
        }
      }
      assertEquals(new ArrayList<>(owner.keySet()), keys(sv), at);
      assertEquals(new ArrayList<>(leases), l.list(), at);
      for (long lease : leases) {
        List<String> want = owner.entrySet().stream().filter(e -> e.getValue() == lease)
            .map(Map.Entry::getKey).toList();
        assertEquals(want, strs(l.timeToLive(lease, true).keys()), at + " lease " + lease);
      }
    }
  }
}
