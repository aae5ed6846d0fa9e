package dev.cowkv;

import com.google.protobuf.ByteString;
import cowkv.v1.Kv;

/**
 * One condition of a one-shot transaction ({@link Subvolume#txn()}), on one key.
 *
 * <pre>{@code
 * Compare.value("owner").eq("alice")
 * Compare.version("counter").gt(2)
 * Compare.modRevision("k").lt(rev)
 * Compare.exists("lock")   Compare.missing("lock")
 * }</pre>
 */
public final class Compare {
  final Kv.Compare proto;

  private Compare(Kv.Compare proto) {
    this.proto = proto;
  }

  /** The key's value (memcmp order); an absent key never matches. */
  public static ValueTarget value(byte[] key) {
    return new ValueTarget(key);
  }

  public static ValueTarget value(String key) {
    return value(Range.bytes(key));
  }

  /** Writes since the key was created (0 when absent). */
  public static NumberTarget version(byte[] key) {
    return new NumberTarget(key, Kv.Compare.Target.TARGET_VERSION);
  }

  public static NumberTarget version(String key) {
    return version(Range.bytes(key));
  }

  /** Revision that created the key (0 when absent). */
  public static NumberTarget createRevision(byte[] key) {
    return new NumberTarget(key, Kv.Compare.Target.TARGET_CREATE_REVISION);
  }

  public static NumberTarget createRevision(String key) {
    return createRevision(Range.bytes(key));
  }

  /** Revision of the key's last write (0 when absent). */
  public static NumberTarget modRevision(byte[] key) {
    return new NumberTarget(key, Kv.Compare.Target.TARGET_MOD_REVISION);
  }

  public static NumberTarget modRevision(String key) {
    return modRevision(Range.bytes(key));
  }

  /** Holds when the key exists. */
  public static Compare exists(byte[] key) {
    return existence(key, true);
  }

  public static Compare exists(String key) {
    return exists(Range.bytes(key));
  }

  /** Holds when the key does not exist. */
  public static Compare missing(byte[] key) {
    return existence(key, false);
  }

  public static Compare missing(String key) {
    return missing(Range.bytes(key));
  }

  private static Compare existence(byte[] key, boolean exists) {
    return new Compare(base(key, Kv.Compare.Target.TARGET_EXISTS, Kv.Compare.Op.OP_EQUAL)
        .setExists(exists).build());
  }

  private static Kv.Compare.Builder base(byte[] key, Kv.Compare.Target target, Kv.Compare.Op op) {
    return Kv.Compare.newBuilder().setKey(Range.bs(key)).setTarget(target).setOp(op);
  }

  void validate(String op) {
    Validate.key(op, proto.getKey().toByteArray());
  }

  /** The left side of a value compare. */
  public static final class ValueTarget {
    private final byte[] key;

    private ValueTarget(byte[] key) {
      this.key = key;
    }

    public Compare eq(byte[] v) {
      return make(Kv.Compare.Op.OP_EQUAL, v);
    }

    public Compare eq(String v) {
      return eq(Range.bytes(v));
    }

    public Compare ne(byte[] v) {
      return make(Kv.Compare.Op.OP_NOT_EQUAL, v);
    }

    public Compare ne(String v) {
      return ne(Range.bytes(v));
    }

    public Compare lt(byte[] v) {
      return make(Kv.Compare.Op.OP_LESS, v);
    }

    public Compare lt(String v) {
      return lt(Range.bytes(v));
    }

    public Compare gt(byte[] v) {
      return make(Kv.Compare.Op.OP_GREATER, v);
    }

    public Compare gt(String v) {
      return gt(Range.bytes(v));
    }

    private Compare make(Kv.Compare.Op op, byte[] v) {
      return new Compare(base(key, Kv.Compare.Target.TARGET_VALUE, op)
          .setValue(v == null ? ByteString.EMPTY : ByteString.copyFrom(v)).build());
    }
  }

  /** The left side of a compare on a number (version, create or mod revision). */
  public static final class NumberTarget {
    private final byte[] key;
    private final Kv.Compare.Target target;

    private NumberTarget(byte[] key, Kv.Compare.Target target) {
      this.key = key;
      this.target = target;
    }

    public Compare eq(long n) {
      return make(Kv.Compare.Op.OP_EQUAL, n);
    }

    public Compare ne(long n) {
      return make(Kv.Compare.Op.OP_NOT_EQUAL, n);
    }

    public Compare lt(long n) {
      return make(Kv.Compare.Op.OP_LESS, n);
    }

    public Compare gt(long n) {
      return make(Kv.Compare.Op.OP_GREATER, n);
    }

    private Compare make(Kv.Compare.Op op, long n) {
      return new Compare(base(key, target, op).setNumber(n).build());
    }
  }
}
