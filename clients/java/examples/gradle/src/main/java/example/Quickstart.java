package example;

import dev.cowkv.CowkvClient;
import dev.cowkv.KeyValue;
import dev.cowkv.NotFoundException;
import dev.cowkv.Range;
import dev.cowkv.Subvolume;

/**
 * The README's example as a program: {@code Quickstart HOST:PORT SUBVOLUME}
 * creates the subvolume, writes, reads, ranges, runs a retried transaction
 * and prints one line (clients/install_test.sh compares it).
 */
public final class Quickstart {
  private Quickstart() {}

  public static void main(String[] args) {
    try (CowkvClient client = CowkvClient.connect(args[0])) {
      client.createSubvolume(args[1]);
      Subvolume sv = client.subvolume(args[1]);
      sv.put("user/1", "alice");
      sv.put("user/2", "bob");
      String v = sv.getString("user/1").orElse("absent");
      int users = 0;
      for (KeyValue kv : sv.range(Range.prefix("user/"))) users++;
      long n = sv.transaction(tx -> {            // retried on conflict
        long c = tx.getString("n").map(Long::parseLong).orElse(0L);
        tx.put("n", Long.toString(c + 1));
        return c + 1;
      });
      String missing = "present";
      try {
        sv.delete("missing");
      } catch (NotFoundException e) {
        missing = "not-found";
      }
      System.out.printf("quickstart: user/1=%s users=%d n=%d missing=%s%n", v, users, n, missing);
    }
  }
}
