package dev.cowkv;

/**
 * One extent of a file, as Linux's FIEMAP reports it.
 *
 * @param logical file offset
 * @param physical device byte address (0 for inline data)
 * @param length bytes
 * @param flags bit mask of the FLAG_* values (Linux's FIEMAP_EXTENT_*)
 */
public record Extent(long logical, long physical, long length, int flags) {
  /** The file's last extent. */
  public static final int FLAG_LAST = 0x1;
  /** Not aligned to the sector size (inline data). */
  public static final int FLAG_NOT_ALIGNED = 0x100;
  /** Stored inline in a metadata node. */
  public static final int FLAG_INLINE = 0x200;
  /** Shared with another file or snapshot (reflink, snapshot). */
  /** Preallocated (fallocate): reads as zeros. */
  public static final int FLAG_UNWRITTEN = 0x800;
  public static final int FLAG_SHARED = 0x2000;

  public boolean shared() {
    return (flags & FLAG_SHARED) != 0;
  }

  public boolean inline() {
    return (flags & FLAG_INLINE) != 0;
  }

  public boolean last() {
    return (flags & FLAG_LAST) != 0;
  }
}
