package dev.cowkv;

import cowkv.v1.Kv;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * One key with its value and revisions (cowkv.v1.KeyValue).
 *
 * @param key the key, 1..1024 bytes
 * @param value the value; empty for keys-only reads
 * @param createRevision revision that created the key
 * @param modRevision revision of its last write
 * @param version writes since it was created; 1 = just created
 */
public record KeyValue(byte[] key, byte[] value, long createRevision, long modRevision,
    long version) {

  static KeyValue fromProto(Kv.KeyValue m) {
    return new KeyValue(m.getKey().toByteArray(), m.getValue().toByteArray(),
        m.getCreateRevision(), m.getModRevision(), m.getVersion());
  }

  /** The key as UTF-8 text. */
  public String keyString() {
    return new String(key, StandardCharsets.UTF_8);
  }

  /** The value as UTF-8 text. */
  public String valueString() {
    return new String(value, StandardCharsets.UTF_8);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof KeyValue other && Arrays.equals(key, other.key)
        && Arrays.equals(value, other.value) && createRevision == other.createRevision
        && modRevision == other.modRevision && version == other.version;
  }

  @Override
  public int hashCode() {
    return 31 * Arrays.hashCode(key) + Long.hashCode(modRevision);
  }

  @Override
  public String toString() {
    return "KeyValue{key=" + keyString() + ", value=" + value.length + " bytes, create="
        + createRevision + ", mod=" + modRevision + ", version=" + version + "}";
  }
}
