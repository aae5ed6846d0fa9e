/**
 * Leases (service cowkv.v1.Lease, etcd's lease API) of one subvolume:
 *
 *     const leases = sv.leases;
 *     const { id } = await leases.grant(10);            // TTL 10 s
 *     await sv.put("svc/a", "1", { lease: id });         // deleted when the lease goes
 *     const ka = leases.keepAlive(id);                    // renews every TTL/3
 *     ...
 *     await ka.stop();
 *     await leases.revoke(id);                            // deletes svc/a in one revision
 *
 * Lease ids are int64 (a server-picked one is a random positive int64), so
 * they are `bigint`; methods also take a `number`. An unknown lease (or one
 * whose deadline passed) is NotFoundError (ErrorInfo reason LEASE_NOT_FOUND).
 */
import * as grpc from "@grpc/grpc-js";
import {
  LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseLeasesResponse, LeaseRevokeResponse,
  LeaseTimeToLiveResponse,
} from "./gen/cowkv/v1/lease";
import { CowkvError, NotFoundError, toCowkvError } from "./errors";
import { CallOptions, Rpc } from "./rpc";
import { Durability, durabilityPb, num } from "./types";
import { checkLeaseId, checkLeaseTtl, checkSubvolume } from "./validate";

/** A lease id: int64, returned as bigint, accepted as either. */
export type LeaseId = bigint | number;

export interface LeaseGrant {
  /** The lease's id (the one asked for, or the server's pick). */
  id: bigint;
  /** The TTL granted, in seconds. */
  ttl: number;
}

export interface LeaseInfo {
  id: bigint;
  /** Seconds left (rounded up); 0 once the deadline passed until expiry runs. */
  ttl: number;
  /** The TTL it was granted with, in seconds. */
  grantedTtl: number;
  /** The attached keys, sorted (only when asked for with `keys`). */
  keys: Buffer[];
}

export interface KeepAliveOptions {
  /** Stops the keep-alive when aborted (as stop()). */
  signal?: AbortSignal;
}

/** The leases of one subvolume (`sv.leases`). */
export class Leases {
  constructor(private readonly rpc: Rpc, /** The subvolume ("" = "default"). */ readonly subvolume: string) {}

  /**
   * A new lease of `ttl` seconds (1..9,000,000,000); `id` 0 or omitted = the
   * server picks one. AlreadyExistsError for an id in use. No new revision.
   */
  async grant(ttl: number, opts: { id?: LeaseId; durability?: Durability } = {}, call?: CallOptions): Promise<LeaseGrant> {
    checkSubvolume("leaseGrant", this.subvolume);
    checkLeaseTtl("leaseGrant", ttl);
    const id = BigInt(opts.id ?? 0);
    checkLeaseId("leaseGrant", "id", id);
    const m = await this.rpc.unary<unknown, LeaseGrantResponse>("leaseGrant", this.rpc.lease, "grant",
      { subvolume: this.subvolume, ttl: BigInt(ttl), id, durability: durabilityPb(opts.durability) }, call);
    return { id: m.id, ttl: num(m.ttl) };
  }

  /**
   * Deletes the lease and every key attached to it, in one revision
   * (resolved; the current revision if no key was left). NotFoundError if
   * there is no such lease.
   */
  async revoke(id: LeaseId, opts: { durability?: Durability } = {}, call?: CallOptions): Promise<number> {
    checkSubvolume("leaseRevoke", this.subvolume);
    const m = await this.rpc.unary<unknown, LeaseRevokeResponse>("leaseRevoke", this.rpc.lease, "revoke",
      { subvolume: this.subvolume, id: BigInt(id), durability: durabilityPb(opts.durability) }, call);
    return num(m.revision);
  }

  /**
   * One keep-alive on a KeepAlive stream of its own: restarts the lease's
   * TTL and resolves to it (seconds). NotFoundError if the lease is gone.
   */
  async keepAliveOnce(id: LeaseId, call?: CallOptions): Promise<number> {
    checkSubvolume("leaseKeepAlive", this.subvolume);
    const stream = this.rpc.lease.keepAlive(this.rpc.metadata(), this.rpc.options(call));
    const unwatch = Rpc.watch(stream, call?.signal);
    try {
      const ttl = await new Promise<number>((resolve, reject) => {
        stream.once("data", (m: LeaseKeepAliveResponse) => resolve(num(m.ttl)));
        stream.once("error", (err) => reject(toCowkvError(err, "leaseKeepAlive")));
        stream.once("end", () => reject(toCowkvError({ code: grpc.status.INTERNAL, details: "KeepAlive stream ended without an answer" }, "leaseKeepAlive")));
        stream.write(LeaseKeepAliveRequest.fromPartial({ subvolume: this.subvolume, id: BigInt(id) }));
      });
      if (ttl <= 0) throw new NotFoundError(`lease ${id} not found`, grpc.status.NOT_FOUND, "leaseKeepAlive");
      return ttl;
    } finally {
      unwatch();
      stream.removeAllListeners("data");
      stream.on("error", () => {}); // the cancel below surfaces as CANCELLED
      stream.cancel();
    }
  }

