package dev.cowkv;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A cowkvd started by the tests on a fresh image in a temporary directory, on a free loopback
 * port. The binary is $COWKVD, else bazel-bin/server/cowkvd of the repository (system property
 * cowkv.repo, set by the pom). It can be stopped and started again on the same device and port.
 */
final class CowkvdServer implements AutoCloseable {
  private static final Pattern PORT = Pattern.compile("\\(port (\\d+)\\)");
  private static CowkvdServer shared;

  private final Path dir;
  private final String size;
  private final List<String> extra;
  private Process process;
  private int port;
  private boolean paused;
  /** The port the next start listens on (0 = a free one). */
  int fixedPort;

  /** One server for the whole test run (256 MiB), stopped when the JVM exits. */
  static synchronized CowkvdServer shared() {
    if (shared == null) {
      shared = start("256M", null);
      CowkvdServer s = shared;
      Runtime.getRuntime().addShutdownHook(new Thread(s::close));
    }
    return shared;
  }

  static Path binary() {
    String env = System.getenv("COWKVD");
    if (env != null && !env.isEmpty()) {
      return Paths.get(env);
    }
    String repo = System.getProperty("cowkv.repo", "../..");
    return Paths.get(repo, "bazel-bin", "server", "cowkvd").toAbsolutePath().normalize();
  }

  /** Starts a server on a new device of {@code size}; {@code token} non-null = require it. */
  static CowkvdServer start(String size, String token) {
    try {
      return new CowkvdServer(size, token);
    } catch (IOException e) {
      throw new IllegalStateException("cannot start cowkvd (" + binary()
          + "; build it with `bazel build //server:cowkvd` or set $COWKVD)", e);
    }
  }

  private CowkvdServer(String size, String token) throws IOException {
    this(size, token, false);
  }

  /** A server on a new device of {@code size} started with {@code args} (flags of cowkvd). */
  static CowkvdServer startWith(String size, List<String> args) {
    try {
      return new CowkvdServer(size, null, false, args);
    } catch (IOException e) {
      throw new IllegalStateException("cannot start cowkvd " + args + ": " + e.getMessage(), e);
    }
  }

  private CowkvdServer(String size, String token, boolean tls) throws IOException {
    this(size, token, tls, List.of());
  }

  private CowkvdServer(String size, String token, boolean tls, List<String> args) throws IOException {
    dir = java.nio.file.Files.createTempDirectory("cowkv-java-test");
    this.size = size;
    this.extra = new ArrayList<>(args);
    if (token != null) {
      Path tokenFile = dir.resolve("token");
      java.nio.file.Files.writeString(tokenFile, token);
      extra.addAll(List.of("--auth-token-file", tokenFile.toString()));
    }
    if (tls) {
      makeCertificates();
      extra.addAll(List.of("--tls-cert", dir.resolve("cert.pem").toString(),
          "--tls-key", dir.resolve("key.pem").toString()));
    }
    launch();
  }

  /** What to do when openssl is missing: it is a declared dependency of the tests. */
  static final String NEED_OPENSSL = "openssl is not installed: the TLS test makes its"
      + " certificates with it (a dependency of the tests: tools/setup.sh installs Debian's"
      + " openssl, or apt-get install openssl)";

