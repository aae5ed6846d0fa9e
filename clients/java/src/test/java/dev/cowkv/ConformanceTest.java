package dev.cowkv;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Runs clients/conformance/scenarios.json through this client: the shared driver
 * (clients/conformance/driver.py) runs every scenario with this client's adapter
 * (ConformanceAdapter, one JSON op per line, started as `java -cp <the test classpath>
 * dev.cowkv.ConformanceAdapter`) against cowkvd processes it starts itself, and this test
 * fails with the driver's output when a scenario does. The server is $COWKVD or
 * bazel-bin/server/cowkvd; COWKV_SCENARIO=name runs one scenario, COWKV_CONFORMANCE=path
 * another file.
 */
class ConformanceTest {
  @Test
  void scenarios() throws Exception {
    Path repo = Paths.get(System.getProperty("cowkv.repo", "../.."));
    List<String> cmd = new ArrayList<>(List.of("python3",
        repo.resolve("clients/conformance/driver.py").toString(),
        "--adapter", adapterCommand(), "--cowkvd", CowkvdServer.binary().toString()));
    String only = System.getenv("COWKV_SCENARIO");
    if (only != null && !only.isEmpty()) {
      cmd.addAll(List.of("--only", only));
    }
    String file = System.getenv("COWKV_CONFORMANCE");
    if (file != null && !file.isEmpty()) {
      cmd.addAll(List.of("--scenarios", file));
    }
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    int status = p.waitFor(); // its output ended: it has exited or is about to
    System.out.println(out.substring(out.lastIndexOf('\n') + 1)); // the summary line
    if (status != 0) {
      fail("conformance driver failed (exit " + status + "):\n" + out);
    }
  }

  /**
   * This JVM's java running the adapter on the test classpath: `java @target/
   * conformance-adapter.args dev.cowkv.ConformanceAdapter`, the classpath in a java argument
   * file (it is long; the file stays for running the adapter by hand). Surefire passes the
   * classpath in a manifest-only jar; surefire.test.class.path has the entries themselves.
   */
  private static String adapterCommand() throws IOException {
    String jvm = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    String cp = System.getProperty("surefire.test.class.path",
        System.getProperty("java.class.path"));
    List<String> entries = new ArrayList<>();
    for (String e : cp.split(File.pathSeparator)) {
      if (!e.isEmpty()) {
        entries.add(e);
      }
    }
    Path args = Paths.get("target", "conformance-adapter.args").toAbsolutePath();
    String joined = String.join(File.pathSeparator, entries);
    java.nio.file.Files.writeString(args,
        "-cp \"" + joined.replace("\\", "\\\\").replace("\"", "\\\"") + "\"\n");
    return quote(jvm) + " " + quote("@" + args) + " dev.cowkv.ConformanceAdapter";
  }

  /** A word for Python's shlex.split. */
  private static String quote(String s) {
    return "'" + s.replace("'", "'\"'\"'") + "'";
  }
}
