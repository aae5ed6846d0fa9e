package dev.cowkv;

import cowkv.v1.SubvolumesOuterClass;
import io.grpc.Context;
import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * The chunks of one send stream, in order, as they arrive ({@link CowkvClient#send}). Read it to
 * its end ({@link #stats()} is then set) or close it, which cancels the call. Not thread-safe.
 *
 * <pre>{@code
 * try (SendStream s = a.send("snap2", SendOptions.incremental("snap1"))) {
 *   ReceiveResult r = b.receive(s, ReceiveOptions.named("copy"));
 * }
 * }</pre>
 */
public final class SendStream implements Iterator<byte[]>, AutoCloseable {
  private final Context.CancellableContext ctx;
  private final Iterator<SubvolumesOuterClass.SendResponse> it;
  private byte[] next;
  private SendStats stats;
  private boolean done;

  SendStream(Context.CancellableContext ctx, Iterator<SubvolumesOuterClass.SendResponse> it) {
    this.ctx = ctx;
    this.it = it;
  }

  /** Whether another chunk follows; the call's error as a CowkvException. */
  @Override
  public boolean hasNext() {
    while (next == null && !done) {
      SubvolumesOuterClass.SendResponse m;
      try {
        if (!it.hasNext()) {
          done = true;
          ctx.cancel(null);
          if (stats == null) {
            throw new InternalException(null, "the stream ended without its stats message", "send",
                null);
          }
          break;
        }
        m = it.next();
      } catch (CowkvException e) {
        throw e;
      } catch (RuntimeException e) {
        done = true;
        ctx.cancel(null);
        throw Errors.from(e, "send");
      }
      if (m.hasStats()) {
        stats = SendStats.fromProto(m.getStats());
      }
      if (!m.getChunk().isEmpty()) {
        next = m.getChunk().toByteArray();
      }
    }
    return next != null;
  }

  /** The next chunk (never empty). */
  @Override
  public byte[] next() {
    if (!hasNext()) {
      throw new NoSuchElementException("send stream: no more chunks");
    }
    byte[] b = next;
    next = null;
    return b;
  }

  /** What the send did, once the stream was read to its end; else null. */
  public SendStats stats() {
    return stats;
  }

  /** Cancels the call if the stream was not read to its end. */
  @Override
  public void close() {
    done = true;
    ctx.cancel(null);
  }
}