  /**
   * A server serving TLS with a certificate for localhost/127.0.0.1 signed by a test CA
   * ({@link #caCertificate()}), made with openssl. Fails (IllegalStateException saying so)
   * when openssl is not installed, rather than leaving TLS untested.
   */
  static CowkvdServer startTls(String size) {
    try {
      if (new ProcessBuilder("openssl", "version").redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.DISCARD).start().waitFor() != 0) {
        throw new IllegalStateException(NEED_OPENSSL);
      }
    } catch (IOException e) {
      throw new IllegalStateException(NEED_OPENSSL, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
    try {
      return new CowkvdServer(size, null, true);
    } catch (IOException e) {
      throw new IllegalStateException("cannot start a TLS cowkvd: " + e.getMessage(), e);
    }
  }

  Path caCertificate() {
    return dir.resolve("ca.pem");
  }

  private void makeCertificates() throws IOException {
    String script = String.join("\n", "set -e",
        "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=cowkv-test-ca"
            + " -keyout ca.key -out ca.pem",
        "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout key.pem -out server.csr",
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n'"
            + " > server.ext",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
            + " -extfile server.ext -out cert.pem");
    try {
      Process p = new ProcessBuilder("sh", "-c", script).directory(dir.toFile())
          .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
      if (p.waitFor() != 0) {
        throw new IOException("openssl failed");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException(e);
    }
  }

  Path device() {
    return dir.resolve("cowkv.img");
  }

  private void launch() throws IOException {
    List<String> cmd = new ArrayList<>(List.of(binary().toString(),
        "--device", device().toString(), "--create-size", size,
        "--listen", "127.0.0.1:" + fixedPort, "--metrics-listen", ""));
    cmd.addAll(extra);
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    CompletableFuture<Integer> portFuture = new CompletableFuture<>();
    StringBuilder log = new StringBuilder();
    Thread reader = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          synchronized (log) {
            log.append(line).append('\n');
          }
          Matcher m = PORT.matcher(line);
          if (!portFuture.isDone() && m.find()) {
            portFuture.complete(Integer.parseInt(m.group(1)));
          }
        }
      } catch (IOException ignored) {
        // the process ended
      }
      synchronized (log) {
        portFuture.completeExceptionally(new IOException("cowkvd exited: " + log));
      }
    }, "cowkvd-log");
    reader.setDaemon(true);
    reader.start();
    try {
      port = portFuture.get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      p.destroyForcibly();
      throw new IOException("cowkvd did not start: " + log, e);
    }
    process = p;
  }

  String address() {
    return "127.0.0.1:" + port;
  }

  CowkvClient client() {
    return CowkvClient.connect(CowkvOptions.of(address()));
  }

  /**
   * SIGSTOP, and waits until every thread is stopped (state T in /proc/PID/task/TID/stat):
   * the signal is asynchronous, and a thread still running could answer a call.
   */
  void pause() throws IOException, InterruptedException {
    paused = true;
    signal("STOP");
    long pid = process.pid();
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (true) {
      List<String> states = new ArrayList<>();
      try (var tasks = java.nio.file.Files.list(Paths.get("/proc", Long.toString(pid), "task"))) {
        for (Path task : (Iterable<Path>) tasks::iterator) {
          try {
            String stat = java.nio.file.Files.readString(task.resolve("stat"));
            states.add(stat.substring(stat.lastIndexOf(')') + 1).trim().split("\\s+")[0]);
          } catch (IOException threadEnded) {
            // a thread that just ended
          }
        }
      }
      if (!states.isEmpty() && states.stream().allMatch(s -> s.equals("T") || s.equals("t"))) {
        return;
      }
      if (System.nanoTime() > end) {
        throw new IllegalStateException("cowkvd " + pid + " not stopped 10 s after SIGSTOP: "
            + states);
      }
      Thread.sleep(5);
    }
  }

  /** SIGCONT: a paused server runs again. */
  void resume() throws IOException, InterruptedException {
    if (process != null) {
      signal("CONT");
    }
    paused = false;
  }

  private void signal(String name) throws IOException, InterruptedException {
    Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid()))
        .inheritIO().start();
    if (kill.waitFor() != 0) {
      throw new IOException("kill -" + name + " " + process.pid() + " failed");
    }
  }

  /** SIGTERM (graceful stop; SIGCONT first if paused) and wait for the exit; the device stays. */
  void stop() {
    if (process == null) {
      return;
    }
    if (paused) {
      try {
        resume();
      } catch (IOException e) {
        process.destroyForcibly();
      } catch (InterruptedException e) {
        process.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
    process.destroy();
    try {
      if (!process.waitFor(30, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor();
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
    process = null;
  }

  /** Starts again on the same device and port (after stop()). */
  void startOnSamePort() {
    fixedPort = port;
    try {
      launch();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void close() {
    stop();
    try (var walk = java.nio.file.Files.walk(dir)) {
      walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException ignored) {
      // best effort
    }
  }
}
