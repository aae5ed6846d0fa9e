package dev.cowkv;

import cowkv.v1.Kv;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Spliterator;
import java.util.Spliterators;
import java.util.function.Function;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/**
 * The keys of a range, fetched one page per call as iteration advances. Each
 * {@link #iterator()} reads the range again from its first page. Pages of a live subvolume are
 * each consistent at their own revision; read a read-only snapshot for one view across pages.
 */
public final class RangeResults implements Iterable<KeyValue> {
  private final Function<Kv.RangeRequest, Kv.RangeResponse> fetch;
  private final Kv.RangeRequest first;
  private final long limit;
  private final long pageSize;

  RangeResults(Function<Kv.RangeRequest, Kv.RangeResponse> fetch, Kv.RangeRequest first,
      long limit, long pageSize) {
    this.fetch = fetch;
    this.first = first;
    this.limit = limit;
    this.pageSize = pageSize;
  }

  @Override
  public Pager iterator() {
    return new Pager();
  }

  public Stream<KeyValue> stream() {
    return StreamSupport.stream(
        Spliterators.spliteratorUnknownSize(iterator(), Spliterator.ORDERED | Spliterator.NONNULL),
        false);
  }

  /** Every key of the range in a list. */
  public List<KeyValue> toList() {
    List<KeyValue> out = new ArrayList<>();
    iterator().forEachRemaining(out::add);
    return out;
  }

  /** Iterates the range, calling the server for the next page when the buffer runs out. */
  public final class Pager implements Iterator<KeyValue> {
    private final ArrayDeque<KeyValue> buffer = new ArrayDeque<>();
    private Kv.RangeRequest next = first;
    private long yielded;
    private boolean done;
    private long revision = -1;
    private int pages;

    private Pager() {}

    @Override
    public boolean hasNext() {
      if (limit > 0 && yielded >= limit) {
        return false;
      }
      while (buffer.isEmpty()) {
        if (done) {
          return false;
        }
        fetchPage();
      }
      return true;
    }

    @Override
    public KeyValue next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      yielded++;
      return buffer.poll();
    }

    /** The store revision the last page was read at (-1 before the first page). */
    public long revision() {
      return revision;
    }

    /** Pages fetched so far. */
    public int pages() {
      return pages;
    }

    private void fetchPage() {
      long remaining = limit > 0 ? limit - yielded : 0;
      long page = remaining > 0 && pageSize > 0 ? Math.min(remaining, pageSize)
          : Math.max(remaining, pageSize);
      Kv.RangeResponse resp = fetch.apply(next.toBuilder().setLimit(page).build());
      pages++;
      revision = resp.getRevision();
      for (Kv.KeyValue kv : resp.getKvsList()) {
        buffer.add(KeyValue.fromProto(kv));
      }
      if (resp.getMore() && !resp.getNextPageToken().isEmpty()) {
        next = next.toBuilder().setPageToken(resp.getNextPageToken()).build();
      } else {
        done = true;
      }
    }
  }
}
