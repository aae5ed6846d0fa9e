package dev.cowkv;

import java.util.List;

/**
 * Receives a {@link Watcher}'s events (as jetcd's Watch.Listener). Calls come one at a time, in
 * order, on a gRPC thread; while {@link #onEvents} runs, no more of the watcher's responses are
 * read (a listener that is too slow for long makes the server end the watcher with a {@link
 * SlowReaderException}). Exactly one of {@link #onError} and {@link #onCompleted} ends it.
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
