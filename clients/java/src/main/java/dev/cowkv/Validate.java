package dev.cowkv;

import java.nio.charset.StandardCharsets;

/**
 * Client-side checks of the arguments the server would refuse with INVALID_ARGUMENT (the
 * limits of docs/api.md and server/validate.cc), so that a bad call fails before it is sent
 * with the same exception class the server would give.
 */
final class Validate {
  // The server's limits: clients/spec/limits.json, through the generated Spec.
  static final int MAX_KEY_BYTES = Spec.MAX_KEY_BYTES;
  static final int MAX_VALUE_BYTES = Spec.MAX_VALUE_BYTES;
  static final int MAX_BOUND_BYTES = Spec.MAX_BOUND_BYTES;
  static final int MAX_NAME_BYTES = Spec.MAX_NAME_BYTES;
  static final int MAX_PATH_BYTES = Spec.MAX_PATH_BYTES;
  static final int MAX_PATH_DEPTH = Spec.MAX_PATH_DEPTH;
  static final int MAX_SYMLINK_BYTES = Spec.MAX_SYMLINK_BYTES;
  static final long MAX_LEASE_MS = Spec.MAX_LEASE_MS;

  private Validate() {}

  static void key(String op, byte[] key) {
    if (key == null || key.length == 0 || key.length > MAX_KEY_BYTES) {
      throw Errors.invalid(op, "key: a key is 1.." + MAX_KEY_BYTES + " bytes, not "
          + (key == null ? 0 : key.length));
    }
  }

  static void value(String op, byte[] value) {
    if (value != null && value.length > MAX_VALUE_BYTES) {
      throw Errors.invalid(op, "value: at most " + MAX_VALUE_BYTES + " bytes, not " + value.length);
    }
  }

  static void bound(String op, String field, byte[] bound) {
    if (bound != null && bound.length > MAX_BOUND_BYTES) {
      throw Errors.invalid(op, field + ": a range bound is at most " + MAX_BOUND_BYTES
          + " bytes, not " + bound.length);
    }
  }

  /** A subvolume name: 1..255 bytes, no '/' or NUL. */
  static void subvolumeName(String op, String field, String name) {
    int n = name == null ? 0 : utf8(name).length;
    if (n == 0 || n > MAX_NAME_BYTES) {
      throw Errors.invalid(op, field + ": a subvolume name is 1.." + MAX_NAME_BYTES
          + " bytes, not " + n);
    }
    if (name.indexOf('/') >= 0 || name.indexOf('\0') >= 0) {
      throw Errors.invalid(op, field + ": a subvolume name may not contain '/' or NUL: \""
          + name.replace("\0", "\\000") + "\"");
    }
  }

  /**
   * A file path: at most 4096 bytes and 256 components of 1..255 bytes, no NUL, no "." or
   * ".." component. Empty is the root directory.
   */
  static void path(String op, String field, String path) {
    if (path == null) {
      throw Errors.invalid(op, "EINVAL: " + field + ": no path");
    }
    int n = utf8(path).length;
    if (n > MAX_PATH_BYTES) {
      throw Errors.invalid(op, "ENAMETOOLONG: " + field + ": a path is at most " + MAX_PATH_BYTES
          + " bytes, not " + n);
    }
    if (path.indexOf('\0') >= 0) {
      throw Errors.invalid(op, "EINVAL: " + field + ": a path may not contain NUL");
    }
    int depth = 0;
    for (String part : path.split("/")) {
      if (part.isEmpty()) {
        continue;
      }
      if (utf8(part).length > MAX_NAME_BYTES) {
        throw Errors.invalid(op, "ENAMETOOLONG: " + field + ": a name is at most "
            + MAX_NAME_BYTES + " bytes, not " + utf8(part).length);
      }
      if (part.equals(".") || part.equals("..")) {
        throw Errors.invalid(op, "EINVAL: " + field + ": \"" + part + "\" is not allowed in a path: "
            + path);
      }
      if (++depth > MAX_PATH_DEPTH) {
        throw Errors.invalid(op, "EINVAL: " + field + ": a path has at most " + MAX_PATH_DEPTH
            + " components");
      }
    }
  }

  static void symlinkTarget(String op, String target) {
    int n = target == null ? 0 : utf8(target).length;
    if (n == 0 || n > MAX_SYMLINK_BYTES) {
      throw Errors.invalid(op, "EINVAL: target: a symlink target is 1.." + MAX_SYMLINK_BYTES
          + " bytes, not " + n);
    }
  }

  static void nonNegative(String op, String field, long v) {
    if (v < 0) {
      throw Errors.invalid(op, field + ": must be >= 0, not " + v);
    }
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
