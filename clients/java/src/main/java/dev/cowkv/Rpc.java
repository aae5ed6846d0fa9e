package dev.cowkv;

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
import java.util.concurrent.TimeUnit;
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
  private final SubvolumesGrpc.SubvolumesBlockingStub subvolumes;
  private final KVGrpc.KVBlockingStub kv;
  private final FilesGrpc.FilesBlockingStub files;
  private final FilesGrpc.FilesStub filesAsync;
  private final AdminGrpc.AdminBlockingStub admin;
  private final LeaseGrpc.LeaseBlockingStub lease;
  private final LeaseGrpc.LeaseStub leaseAsync;
  private final KVGrpc.KVStub kvAsync;

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
    if (options.token() != null && !options.token().isEmpty()) {
      b.intercept(bearer(options.token()));
    }
    this.channel = b.build();
    this.deadline = options.defaultDeadline();
    this.streamDeadline = options.streamDeadline();
    Channel ch = channel;
    this.subvolumes = SubvolumesGrpc.newBlockingStub(ch);
    this.kv = KVGrpc.newBlockingStub(ch);
    this.files = FilesGrpc.newBlockingStub(ch);
    this.filesAsync = FilesGrpc.newStub(ch);
    this.admin = AdminGrpc.newBlockingStub(ch);
    this.lease = LeaseGrpc.newBlockingStub(ch);
    this.leaseAsync = LeaseGrpc.newStub(ch);
    this.kvAsync = KVGrpc.newStub(ch);
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
