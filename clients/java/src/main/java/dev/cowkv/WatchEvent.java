package dev.cowkv;

/**
 * One change of one key (etcd's mvccpb.Event), from a {@link Watcher}.
 *
 * @param type what happened
 * @param kv the key as the change left it; for a delete only the key and {@code modRevision}
 *     (the delete's revision)
 * @param prevKv the key before the change ({@link WatchOptions#prevKv()} watchers; null when
 *     the change created it)
 */
public record WatchEvent(Type type, KeyValue kv, KeyValue prevKv) {
  /** What happened to a key. */
  public enum Type {
    /** The key was written (created or changed). */
    PUT,
    /** The key was deleted (a delete, a delete-range, or its lease's end). */
    DELETE
  }

  /** The revision of the change. */
  public long revision() {
    return kv.modRevision();
  }
}
