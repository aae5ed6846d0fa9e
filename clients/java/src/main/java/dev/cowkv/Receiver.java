package dev.cowkv;

import com.google.protobuf.ByteString;
import cowkv.v1.SubvolumesOuterClass.ReceiveRequest;
import cowkv.v1.SubvolumesOuterClass.ReceiveResponse;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

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
    CompletableFuture<ReceiveResponse> result = new CompletableFuture<>();
    Object ready = new Object();
    ClientResponseObserver<ReceiveRequest, ReceiveResponse> observer =
        new ClientResponseObserver<>() {
          @Override
          public void beforeStart(ClientCallStreamObserver<ReceiveRequest> call) {
            call.setOnReadyHandler(() -> {
              synchronized (ready) {
                ready.notifyAll();
              }
            });
          }

          @Override
          public void onNext(ReceiveResponse value) {
            result.complete(value);
          }

          @Override
          public void onError(Throwable t) {
            result.completeExceptionally(t);
            synchronized (ready) {
              ready.notifyAll();
            }
          }

          @Override
          public void onCompleted() {
            result.completeExceptionally(new IllegalStateException("Receive ended without a response"));
          }
        };
    ClientCallStreamObserver<ReceiveRequest> call =
        (ClientCallStreamObserver<ReceiveRequest>) rpc.subvolumesAsyncStream().receive(observer);
    try {
      upload(call, source, o, result, ready);
      return ReceiveResult.fromProto(result.get());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      call.cancel("interrupted", e);
      throw new CancelledException(null, "interrupted", "receive", e);
    } catch (ExecutionException e) {
      throw Errors.from(e.getCause(), "receive");
    } catch (RuntimeException | Error e) {
      call.cancel("the receive's source failed", e);
      throw e;
    }
  }

  private static void upload(ClientCallStreamObserver<ReceiveRequest> call, Iterator<byte[]> source,
      ReceiveOptions o, CompletableFuture<ReceiveResponse> result, Object ready)
      throws InterruptedException {
    ReceiveRequest.Builder first = ReceiveRequest.newBuilder().setName(o.name())
        .setResumable(o.resumable()).setDryRun(o.dryRun());
    boolean sent = false;
    while (source.hasNext() && !result.isDone()) {
      byte[] b = source.next();
      for (int off = 0; off < b.length && !result.isDone(); off += CHUNK_BYTES) {
        synchronized (ready) {
          while (!call.isReady() && !result.isDone()) {
            ready.wait(100);
          }
        }
        if (result.isDone()) {
          break; // the server failed the stream early; its error is in result
        }
        ByteString piece = ByteString.copyFrom(b, off, Math.min(CHUNK_BYTES, b.length - off));
        call.onNext((sent ? ReceiveRequest.newBuilder() : first).setChunk(piece).build());
        sent = true;
      }
    }
    if (!result.isDone()) {
      if (!sent) {
        call.onNext(first.build());
      }
      call.onCompleted();
    }
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
