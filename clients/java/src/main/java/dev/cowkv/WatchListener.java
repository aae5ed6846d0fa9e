package dev.cowkv;

import java.util.List;

/**
 * Receives a {@link Watcher}'s events (as jetcd's Watch.Listener). Calls come one at a time, in
 * order, on a thread of the client's listener pool (never a gRPC thread), so a slow listener holds
 * back neither the KV.Watch stream its watcher shares nor the other watchers; the revisions it has
 * not taken yet wait in its watcher's bounded queue, and one that falls too far behind ({@link
 * Watcher#QUEUED_BATCHES}, {@link Watcher#QUEUED_BYTES}) ends its watcher alone with a {@link
 * SlowReaderException}. Exactly one of {@link #onError} and {@link #onCompleted} ends it. An
 * exception a call throws is logged and dropped.
 */
public interface WatchListener {
  /** Events of one or more whole revisions, in revision order (a fragmented revision is joined first). */
  void onEvents(List<WatchEvent> events);

  /**
   * The server ended the watcher, with a reason: {@link CompactedException} (the start revision
   * is compacted; {@link CompactedException#compactRevision()} is the oldest one still served),
   * {@link SubvolumeDeletedException}, {@link SlowReaderException}, {@link UnavailableException}
   * (the server stops), or the stream failed.
   */
  default void onError(CowkvException error) {}

  /** The watcher ended by {@link Watcher#close()}. */
  default void onCompleted() {}
}
