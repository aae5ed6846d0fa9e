package dev.cowkv;

import com.google.protobuf.ByteString;
import cowkv.v1.SubvolumesOuterClass.ReceiveRequest;
import cowkv.v1.SubvolumesOuterClass.ReceiveResponse;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * One Receive call (CowkvClient.receive): the source's chunks, cut to at most {@link
 * #CHUNK_BYTES}, sent with gRPC flow control (at most one message waits in the call's buffer), the
 * options in the first message. An exception from the source cancels the call and is rethrown as
 * it is.
 */
final class Receiver {
  /** Bytes per ReceiveRequest (the server takes at most 4 MiB per message). */
  static final int CHUNK_BYTES = 1 << 20;

  private Receiver() {}

  static ReceiveResult run(Rpc rpc, Iterator<byte[]> source, ReceiveOptions o) {
    Upload<ReceiveRequest, ReceiveResponse> call =
        new Upload<>("receive", rpc.subvolumesAsyncStream()::receive);
    try {
      upload(call, source, o);
    } catch (InterruptedException e) {
      throw call.interrupted(e);
    } catch (RuntimeException | Error e) {
      call.cancel("the receive's source failed", e);
      throw e;
    }
    return ReceiveResult.fromProto(call.answer());
  }

  private static void upload(Upload<ReceiveRequest, ReceiveResponse> call,
      Iterator<byte[]> source, ReceiveOptions o) throws InterruptedException {
    ReceiveRequest.Builder first = ReceiveRequest.newBuilder().setName(o.name())
        .setResumable(o.resumable()).setDryRun(o.dryRun());
    boolean sent = false;
    while (source.hasNext() && !call.done()) {
      byte[] b = source.next();
      for (int off = 0; off < b.length; off += CHUNK_BYTES) {
        if (!call.awaitReady()) {
          return; // the server failed the stream early; its error is the call's answer
        }
        ByteString piece = ByteString.copyFrom(b, off, Math.min(CHUNK_BYTES, b.length - off));
        call.send((sent ? ReceiveRequest.newBuilder() : first).setChunk(piece).build());
        sent = true;
      }
    }
    if (!sent && !call.done()) {
      call.send(first.build());
    }
    call.finish();
  }

  /** The bytes of {@code in}, CHUNK_BYTES at a time; a read error is an UncheckedIOException. */
  static Iterator<byte[]> chunks(InputStream in) {
    return new Iterator<>() {
      private byte[] next;
      private boolean end;

      @Override
      public boolean hasNext() {
        if (next == null && !end) {
          try {
            byte[] b = in.readNBytes(CHUNK_BYTES);
            if (b.length == 0) {
              end = true;
            } else {
              next = b;
            }
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
        return next != null;
      }

      @Override
      public byte[] next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        byte[] b = next;
        next = null;
        return b;
      }
    };
  }
}
