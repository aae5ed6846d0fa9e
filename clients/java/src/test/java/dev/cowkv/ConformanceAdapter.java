package dev.cowkv;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The Java client's conformance adapter (clients/conformance/README.md, "Adapter protocol"):
 * reads one JSON op per line on stdin, carries it out with one call (or a few) of this
 * client, and answers one JSON line on stdout: the canonical result, the error's class, or
 * "fail". Bytes are base64 both ways. Named transactions, file handles and watchers live here
 * until "reset". The driver (clients/conformance/driver.py) owns servers, variables and
 * matching; ConformanceTest runs it with this adapter. Exits at EOF.
 */
public final class ConformanceAdapter {
  private final Map<String, Transaction> txs = new HashMap<>();
  private final Map<String, FileHandle> handles = new HashMap<>();
  private final Map<String, Watcher> watchers = new HashMap<>();
  private final Map<String, WatchQueue> queues = new HashMap<>();
  private final List<Transaction> unnamed = new ArrayList<>();
  private CowkvClient client;

  private ConformanceAdapter() {}

  public static void main(String[] args) throws Exception {
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    BufferedWriter out =
        new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
    ConformanceAdapter adapter = new ConformanceAdapter();
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.isBlank()) {
        continue;
      }
      out.write(adapter.answer(JsonParser.parseString(line).getAsJsonObject()).toString());
      out.write('\n');
      out.flush();
    }
    adapter.reset();
    System.exit(0); // gRPC's executor threads would keep the JVM alive
  }

  /** One request's answer: {"id", "result"}, {"id", "error"} or {"id", "fail"}. */
  private JsonObject answer(JsonObject req) {
    JsonObject ans = new JsonObject();
    ans.add("id", req.get("id"));
    String op = req.has("op") ? req.get("op").getAsString() : "";
    try {
      Map<String, Object> a = req.has("args") ? asMap(toJava(req.get("args"))) : Map.of();
      ans.add("result", toJson(call(op, a)));
    } catch (CowkvException e) {
      ans.add("error", error(e));
    } catch (Exception | AssertionError e) {
      StringWriter trace = new StringWriter();
      e.printStackTrace(new PrintWriter(trace));
      ans.addProperty("fail", op + ": " + trace);
    }
    return ans;
  }

  /** A client error as the protocol's error object. */
  private static JsonObject error(CowkvException e) {
    JsonObject err = new JsonObject();
    err.addProperty("class", errorClass(e));
    JsonArray is = new JsonArray();
    if (e instanceof FailedPreconditionException) {
      is.add("failed_precondition");
    }
    if (e instanceof ResourceExhaustedException) {
      is.add("resource_exhausted");
    }
    if (e instanceof TooOldException) {
      is.add("too_old");
    }
    err.add("is", is);
    if (e.errnoName() != null && !e.errnoName().isEmpty()) {
      err.addProperty("errno", e.errnoName());
    }
    if (e instanceof CompactedException c) {
      err.addProperty("compact_revision", c.compactRevision());
    }
    err.addProperty("message", String.valueOf(e.getMessage()));
    return err;
  }

  private Map<String, Object> call(String op, Map<String, Object> a) throws Exception {
    switch (op) {
      case "connect":
        connect(a);
        return Map.of();
      case "reset":
        reset();
        return Map.of();
      default:
        break;
    }
    if (client == null) {
      throw new IllegalStateException("no client: \"connect\" first");
    }
    Map<String, Object> r = kvOp(op, a);
    r = r != null ? r : txOp(op, a);
    r = r != null ? r : fileOp(op, a);
    r = r != null ? r : handleOp(op, a);
    r = r != null ? r : attrOp(op, a);
    r = r != null ? r : leaseOp(op, a);
    r = r != null ? r : watchOp(op, a);
    r = r != null ? r : sendOp(op, a);
    if (r == null) {
      throw new IllegalArgumentException("unknown op " + op);
    }
    return r;
  }

  /** Send and receive; a send stream is held whole (scenarios keep it small). */
  private Map<String, Object> sendOp(String op, Map<String, Object> a) {
    switch (op) {
      case "send": {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        SendStats st = client.sendTo(out, str(a, "snapshot"),
            new SendOptions(str(a, "parent"), str(a, "resume_token")));
        return Map.of("stream", out.toByteArray(), "records", st.records(), "bytes", st.bytes());
      }
      case "receive": {
        byte[] data = bytes(a, "stream");
        int cut = (int) Math.min(num(a, "cut_after_bytes"), data.length);
        ReceiveResult r = client.receive(
            new ByteArrayInputStream(data, 0, cut > 0 ? cut : data.length),
            new ReceiveOptions(str(a, "name"), bool(a, "resumable"), bool(a, "dry_run")));
        return Map.of("name", r.name(), "incremental", r.incremental(), "parent", r.parent(),
            "records", r.records());
      }
      case "partial_receives": {
        List<Object> l = new ArrayList<>();
        for (PartialReceive p : client.partialReceives()) {
          l.add(Map.of("name", p.name(), "token", p.token(), "records", p.records()));
        }
        return Map.of("partials", l);
      }
      case "abort_receive":
        client.abortReceive(str(a, "name"));
        return Map.of();
      case "digest":
        return Map.of("digest", client.digest(str(a, "subvolume")));
      default:
        return null;
    }
  }

  /** Closes the client (if any) and connects a new one, lazily. */
  private void connect(Map<String, Object> a) {
    if (client != null) {
      client.close();
    }
    String token = str(a, "token");
    long ms = num(a, "deadline_ms");
    client = CowkvClient.connect(CowkvOptions.builder().address(str(a, "address"))
        .token(token.isEmpty() ? null : token)
        .defaultDeadline(ms > 0 ? Duration.ofMillis(ms) : CowkvOptions.DEFAULT_DEADLINE)
        .build());
  }

  /** End of a scenario pass: cancels watchers, forgets transactions and handles. */
  private void reset() {
    watchers.values().forEach(Watcher::close);
    watchers.clear();
    queues.clear();
    txs.clear();
    handles.clear();
    unnamed.clear();
    if (client != null) {
      client.close();
      client = null;
    }
  }

  // The ops, by group; each returns null for an op not its own.

  private Map<String, Object> kvOp(String op, Map<String, Object> a) throws Exception {
    switch (op) {
      case "create_subvolume":
        return info(client.createSubvolume(str(a, "name")));
      case "show_subvolume":
        return info(client.showSubvolume(str(a, "name")));
      case "list_subvolumes": {
        List<String> sort = new ArrayList<>();
        if (a.get("sort") instanceof List<?> l) {
          l.forEach(k -> sort.add(String.valueOf(k)));
        }
        List<Object> names = new ArrayList<>();
        client.listSubvolumes(bool(a, "read_only"), bool(a, "snapshots_only"), sort)
            .forEach(i -> names.add(i.name()));
        return Map.of("names", names);
      }
      case "sync_subvolumes": {
        List<Long> ids = new ArrayList<>();
        if (a.get("ids") instanceof List<?> l) {
          l.forEach(v -> ids.add(((Number) v).longValue()));
        }
        return Map.of("synced", new ArrayList<Object>(client.syncSubvolumes(ids)));
      }
      case "snapshot":
        return info(client.snapshot(str(a, "source"), str(a, "name"), bool(a, "read_only")));
      case "rename_subvolume":
        client.renameSubvolume(str(a, "name"), str(a, "new_name"));
        return Map.of();
      case "delete_subvolume":
        client.deleteSubvolume(str(a, "name"));
        return Map.of();

      case "get":
        return getResult(sv(a).getAtRevision(bytes(a, "key"), num(a, "revision")));
      case "put":
        return Map.of("revision", sv(a).put(bytes(a, "key"), bytes(a, "value"), dur(a), num(a, "lease")));
      case "delete":
        return Map.of("revision", sv(a).delete(bytes(a, "key"), dur(a)));
      case "delete_range": {
        DeleteRangeResult d = sv(a).deleteRange(range(a), dur(a));
        return Map.of("deleted", d.deleted(), "revision", d.revision());
      }
      case "range":
        return keysValues(sv(a).range(range(a).pageSize(num(a, "page_size"))
            .snapshot(str(a, "snapshot")).atRevision(num(a, "revision"))));
      case "range_page": {
        Range r = range(a).limit(num(a, "limit")).snapshot(str(a, "snapshot"));
        if (bool(a, "count_only")) {
          r.countOnly();
        }
        RangePage p = sv(a).rangePage(r, bytesOrNull(a, "page_token"));
        Map<String, Object> out = keysValues(p.kvs());
        out.put("count", p.count());
        out.put("more", p.more());
        out.put("next_page_token", p.nextPageToken());
        return out;
      }
      case "put_many":
        putMany(a);
        return Map.of();
      case "txn":
        return txn(a);
      default:
        return null;
    }
  }

  private Map<String, Object> txOp(String op, Map<String, Object> a) throws Exception {
    switch (op) {
      case "begin": {
        Transaction tx = sv(a).begin(TransactionOptions.DEFAULT.withLeaseMs(num(a, "lease_ms")));
        if (a.containsKey("as")) {
          txs.put(str(a, "as"), tx);
        } else {
          unnamed.add(tx);
        }
        return Map.of("read_revision", tx.readRevision(), "lease_ms", tx.leaseMs());
      }
      case "tx_get":
        return getResult(tx(a).getWithRevision(bytes(a, "key")));
      case "tx_range":
        return keysValues(tx(a).range(range(a).pageSize(num(a, "page_size"))));
      case "tx_put":
        tx(a).put(bytes(a, "key"), bytes(a, "value"));
        return Map.of();
      case "tx_delete":
        tx(a).delete(bytes(a, "key"));
        return Map.of();
      case "tx_delete_range":
        tx(a).deleteRange(bytes(a, "start"), bytesOrNull(a, "end"));
        return Map.of();
      case "commit":
        return Map.of("revision", tx(a).commit(dur(a)));
      case "abort":
        tx(a).abort();
        return Map.of();
      case "retry_txn_conflict_once":
        return Map.of("attempts", retryConflictOnce(a));
      default:
        return null;
    }
  }

  private Map<String, Object> fileOp(String op, Map<String, Object> a) throws Exception {
    switch (op) {
      case "stat":
        return stat(files(a).stat(str(a, "path")));
      case "mkdir":
        return stat(files(a).mkdir(str(a, "path"), (int) num(a, "mode")));
      case "create_file":
        return stat(files(a).create(str(a, "path"), (int) num(a, "mode")));
      case "write_file": {
        WriteResult w = files(a).write(str(a, "path"), num(a, "offset"), bytes(a, "data"),
            bool(a, "create"), bool(a, "truncate"));
        return Map.of("bytes_written", w.bytesWritten(), "size", w.stat().size());
      }
      case "read_file": {
        byte[] data = files(a).read(str(a, "path"), num(a, "offset"), num(a, "length"));
        return Map.of("data", data, "size", (long) data.length);
      }
      case "readdir": {
        List<Object> names = new ArrayList<>();
        files(a).readDir(str(a, "path"), (int) num(a, "page_size"))
            .forEach(e -> names.add(e.name()));
        return Map.of("names", names);
      }
      case "rename": {
        int flags = 0;
        for (Object f : list(a, "flags")) {
          flags |= "noreplace".equals(f) ? Files.RENAME_NOREPLACE
              : "exchange".equals(f) ? Files.RENAME_EXCHANGE : ConformanceAdapter.<Integer>bad("rename flag " + f);
        }
        files(a).rename(str(a, "from"), str(a, "to"), flags);
        return Map.of();
      }
      case "link":
        return stat(files(a).link(str(a, "existing"), str(a, "new_path")));
      case "symlink":
        return stat(files(a).symlink(str(a, "target"), str(a, "path")));
      case "readlink":
        return Map.of("target", files(a).readLink(str(a, "path")));
      case "unlink":
        files(a).unlink(str(a, "path"));
        return Map.of();
      case "rmdir":
        files(a).rmdir(str(a, "path"));
        return Map.of();
      case "truncate":
        return stat(files(a).truncate(str(a, "path"), num(a, "size")));
      case "fsync":
        files(a).fsync(str(a, "path"), bool(a, "datasync"), num(a, "offset"), num(a, "length"));
        return Map.of();
      default:
        return null;
    }
  }

  private Map<String, Object> handleOp(String op, Map<String, Object> a) throws Exception {
    switch (op) {
      case "open_handle":
      case "create_tmpfile": {
        FileHandle h = op.equals("open_handle")
            ? files(a).openHandle(str(a, "path"), num(a, "lease_ms"))
            : files(a).createTmpfile(str(a, "dir"), (int) num(a, "mode"), 0);
        handles.put(str(a, "as"), h);
        return Map.of("ino", h.ino(), "lease_ms", h.leaseMs(), "stat", stat(h.openedStat()));
      }
      case "handle_stat":
        return stat(handles.get(str(a, "h")).stat());
      case "handle_read": {
        byte[] d = handles.get(str(a, "h")).read(num(a, "offset"), num(a, "length"));
        return Map.of("data", d, "size", (long) d.length);
      }
      case "handle_write":
        return Map.of("bytes_written",
            handles.get(str(a, "h")).write(num(a, "offset"), bytes(a, "data")).bytesWritten());
      case "handle_link":
        return stat(handles.get(str(a, "h")).link(str(a, "new_path")));
      case "close_handle":
        handles.remove(str(a, "h")).close();
        return Map.of();
      case "fallocate": {
        int mode = 0;
        if (a.get("mode") instanceof List<?> l) {
          for (Object m : l) {
            if ("keep_size".equals(m)) {
              mode |= Files.FALLOC_FL_KEEP_SIZE;
            } else if ("punch_hole".equals(m)) {
              mode |= Files.FALLOC_FL_PUNCH_HOLE | Files.FALLOC_FL_KEEP_SIZE;
            } else if ("zero_range".equals(m)) {
              mode |= Files.FALLOC_FL_ZERO_RANGE;
            } else {
              return bad("fallocate mode " + m);
            }
          }
        }
        return stat(files(a).fallocate(str(a, "path"), num(a, "offset"), num(a, "length"), mode));
      }
      default:
        return null;
    }
  }

  private Map<String, Object> attrOp(String op, Map<String, Object> a) throws Exception {
    switch (op) {
      case "set_attr":
        return stat(files(a).setAttr(str(a, "path"), attrChange(a)));
      case "set_xattr": {
        Object fl = a.get("flags");
        int flags = "create".equals(fl) ? Files.XATTR_CREATE
            : "replace".equals(fl) ? Files.XATTR_REPLACE : 0;
        files(a).setXattr(str(a, "path"), str(a, "name"), bytes(a, "value"), flags);
        return Map.of();
      }
      case "get_xattr":
        return Map.of("value", files(a).getXattr(str(a, "path"), str(a, "name")));
      case "list_xattrs":
        return Map.of("names", new ArrayList<Object>(files(a).listXattrs(str(a, "path"))));
      case "remove_xattr":
        files(a).removeXattr(str(a, "path"), str(a, "name"));
        return Map.of();
      case "link_many": {
        Files f = files(a);
        for (long i = 0; i < num(a, "count"); i++) {
          String dir = str(a, "prefix") + String.format("%04d", i / LINKS_PER_DIR);
          if (i % LINKS_PER_DIR == 0) {
            f.mkdir(dir, 0);
          }
          f.link(str(a, "existing"), dir + String.format("/%06d", i));
        }
        return Map.of();
      }
      case "clone":
        files(a).clone(str(a, "src_path"), num(a, "src_offset"), str(a, "dst_path"),
            num(a, "dst_offset"), num(a, "length"));
        return Map.of();
      case "fiemap": {
        List<Object> extents = new ArrayList<>();
        for (Extent e : files(a).fiemap(str(a, "path"), num(a, "offset"), num(a, "length"))) {
          extents.add(Map.of("logical", e.logical(), "physical", e.physical(),
              "length", e.length(), "flags", flagNames(e)));
        }
        return Map.of("extents", extents);
      }
      default:
        return null;
    }
  }

  private Map<String, Object> leaseOp(String op, Map<String, Object> a) throws Exception {
    switch (op) {
      case "lease_grant": {
        LeaseGrant g = sv(a).leases().grant(num(a, "ttl"), num(a, "id"));
        return Map.of("id", g.id(), "ttl", g.ttl());
      }
      case "lease_revoke":
        return Map.of("revision", sv(a).leases().revoke(num(a, "id")));
      case "lease_keep_alive_once":
        return Map.of("ttl", sv(a).leases().keepAliveOnce(num(a, "id")));
      case "lease_time_to_live": {
        LeaseInfo i = sv(a).leases().timeToLive(num(a, "id"), bool(a, "keys"));
        return Map.of("id", i.id(), "ttl", i.ttl(), "granted_ttl", i.grantedTtl(),
            "keys", new ArrayList<Object>(i.keys()));
      }
      case "lease_list":
        return Map.of("ids", new ArrayList<Object>(sv(a).leases().list()));
      default:
        return null;
    }
  }

  private Map<String, Object> watchOp(String op, Map<String, Object> a) throws Exception {
    switch (op) {
      case "compact":
        return Map.of("compact_revision", sv(a).compact(num(a, "revision")));
      case "watch": {
        WatchOptions o = new WatchOptions().startRevision(num(a, "start_revision"));
        if (bool(a, "prefix")) {
          o.prefix();
        }
        o.rangeEnd(bytes(a, "end"));
        if (bool(a, "prev_kv")) {
          o.prevKv();
        }
        for (Object f : list(a, "filters")) {
          if ("noput".equals(f)) {
            o.noPut();
          } else if ("nodelete".equals(f)) {
            o.noDelete();
          }
        }
        WatchQueue q = new WatchQueue();
        Watcher w = sv(a).watch(bytes(a, "key"), o, q);
        if (a.containsKey("as")) {
          watchers.put(str(a, "as"), w);
          queues.put(str(a, "as"), q);
        } else {
          w.close();
        }
        return Map.of();
      }
      case "file_watch": {
        WatchQueue q = new WatchQueue();
        Watcher w = sv(a).files().watch(str(a, "prefix"),
            new WatchOptions().startRevision(num(a, "start_revision")), q.files());
        if (a.containsKey("as")) {
          watchers.put(str(a, "as"), w);
          queues.put(str(a, "as"), q);
        } else {
          w.close();
        }
        return Map.of();
      }
      case "watch_next": {
        List<Object> events = new ArrayList<>();
        for (Object e : queues.get(str(a, "w")).takeAny((int) num(a, "count"), Duration.ofSeconds(10))) {
          events.add(anyEvent(e));
        }
        return Map.of("events", events);
      }
      case "watch_cancel": {
        watchers.remove(str(a, "w")).close();
        List<Object> events = new ArrayList<>();
        for (Object e : queues.remove(str(a, "w")).drainAny(Duration.ofSeconds(10))) {
          events.add(anyEvent(e));
        }
        return Map.of("events", events);
      }

      case "sync":
        return Map.of("generation", client.sync());
      case "check":
        return Map.of("ok", client.check(Duration.ofMinutes(5)).ok());
      default:
        return null;
    }
  }
  /**
   * link_many's names per directory: all names of one inode in one directory share one
   * inode-ref item, which must fit in a node.
   */
  private static final long LINKS_PER_DIR = 400;

  /** Puts per one-shot txn in put_many (README: 1,000, the last one smaller). */
  private static final int PUT_MANY_BATCH = 1000;

  private void putMany(Map<String, Object> a) {
    Subvolume sv = sv(a);
    String prefix = str(a, "prefix");
    long count = num(a, "count");
    long rounds = a.containsKey("rounds") ? num(a, "rounds") : 1;
    byte[] value = bytes(a, "value");
    Durability d = dur(a);
    for (long r = 0; r < rounds; r++) {
      for (long start = 0; start < count; start += PUT_MANY_BATCH) {
        long end = Math.min(count, start + PUT_MANY_BATCH);
        Op[] ops = new Op[(int) (end - start)];
        for (long i = start; i < end; i++) {
          ops[(int) (i - start)] = Op.put(
              (prefix + String.format("%06d", i)).getBytes(StandardCharsets.UTF_8), value);
        }
        sv.txn().then(ops).durability(d).commit();
      }
    }
  }

  private long retryConflictOnce(Map<String, Object> a) {
    Subvolume sv = sv(a);
    byte[] key = bytes(a, "key");
    byte[] interfere = bytes(a, "interfere");
    AtomicInteger attempts = new AtomicInteger();
    sv.runTransaction(tx -> {
      int n = attempts.incrementAndGet();
      long v = tx.get(key).map(b -> Long.parseLong(new String(b, StandardCharsets.UTF_8)))
          .orElse(0L);
      if (n == 1) {
        sv.put(key, interfere);
      }
      tx.put(key, Long.toString(v + 1).getBytes(StandardCharsets.UTF_8));
    });
    return attempts.get();
  }

  private Map<String, Object> txn(Map<String, Object> a) {
    Txn t = sv(a).txn().durability(dur(a));
    for (Object o : list(a, "compare")) {
      t.when(compare(asMap(o)));
    }
    for (Object o : list(a, "success")) {
      t.then(op(asMap(o)));
    }
    for (Object o : list(a, "failure")) {
      t.otherwise(op(asMap(o)));
    }
    TxnResult r = t.commit();
    List<Object> responses = new ArrayList<>();
    for (OpResult res : r.responses()) {
      if (res instanceof OpResult.Put) {
        responses.add(Map.of("put", Map.of()));
      } else if (res instanceof OpResult.Delete d) {
        responses.add(Map.of("delete", Map.of("deleted", d.deleted())));
      } else if (res instanceof OpResult.Range rr) {
        Map<String, Object> m = keysValues(rr.kvs());
        m.put("count", rr.count());
        m.put("more", rr.more());
        responses.add(Map.of("range", m));
      }
    }
    return Map.of("succeeded", r.succeeded(), "revision", r.revision(), "responses", responses);
  }

  private Compare compare(Map<String, Object> c) {
    byte[] key = bytes(c, "key");
    String target = str(c, "target");
    String op = str(c, "op");
    if (target.equals("exists")) {
      boolean exists = bool(c, "exists");
      boolean want = op.equals("=") ? exists : op.equals("!=") ? !exists : bad("exists op " + op);
      return want ? Compare.exists(key) : Compare.missing(key);
    }
    if (target.equals("value")) {
      Compare.ValueTarget t = Compare.value(key);
      byte[] v = bytes(c, "value");
      switch (op) {
        case "=": return t.eq(v);
        case "!=": return t.ne(v);
        case "<": return t.lt(v);
        case ">": return t.gt(v);
        default: return bad("op " + op);
      }
    }
    Compare.NumberTarget t;
    switch (target) {
      case "version": t = Compare.version(key); break;
      case "create_revision": t = Compare.createRevision(key); break;
      case "mod_revision": t = Compare.modRevision(key); break;
      default: return bad("target " + target);
    }
    long n = num(c, "number");
    switch (op) {
      case "=": return t.eq(n);
      case "!=": return t.ne(n);
      case "<": return t.lt(n);
      case ">": return t.gt(n);
      default: return bad("op " + op);
    }
  }

  private Op op(Map<String, Object> o) {
    if (o.containsKey("put")) {
      Map<String, Object> p = asMap(o.get("put"));
      return Op.put(bytes(p, "key"), bytes(p, "value"), num(p, "lease"));
    }
    if (o.containsKey("delete")) {
      return Op.delete(bytes(asMap(o.get("delete")), "key"));
    }
    if (o.containsKey("delete_range")) {
      Map<String, Object> p = asMap(o.get("delete_range"));
      return Op.deleteRange(bytesOrNull(p, "start"), bytesOrNull(p, "end"));
    }
    if (o.containsKey("range")) {
      Map<String, Object> p = asMap(o.get("range"));
      Range r = range(p).limit(num(p, "limit"));
      return bool(p, "count_only") ? Op.count(r) : Op.range(r);
    }
    return bad("txn op " + o);
  }

  /** start/end/prefix/reverse/keys_only of a range op. */
  private Range range(Map<String, Object> a) {
    Range r = a.containsKey("prefix") ? Range.prefix(bytes(a, "prefix")) : Range.all();
    r.start(bytesOrNull(a, "start")).end(bytesOrNull(a, "end")).reverse(bool(a, "reverse"));
    if (bool(a, "keys_only")) {
      r.keysOnly();
    }
    return r;
  }

  // Canonical results.

  private static Map<String, Object> info(SubvolumeInfo i) {
    return Map.of("id", i.id(), "name", i.name(), "parent_id", i.parentId(),
        "read_only", i.readOnly());
  }

  private static Map<String, Object> getResult(GetResult g) {
    KeyValue kv = g.kv();
    return Map.of("key", kv.key(), "value", kv.value(), "create_revision", kv.createRevision(),
        "mod_revision", kv.modRevision(), "version", kv.version(), "revision", g.revision());
  }

  private static Map<String, Object> keysValues(Iterable<KeyValue> kvs) {
    List<Object> keys = new ArrayList<>();
    List<Object> values = new ArrayList<>();
    for (KeyValue kv : kvs) {
      keys.add(kv.key());
      values.add(kv.value());
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("keys", keys);
    out.put("values", values);
    return out;
  }

  private static Map<String, Object> stat(FileStat s) {
    return Map.of("ino", s.ino(), "kind", s.kind().name().toLowerCase(java.util.Locale.ROOT),
        "mode", (long) s.mode(), "nlink", (long) s.nlink(), "size", s.size(),
        "uid", (long) s.uid(), "gid", (long) s.gid(), "atime_ns", s.atimeNs(),
        "mtime_ns", s.mtimeNs(), "ctime_ns", s.ctimeNs());
  }

  /** set_attr's arguments: an absent one is kept, "now" = the server's clock. */
  private static AttrChange attrChange(Map<String, Object> a) {
    AttrChange c = new AttrChange();
    if (a.get("mode") != null) {
      c.mode((int) num(a, "mode"));
    }
    if (a.get("uid") != null) {
      c.uid((int) num(a, "uid"));
    }
    if (a.get("gid") != null) {
      c.gid((int) num(a, "gid"));
    }
    if (a.get("size") != null) {
      c.size(num(a, "size"));
    }
    if ("now".equals(a.get("atime_ns"))) {
      c.atimeNow();
    } else if (a.get("atime_ns") != null) {
      c.atimeNs(num(a, "atime_ns"));
    }
    if ("now".equals(a.get("mtime_ns"))) {
      c.mtimeNow();
    } else if (a.get("mtime_ns") != null) {
      c.mtimeNs(num(a, "mtime_ns"));
    }
    return c;
  }

  private static List<Object> flagNames(Extent e) {
    List<Object> out = new ArrayList<>();
    if ((e.flags() & Extent.FLAG_LAST) != 0) {
      out.add("LAST");
    }
    if ((e.flags() & Extent.FLAG_NOT_ALIGNED) != 0) {
      out.add("NOT_ALIGNED");
    }
    if ((e.flags() & Extent.FLAG_INLINE) != 0) {
      out.add("INLINE");
    }
    if ((e.flags() & Extent.FLAG_SHARED) != 0) {
      out.add("SHARED");
    }
    return out;
  }

  /** A key event's or a file event's canonical shape (conformance/README.md "file_watch"). */
  private static Map<String, Object> anyEvent(Object o) {
    if (o instanceof FileEvent f) {
      Map<String, Object> m = new HashMap<>();
      m.put("type", f.type().name().toLowerCase(java.util.Locale.ROOT));
      m.put("path", f.path());
      m.put("new_path", f.newPath());
      m.put("revision", f.revision());
      m.put("ino", f.ino());
      m.put("paths_lost", f.pathsLost());
      return m;
    }
    return watchEvent((WatchEvent) o);
  }

  private static Map<String, Object> watchEvent(WatchEvent e) {
    KeyValue p = e.prevKv();
    Map<String, Object> m = new HashMap<>();
    m.put("type", e.type() == WatchEvent.Type.PUT ? "put" : "delete");
    m.put("key", e.kv().key());
    m.put("value", e.kv().value());
    m.put("create_revision", e.kv().createRevision());
    m.put("mod_revision", e.kv().modRevision());
    m.put("version", e.kv().version());
    m.put("has_prev", p != null);
    m.put("prev_value", p != null ? p.value() : new byte[0]);
    m.put("prev_mod_revision", p != null ? p.modRevision() : 0L);
    return m;
  }

  /** The most specific class name of an error (README, "Error classes"). */
  static String errorClass(CowkvException e) {
    if (e instanceof CompactedException) return "compacted";
    if (e instanceof FutureRevisionException) return "future_revision";
    if (e instanceof SubvolumeDeletedException) return "subvolume_deleted";
    if (e instanceof SlowReaderException) return "slow_reader";
    if (e instanceof ReadOnlyException) return "read_only";
    if (e instanceof NoSpaceException) return "no_space";
    if (e instanceof InvalidArgumentException) return "invalid_argument";
    if (e instanceof NotFoundException) return "not_found";
    if (e instanceof AlreadyExistsException) return "already_exists";
    if (e instanceof FailedPreconditionException) return "failed_precondition";
    if (e instanceof ConflictException) return "conflict";
    if (e instanceof TooOldException) return "too_old";
    if (e instanceof ResourceExhaustedException) return "resource_exhausted";
    if (e instanceof DataLossException) return "data_loss";
    if (e instanceof UnavailableException) return "unavailable";
    if (e instanceof UnauthenticatedException) return "unauthenticated";
    if (e instanceof DeadlineExceededException) return "deadline_exceeded";
    if (e instanceof CancelledException) return "cancelled";
    if (e instanceof PermissionDeniedException) return "permission_denied";
    if (e instanceof UnimplementedException) return "unimplemented";
    if (e instanceof InternalException) return "internal";
    return "unknown";
  }

  // Arguments.

  private Subvolume sv(Map<String, Object> a) {
    return client.subvolume(str(a, "sv"));
  }

  private Files files(Map<String, Object> a) {
    return sv(a).files();
  }

  private Transaction tx(Map<String, Object> a) {
    Transaction tx = txs.get(str(a, "tx"));
    if (tx == null) {
      throw new IllegalArgumentException("no transaction named " + a.get("tx"));
    }
    return tx;
  }

  private static Durability dur(Map<String, Object> a) {
    String d = str(a, "durability");
    switch (d) {
      case "":
      case "default": return Durability.DEFAULT;
      case "durable": return Durability.DURABLE;
      case "async": return Durability.ASYNC;
      default: return bad("durability " + d);
    }
  }

  private static String str(Map<String, Object> a, String k) {
    Object v = a.get(k);
    if (v == null) {
      return "";
    }
    if (v instanceof String s) {
      return s;
    }
    return String.valueOf(v);
  }

  private static byte[] bytes(Map<String, Object> a, String k) {
    byte[] b = bytesOrNull(a, k);
    return b == null ? new byte[0] : b;
  }

  private static byte[] bytesOrNull(Map<String, Object> a, String k) {
    Object v = a.get(k);
    if (v == null) {
      return null;
    }
    return toBytes(v);
  }

  private static byte[] toBytes(Object v) {
    if (v instanceof byte[] b) {
      return b;
    }
    if (v instanceof String s) {
      return Base64.getDecoder().decode(s); // every bytes argument is base64 on the wire
    }
    throw new IllegalArgumentException("not base64 bytes: " + v);
  }

  private static long num(Map<String, Object> a, String k) {
    Object v = a.get(k);
    return v == null ? 0 : ((Number) v).longValue();
  }

  private static boolean bool(Map<String, Object> a, String k) {
    Object v = a.get(k);
    return v != null && (Boolean) v;
  }

  @SuppressWarnings("unchecked")
  private static List<Object> list(Map<String, Object> a, String k) {
    Object v = a.get(k);
    return v == null ? List.of() : (List<Object>) v;
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> asMap(Object o) {
    return (Map<String, Object>) o;
  }

  private static <T> T bad(String what) {
    throw new IllegalArgumentException("adapter: bad " + what);
  }

  // Values: JSON -> Java, variables, byte specs.

  private static Object toJava(JsonElement e) {
    if (e == null || e.isJsonNull()) {
      return null;
    }
    if (e.isJsonObject()) {
      Map<String, Object> m = new LinkedHashMap<>();
      for (Map.Entry<String, JsonElement> en : e.getAsJsonObject().entrySet()) {
        m.put(en.getKey(), toJava(en.getValue()));
      }
      return m;
    }
    if (e.isJsonArray()) {
      List<Object> l = new ArrayList<>();
      for (JsonElement x : e.getAsJsonArray()) {
        l.add(toJava(x));
      }
      return l;
    }
    JsonPrimitive p = e.getAsJsonPrimitive();
    if (p.isBoolean()) {
      return p.getAsBoolean();
    }
    if (p.isNumber()) {
      java.math.BigDecimal d = p.getAsBigDecimal();
      try {
        return d.longValueExact();
      } catch (ArithmeticException notIntegral) {
        return d.doubleValue();
      }
    }
    return p.getAsString();
  }

  private static JsonElement toJson(Object o) {
    if (o == null) {
      return com.google.gson.JsonNull.INSTANCE;
    }
    if (o instanceof Map<?, ?> m) {
      JsonObject j = new JsonObject();
      m.forEach((k, v) -> j.add((String) k, toJson(v)));
      return j;
    }
    if (o instanceof List<?> l) {
      JsonArray j = new JsonArray();
      l.forEach(v -> j.add(toJson(v)));
      return j;
    }
    if (o instanceof Boolean b) {
      return new JsonPrimitive(b);
    }
    if (o instanceof Number n) {
      return new JsonPrimitive(n);
    }
    if (o instanceof byte[] b) {
      return new JsonPrimitive(Base64.getEncoder().encodeToString(b));
    }
    return new JsonPrimitive(o.toString());
  }
}