  /**
   * Keeps the lease alive in the background on one KeepAlive stream,
   * renewing every TTL/3, until the handle's stop() (or opts.signal).
   * The handle's `lost` turns true if the lease was found gone and `error`
   * holds a failure that ended the stream; `done` resolves when it ends.
   */
  keepAlive(id: LeaseId, opts: KeepAliveOptions = {}): KeepAlive {
    checkSubvolume("leaseKeepAlive", this.subvolume);
    return new KeepAlive(this.rpc, this.subvolume, BigInt(id), opts.signal);
  }

  /** The lease's granted and remaining TTL, and its keys with `keys`. NotFoundError if absent. */
  async timeToLive(id: LeaseId, opts: { keys?: boolean } = {}, call?: CallOptions): Promise<LeaseInfo> {
    checkSubvolume("leaseTimeToLive", this.subvolume);
    const m = await this.rpc.unary<unknown, LeaseTimeToLiveResponse>("leaseTimeToLive", this.rpc.lease, "timeToLive",
      { subvolume: this.subvolume, id: BigInt(id), keys: !!opts.keys }, call);
    return { id: m.id, ttl: num(m.ttl), grantedTtl: num(m.grantedTtl), keys: m.keys.map((k) => Buffer.from(k)) };
  }

  /** The ids of the subvolume's leases, in increasing order. */
  async list(call?: CallOptions): Promise<bigint[]> {
    checkSubvolume("leaseList", this.subvolume);
    const m = await this.rpc.unary<unknown, LeaseLeasesResponse>("leaseList", this.rpc.lease, "leases",
      { subvolume: this.subvolume }, call);
    return m.ids;
  }
}

/** The shortest pause between two keep-alives, in milliseconds. */
const MIN_KEEP_ALIVE_MS = 100;

/**
 * A background keep-alive of one lease (Leases.keepAlive): one request on
 * its KeepAlive stream now, then one every TTL/3 after each answer. Ends on
 * stop(), on an abort of its signal, when the lease is found gone (`lost`),
 * or when the stream fails (`error`). Its timer does not keep Node running.
 */
export class KeepAlive {
  /** The lease was found gone (the stream answered ttl 0). */
  lost = false;
  /** The failure that ended the stream, if any (not set by stop()). */
  error?: CowkvError;
  /** The TTL of the last answer, in seconds (0 before the first). */
  ttl = 0;
  /** Resolves once the keep-alive has ended (never rejects). */
  readonly done: Promise<void>;
  private stopped = false;
  private timer?: NodeJS.Timeout;
  private readonly stream: grpc.ClientDuplexStream<LeaseKeepAliveRequest, LeaseKeepAliveResponse>;
  private finish!: () => void;
  private readonly unwatch: () => void;

  constructor(rpc: Rpc, private readonly subvolume: string, readonly id: bigint, signal?: AbortSignal) {
    this.done = new Promise<void>((resolve) => { this.finish = resolve; });
    // No deadline: the stream lives as long as the keep-alive.
    this.stream = rpc.lease.keepAlive(rpc.metadata(), {});
    this.stream.on("data", (m: LeaseKeepAliveResponse) => this.answered(num(m.ttl)));
    this.stream.on("error", (err) => {
      if (!this.stopped) this.error = toCowkvError(err, "leaseKeepAlive");
      this.end();
    });
    this.stream.on("end", () => this.end());
    this.unwatch = signal ? Rpc.watch({ cancel: () => void this.stop() }, signal) : () => {};
    if (!this.stopped) this.send();
  }

  /** Stops renewing and closes the stream; resolves once it has ended. The lease itself stays until its TTL runs out. */
  stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.stream.cancel();
      this.end();
    }
    return this.done;
  }

  private send(): void {
    this.stream.write(LeaseKeepAliveRequest.fromPartial({ subvolume: this.subvolume, id: this.id }));
  }

  private answered(ttl: number): void {
    if (this.stopped) return;
    if (ttl <= 0) {
      this.lost = true;
      this.stopped = true;
      this.stream.cancel();
      this.end();
      return;
    }
    this.ttl = ttl;
    this.timer = setTimeout(() => {
      if (!this.stopped) this.send();
    }, Math.max((ttl * 1000) / 3, MIN_KEEP_ALIVE_MS));
    this.timer.unref();
  }

  private end(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.unwatch?.();
    this.finish();
  }
}
