/** The call layer: deadlines, the bearer token, cancellation and error mapping. */
import * as grpc from "@grpc/grpc-js";
import { AdminClient } from "./gen/cowkv/v1/admin";
import { FilesClient } from "./gen/cowkv/v1/files";
import { KVClient } from "./gen/cowkv/v1/kv";
import { LeaseClient } from "./gen/cowkv/v1/lease";
import { SubvolumesClient } from "./gen/cowkv/v1/subvolumes";
import { toCowkvError } from "./errors";
import { WatchMux } from "./watch";

/** Per-call options, accepted as the last argument of every method. */
export interface CallOptions {
  /** Deadline of this call in milliseconds (default: the client's defaultTimeoutMs). */
  timeoutMs?: number;
  /** Cancels the call when aborted (the call then fails with CancelledError). */
  signal?: AbortSignal;
}

type Callback<Res> = (err: grpc.ServiceError | null, res: Res) => void;
type UnaryMethod<Req, Res> = (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: Callback<Res>) => grpc.ClientUnaryCall;

export class Rpc {
  /** The KV.Watch streams the client's watchers share. */
  readonly watches: WatchMux = new WatchMux(this);

  constructor(
    readonly subvolumes: SubvolumesClient,
    readonly kv: KVClient,
    readonly files: FilesClient,
    readonly admin: AdminClient,
    private readonly token: string | undefined,
    private readonly defaultTimeoutMs: number,
    readonly lease: LeaseClient,
  ) {}

  metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.token) md.set("authorization", `Bearer ${this.token}`);
    return md;
  }

  /** The client's default deadline in milliseconds (0 = none). */
  defaultTimeout(): number {
    return this.defaultTimeoutMs;
  }

  options(call?: CallOptions): Partial<grpc.CallOptions> {
    const ms = call?.timeoutMs ?? this.defaultTimeoutMs;
    return ms > 0 ? { deadline: new Date(Date.now() + ms) } : {};
  }

  /** Hooks an AbortSignal to a call; returns the unhook function. */
  static watch(call: { cancel(): void }, signal?: AbortSignal): () => void {
    if (!signal) return () => {};
    if (signal.aborted) {
      call.cancel();
      return () => {};
    }
    const onAbort = () => call.cancel();
    signal.addEventListener("abort", onAbort, { once: true });
    return () => signal.removeEventListener("abort", onAbort);
  }

  /** One unary call; rejects with a CowkvError. */
  unary<Req, Res>(op: string, client: object, method: string, req: Req, call?: CallOptions): Promise<Res> {
    const fn = (client as Record<string, UnaryMethod<Req, Res>>)[method].bind(client);
    return new Promise<Res>((resolve, reject) => {
      let unwatch = () => {};
      const c = fn(req, this.metadata(), this.options(call), (err, res) => {
        unwatch();
        if (err) reject(toCowkvError(err, op));
        else resolve(res);
      });
      unwatch = Rpc.watch(c, call?.signal);
    });
  }

  close(): void {
    // The five clients share one channel.
    this.kv.close();
  }
}
