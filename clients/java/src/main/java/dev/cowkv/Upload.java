package dev.cowkv;

import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.Function;

/**
 * One client-streaming call sent with gRPC flow control (Files.write, CowkvClient.receive): the
 * sender waits until the call takes another message, so at most one waits in its buffer; the
 * server's one answer, or its error, completes the call's result.
 */
final class Upload<Req, Resp> {
  private final String op;
  private final CompletableFuture<Resp> result = new CompletableFuture<>();
  private final Object ready = new Object();
  private final ClientCallStreamObserver<Req> call;

  /** Starts the call: {@code start} is the async stub's method (e.g. {@code stub::write}). */
  @SuppressWarnings("unchecked")
  Upload(String op, Function<StreamObserver<Resp>, StreamObserver<Req>> start) {
    this.op = op;
    this.call = (ClientCallStreamObserver<Req>) start.apply(observer());
  }

  private ClientResponseObserver<Req, Resp> observer() {
    return new ClientResponseObserver<>() {
      @Override
      public void beforeStart(ClientCallStreamObserver<Req> c) {
        c.setOnReadyHandler(this::wake);
      }

      @Override
      public void onNext(Resp value) {
        result.complete(value);
      }

      @Override
      public void onError(Throwable t) {
        result.completeExceptionally(t);
        wake();
      }

      @Override
      public void onCompleted() {
        result.completeExceptionally(
            new IllegalStateException(op + " ended without a response"));
      }

      private void wake() {
        synchronized (ready) {
          ready.notifyAll();
        }
      }
    };
  }

  /** Whether the server already answered or failed (its error is then in {@link #answer}). */
  boolean done() {
    return result.isDone();
  }

  /**
   * Waits until the call takes another message; false once the server answered or failed the
   * stream early (nothing more should be sent).
   */
  boolean awaitReady() throws InterruptedException {
    synchronized (ready) {
      while (!call.isReady() && !result.isDone()) {
        ready.wait(100);
      }
    }
    return !result.isDone();
  }

  void send(Req message) {
    call.onNext(message);
  }

  /** Half-closes the call unless the server already ended it. */
  void finish() {
    if (!result.isDone()) {
      call.onCompleted();
    }
  }

  /** Cancels the call (the sender failed or was interrupted). */
  void cancel(String why, Throwable cause) {
    call.cancel(why, cause);
  }

  /** The server's answer; its error as the client's exception for {@code op}. */
  Resp answer() {
    try {
      return result.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      call.cancel("interrupted", e);
      throw new CancelledException(null, "interrupted", op, e);
    } catch (ExecutionException e) {
      throw Errors.from(e.getCause(), op);
    }
  }

  /** An interrupted sender: the call cancelled, the client's exception for it. */
  CancelledException interrupted(InterruptedException e) {
    Thread.currentThread().interrupt();
    call.cancel("interrupted", e);
    return new CancelledException(null, "interrupted", op, e);
  }
}
