package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.protobuf.Any;
import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The exception classes and limits against clients/spec/*.json itself (not only the generated
 * Spec): every class, code, reason, watch cancel code and text fallback maps as the spec says.
 */
class SpecTest {
  private static JsonObject spec(String name) throws IOException {
    return JsonParser.parseString(Files.readString(Path.of("..", "spec", name + ".json")))
        .getAsJsonObject();
  }

  /** "ReadOnlyException" -> "read_only": the spec's name of an exception class. */
  private static String specName(Class<?> c) {
    String base = c.getSimpleName().replaceAll("Exception$", "");
    return base.replaceAll("([a-z])([A-Z])", "$1_$2").toLowerCase(java.util.Locale.ROOT);
  }

  private static CowkvException withReason(Status.Code code, String msg, String reason) {
    com.google.rpc.Status st = com.google.rpc.Status.newBuilder().setCode(code.value())
        .setMessage(msg).addDetails(Any.pack(ErrorInfo.newBuilder().setReason(reason)
            .setDomain("cowkv.dev").build())).build();
    return (CowkvException) Errors.from(StatusProto.toStatusRuntimeException(st), "op");
  }

  @Test
  void classesCodesAndReasonsMapAsTheSpecSays() throws IOException {
    JsonObject errors = spec("errors");
    Map<String, String> byCode = new HashMap<>();
    for (JsonElement e : errors.getAsJsonArray("codes")) {
      JsonObject c = e.getAsJsonObject();
      Status.Code code = Status.Code.valueOf(c.get("name").getAsString());
      byCode.put(code.name(), c.get("class").getAsString());
      CowkvException got = Errors.fromStatus(Status.fromCode(code).withDescription("m"), "op");
      assertEquals(c.get("class").getAsString(), specName(got.getClass()), code.name());
    }
    for (JsonElement e : errors.getAsJsonArray("classes")) {
      JsonObject c = e.getAsJsonObject();
      String name = c.get("name").getAsString();
      Status.Code code = Status.Code.valueOf(c.get("code").getAsString());
      CowkvException x = name.equals("compacted") ? new CompactedException("m", 1, "get")
          : Errors.create(name, code, "m", "op", null);
      assertEquals(name, specName(x.getClass()));
      assertEquals(c.get("retryable").getAsBoolean(), x.isRetryableTransaction(), name);
      String parent = c.get("parent").isJsonNull() ? "cowkv" : c.get("parent").getAsString();
      assertEquals(parent, specName(x.getClass().getSuperclass()), name);
    }
    for (JsonElement e : errors.getAsJsonArray("reasons")) {
      JsonObject r = e.getAsJsonObject();
      for (JsonElement codeName : r.getAsJsonArray("codes")) {
        Status.Code code = Status.Code.valueOf(codeName.getAsString());
        String want = r.get("class").isJsonNull() ? byCode.get(code.name())
            : r.get("class").getAsString();
        CowkvException got = withReason(code, "read-only: no space", r.get("reason").getAsString());
        assertEquals(want, specName(got.getClass()), r.get("reason") + " " + code);
      }
    }
  }

  @Test
  void watchCancelCodesAndTextFallbacks() throws IOException {
    JsonObject errors = spec("errors");
    for (JsonElement e : errors.getAsJsonArray("watch_cancel")) {
      JsonObject w = e.getAsJsonObject();
      CowkvException got = Watcher.cancelError(cowkv.v1.Kv.WatchResponse.newBuilder()
          .setCancelCodeValue(w.get("number").getAsInt()).setCancelReason("m").build());
      assertEquals(w.get("class").getAsString(), specName(got.getClass()));
    }
    for (JsonElement e : errors.getAsJsonArray("fallbacks")) {
      JsonObject f = e.getAsJsonObject();
      Status.Code code = Status.Code.valueOf(f.get("code").getAsString());
      for (String key : new String[] {"prefixes", "contains"}) {
        for (JsonElement text : f.getAsJsonArray(key)) {
          CowkvException got = Errors.fromStatus(
              Status.fromCode(code).withDescription(text.getAsString() + " and more"), "op");
          assertEquals(f.get("class").getAsString(), specName(got.getClass()), text.toString());
        }
      }
    }
  }

  @Test
  void limitsAreTheSpecs() throws IOException {
    Map<String, Long> have = Map.ofEntries(
        Map.entry("max_key_bytes", (long) Validate.MAX_KEY_BYTES),
        Map.entry("max_value_bytes", (long) Validate.MAX_VALUE_BYTES),
        Map.entry("max_bound_bytes", (long) Validate.MAX_BOUND_BYTES),
        Map.entry("max_name_bytes", (long) Validate.MAX_NAME_BYTES),
        Map.entry("max_path_bytes", (long) Validate.MAX_PATH_BYTES),
        Map.entry("max_path_depth", (long) Validate.MAX_PATH_DEPTH),
        Map.entry("max_symlink_bytes", (long) Validate.MAX_SYMLINK_BYTES),
        Map.entry("max_write_chunk_bytes", (long) Spec.MAX_WRITE_CHUNK_BYTES),
        Map.entry("max_txn_ops", (long) Spec.MAX_TXN_OPS),
        Map.entry("max_lease_ms", Validate.MAX_LEASE_MS),
        Map.entry("max_lease_ttl_seconds", Leases.MAX_TTL_SECONDS));
    int n = 0;
    for (JsonElement e : spec("limits").getAsJsonArray("limits")) {
      JsonObject l = e.getAsJsonObject();
      String name = l.get("name").getAsString();
      assertTrue(have.containsKey(name), name);
      assertEquals(l.get("value").getAsLong(), have.get(name), name);
      n++;
    }
    assertEquals(have.size(), n);
  }
}
