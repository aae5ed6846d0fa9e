package dev.cowkv;

import java.util.List;

/**
 * Receives a file watcher's events ({@link Files#watch}), one call at a time on a thread of the
 * client's listener pool, as {@link WatchListener} does.
 */
@FunctionalInterface
public interface FileWatchListener {
  /** Events of one or more whole revisions, in revision order. */
  void onEvents(List<FileEvent> events);

  /**
   * The server ended the watcher, with a reason: {@link CompactedException} (the start revision
   * is before what was recorded: the tree changed while nobody watched it), {@link
   * SubvolumeDeletedException}, {@link SlowReaderException}, {@link UnavailableException}, or the
   * stream failed.
   */
  default void onError(CowkvException error) {}

  /** The watcher ended by {@link Watcher#close()}. */
  default void onCompleted() {}
}
