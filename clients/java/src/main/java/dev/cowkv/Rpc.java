package dev.cowkv;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import cowkv.v1.AdminGrpc;
import cowkv.v1.FilesGrpc;
import cowkv.v1.KVGrpc;
import cowkv.v1.LeaseGrpc;
import cowkv.v1.SubvolumesGrpc;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.AbstractStub;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The channel, the five service stubs, deadlines and the bearer token; shared by the client
 * and every object it hands out. Every RPC goes through {@link #call}, which turns gRPC errors
 * into {@link CowkvException}s.
 */
final class Rpc {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  final ManagedChannel channel;
  final Duration deadline;
  final Duration streamDeadline;
  /** The KV.Watch streams the client's watchers share (one set per connection). */
  final WatchStreams watchStreams;
  private final SubvolumesGrpc.SubvolumesBlockingStub subvolumes;
  private final KVGrpc.KVBlockingStub kv;
  private final FilesGrpc.FilesBlockingStub files;
  private final FilesGrpc.FilesStub filesAsync;
  private final AdminGrpc.AdminBlockingStub admin;
  private final LeaseGrpc.LeaseBlockingStub lease;
  private final LeaseGrpc.LeaseStub leaseAsync;
  private final KVGrpc.KVStub kvAsync;
  private final KVGrpc.KVFutureStub kvFuture;
  private final SubvolumesGrpc.SubvolumesFutureStub subvolumesFuture;
  private final SubvolumesGrpc.SubvolumesStub subvolumesAsync;

  /** A copy whose calls, unary and streaming, have the deadline {@code d} (withDeadline). */
  private Rpc(Rpc base, Duration d) {
    this.channel = base.channel;
    this.deadline = d;
    this.streamDeadline = d;
    this.watchStreams = base.watchStreams;
    this.subvolumes = base.subvolumes;
    this.kv = base.kv;
    this.files = base.files;
    this.filesAsync = base.filesAsync;
    this.admin = base.admin;
    this.lease = base.lease;
    this.leaseAsync = base.leaseAsync;
    this.kvAsync = base.kvAsync;
    this.kvFuture = base.kvFuture;
    this.subvolumesFuture = base.subvolumesFuture;
    this.subvolumesAsync = base.subvolumesAsync;
  }

  Rpc withDeadline(Duration d) {
    if (d == null || d.isNegative() || d.isZero()) {
      throw Errors.invalid("withDeadline", "deadline: " + d + " is not a positive duration");
    }
    return new Rpc(this, d);
  }

  Rpc(CowkvOptions options) {
    ChannelCredentials creds;
    if (options.tls()) {
      TlsChannelCredentials.Builder tls = TlsChannelCredentials.newBuilder();
      if (options.trustedCertificates() != null) {
        try {
          tls.trustManager(options.trustedCertificates().toFile());
        } catch (IOException e) {
          throw new UncheckedIOException("cowkv: cannot read " + options.trustedCertificates(), e);
        }
      }
      creds = tls.build();
    } else {
      creds = InsecureChannelCredentials.create();
    }
    ManagedChannelBuilder<?> b = Grpc.newChannelBuilder(options.address(), creds)
        .maxInboundMessageSize(CowkvOptions.MAX_MESSAGE_BYTES);
    if (options.authority() != null) {
      b.overrideAuthority(options.authority());
    }
    if (options.retryUnavailable() != null) {
      b.defaultServiceConfig(options.retryUnavailable().serviceConfig()).enableRetry();
    }
    if (options.token() != null && !options.token().isEmpty()) {
      b.intercept(bearer(options.token()));
    }
    this.channel = b.build();
    this.deadline = options.defaultDeadline();
    this.streamDeadline = options.streamDeadline();
    this.watchStreams = new WatchStreams();
    Channel ch = channel;
    this.subvolumes = SubvolumesGrpc.newBlockingStub(ch);
    this.kv = KVGrpc.newBlockingStub(ch);
    this.files = FilesGrpc.newBlockingStub(ch);
    this.filesAsync = FilesGrpc.newStub(ch);
    this.admin = AdminGrpc.newBlockingStub(ch);
    this.lease = LeaseGrpc.newBlockingStub(ch);
    this.leaseAsync = LeaseGrpc.newStub(ch);
    this.kvAsync = KVGrpc.newStub(ch);
    this.kvFuture = KVGrpc.newFutureStub(ch);
    this.subvolumesFuture = SubvolumesGrpc.newFutureStub(ch);
    this.subvolumesAsync = SubvolumesGrpc.newStub(ch);
  }

  /** KV calls that return futures, under the unary deadline. */
  KVGrpc.KVFutureStub kvFuture() {
    return withDeadline(kvFuture, deadline);
  }

  /** Subvolumes calls that return futures, under the unary deadline. */
  SubvolumesGrpc.SubvolumesFutureStub subvolumesFuture() {
    return withDeadline(subvolumesFuture, deadline);
  }

  /**
   * Starts one call through a future stub and maps its answer: the future completes with
   * {@code map}'s result, or exceptionally with the CowkvException of the status (named after
   * {@code op}). Cancelling it cancels the call. A request the client refuses (an exception of
   * {@code start}) is a future failed at once.
   */
  static <R, T> CompletableFuture<T> future(String op, Supplier<ListenableFuture<R>> start,
      Function<R, T> map) {
    ListenableFuture<R> call;
    try {
      call = start.get();
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(Errors.from(e, op));
    }
    CompletableFuture<T> out = new CompletableFuture<>() {
      @Override
      public boolean cancel(boolean mayInterruptIfRunning) {
        call.cancel(true); // cancels the RPC
        return super.cancel(mayInterruptIfRunning);
      }
    };
    Futures.addCallback(call, new FutureCallback<R>() {
      @Override
      public void onSuccess(R r) {
        try {
          out.complete(map.apply(r));
        } catch (RuntimeException e) {
          out.completeExceptionally(Errors.from(e, op));
        }
      }

      @Override
      public void onFailure(Throwable t) {
        out.completeExceptionally(Errors.from(t, op));
      }
    }, MoreExecutors.directExecutor());
    return out;
  }

  SubvolumesGrpc.SubvolumesBlockingStub subvolumes() {
    return withDeadline(subvolumes, deadline);
  }

  KVGrpc.KVBlockingStub kv() {
    return withDeadline(kv, deadline);
  }

  FilesGrpc.FilesBlockingStub files() {
    return withDeadline(files, deadline);
  }

  /** Send streams, under the stream deadline. */
  SubvolumesGrpc.SubvolumesBlockingStub subvolumesStream() {
    return withDeadline(subvolumes, streamDeadline);
  }

  /** Receive streams, under the stream deadline. */
  SubvolumesGrpc.SubvolumesStub subvolumesAsyncStream() {
    return withDeadline(subvolumesAsync, streamDeadline);
  }

  FilesGrpc.FilesBlockingStub filesStream() {
    return withDeadline(files, streamDeadline);
  }

  FilesGrpc.FilesStub filesAsyncStream() {
    return withDeadline(filesAsync, streamDeadline);
  }

  AdminGrpc.AdminBlockingStub admin(Duration timeout) {
    return withDeadline(admin, timeout != null ? timeout : deadline);
  }

  LeaseGrpc.LeaseBlockingStub lease() {
    return withDeadline(lease, deadline);
  }

  /** A KeepAlive call under the unary deadline (one request, one answer). */
  LeaseGrpc.LeaseStub leaseAsync() {
    return withDeadline(leaseAsync, deadline);
  }

  /** A Watch stream without a deadline: a watcher lives until closed. */
  KVGrpc.KVStub kvStream() {
    return kvAsync;
  }

  /** A KeepAlive stream without a deadline: a background keep-alive lives until closed. */
  LeaseGrpc.LeaseStub leaseStream() {
    return leaseAsync;
  }

  /** Runs one blocking call; gRPC errors become CowkvExceptions named after {@code op}. */
  static <T> T call(String op, Supplier<T> fn) {
    try {
      return fn.get();
    } catch (RuntimeException e) {
      throw Errors.from(e, op);
    }
  }

  private static <S extends AbstractStub<S>> S withDeadline(S stub, Duration d) {
    return d == null ? stub : stub.withDeadlineAfter(d.toNanos(), TimeUnit.NANOSECONDS);
  }

  private static ClientInterceptor bearer(String token) {
    String value = "Bearer " + token;
    return new ClientInterceptor() {
      @Override
      public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method,
          CallOptions callOptions, Channel next) {
        return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(
            next.newCall(method, callOptions)) {
          @Override
          public void start(Listener<R> listener, Metadata headers) {
            headers.put(AUTHORIZATION, value);
            super.start(listener, headers);
          }
        };
      }
    };
  }
}
