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

  /** The next n events within {@code timeout}; the error that ended the watcher is thrown. */
  List<WatchEvent> take(int n, Duration timeout) throws InterruptedException {
    List<WatchEvent> out = new ArrayList<>();
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
      out.add((WatchEvent) it);
    }
    return out;
  }

  /** Every event until the clean end (onCompleted), within {@code timeout}. */
  List<WatchEvent> drain(Duration timeout) throws InterruptedException {
    List<WatchEvent> out = new ArrayList<>();
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
      out.add((WatchEvent) it);
    }
  }
}
