package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Files.watch against a live cowkvd: create, write, rename and unlink under a prefix come in
 * revision order naming the inode, a change outside it does not; a start revision replays the
 * same events; close() ends with onCompleted; refused creates throw their class.
 */
class FileWatchTest {
  private static final Duration WAIT = Duration.ofSeconds(10);
  private static CowkvClient client;

  @BeforeAll
  static void setUp() {
    client = CowkvClient.connect(CowkvOptions.builder().address(CowkvdServer.shared().address()).build());
  }

  @AfterAll
  static void tearDown() {
    client.close();
  }

  private static String show(List<FileEvent> evs) {
    List<String> out = new ArrayList<>();
    for (FileEvent e : evs) {
      out.add(e.type() + " " + e.path() + ">" + e.newPath());
    }
    return String.join("; ", out);
  }

  @Test
  void eventsUnderAPrefixInOrder() throws Exception {
    client.createSubvolume("java-fw");
    Subvolume sv = client.subvolume("java-fw");
    sv.put("k0", "v"); // a KV write first: see clients/go/filewatch_test.go
    Files fs = sv.files();
    fs.mkdir("d");
    String want = "CREATE d/a>; MODIFY d/a>; RENAME d/a>d/b; UNLINK d/b>";
    WatchQueue q = new WatchQueue();
    List<FileEvent> evs;
    FileStat st;
    try (Watcher w = fs.watch("d/", new WatchOptions(), q.files())) {
      st = fs.create("d/a");
      fs.create("outside");
      fs.writeAt("d/a", 0, "hello".getBytes(java.nio.charset.StandardCharsets.UTF_8));
      fs.rename("d/a", "d/b");
      fs.unlink("d/b");
      evs = q.takeFiles(4, WAIT);
      assertEquals(want, show(evs));
      for (int i = 1; i < evs.size(); i++) {
        assertTrue(evs.get(i).revision() > evs.get(i - 1).revision(), evs.toString());
      }
      for (FileEvent e : evs) {
        assertEquals(st.ino(), e.ino());
      }
    }
    assertEquals(List.of(), q.drainAny(WAIT), "close() ends with onCompleted");
    WatchQueue again = new WatchQueue();
    try (Watcher w = fs.watch("d", new WatchOptions().startRevision(evs.get(0).revision()), again.files())) {
      assertEquals(evs, again.takeFiles(4, WAIT));
    }
    client.snapshot("java-fw", "java-fw-ro", true);
    WatchQueue r = new WatchQueue();
    assertThrows(FailedPreconditionException.class,
        () -> client.subvolume("java-fw-ro").files().watch("", new WatchOptions(), r.files()));
    assertThrows(NotFoundException.class,
        () -> client.subvolume("no-such").files().watch("", new WatchOptions(), r.files()));
    assertThrows(InvalidArgumentException.class,
        () -> fs.watch("", new WatchOptions().prevKv(), r.files()));
  }
}
