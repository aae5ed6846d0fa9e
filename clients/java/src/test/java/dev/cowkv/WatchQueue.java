package dev.cowkv;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** A WatchListener that queues what it hears, for tests to take with a timeout. */
final class WatchQueue implements WatchListener {
  /** The end of a watcher closed by the client (onCompleted). */
  static final Object END = new Object();

  private final LinkedBlockingQueue<Object> items = new LinkedBlockingQueue<>();
  private boolean ended;

  @Override
  public void onEvents(List<WatchEvent> events) {
    items.addAll(events);
  }

  @Override
  public void onError(CowkvException error) {
    items.add(error);
  }

  @Override
  public void onCompleted() {
    items.add(END);
  }

  /** The same queue as a file watcher's listener ({@link Files#watch}). */
  FileWatchListener files() {
    return new FileWatchListener() {
      @Override
      public void onEvents(List<FileEvent> events) {
        items.addAll(events);
      }

      @Override
      public void onError(CowkvException error) {
        items.add(error);
      }

      @Override
      public void onCompleted() {
        items.add(END);
      }
    };
  }

  /** How many items (events, ends) are queued and not yet taken. */
  int pending() {
    return items.size();
  }

  /** The next n key events within {@code timeout}; the error that ended the watcher is thrown. */
  @SuppressWarnings("unchecked")
  List<WatchEvent> take(int n, Duration timeout) throws InterruptedException {
    return (List<WatchEvent>) (List<?>) takeAny(n, timeout);
  }

  /** The next n file events ({@link #files()}) within {@code timeout}. */
  @SuppressWarnings("unchecked")
  List<FileEvent> takeFiles(int n, Duration timeout) throws InterruptedException {
    return (List<FileEvent>) (List<?>) takeAny(n, timeout);
  }

  /** Every key event until the clean end (onCompleted), within {@code timeout}. */
  @SuppressWarnings("unchecked")
  List<WatchEvent> drain(Duration timeout) throws InterruptedException {
    return (List<WatchEvent>) (List<?>) drainAny(timeout);
  }

  /** The next n events (WatchEvent or FileEvent) within {@code timeout}. */
  List<Object> takeAny(int n, Duration timeout) throws InterruptedException {
    List<Object> out = new ArrayList<>();
    long deadline = System.nanoTime() + timeout.toNanos();
    while (out.size() < n) {
      Object it = items.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
      if (it == null) {
        throw new AssertionError("only " + out.size() + " events within " + timeout);
      }
      if (it instanceof CowkvException e) {
        throw e;
      }
      if (it == END) {
        throw new AssertionError("the watcher ended after " + out.size() + " events");
      }
      out.add(it);
    }
    return out;
  }

  /** Every event (WatchEvent or FileEvent) until the clean end, within {@code timeout}. */
  List<Object> drainAny(Duration timeout) throws InterruptedException {
    List<Object> out = new ArrayList<>();
    long deadline = System.nanoTime() + timeout.toNanos();
    for (;;) {
      Object it = items.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
      if (it == null) {
        throw new AssertionError("the watcher did not end within " + timeout);
      }
      if (it == END) {
        return out;
      }
      if (it instanceof CowkvException e) {
        throw e;
      }
      out.add(it);
    }
  }
}
