/**
 * Watch (KV.Watch, etcd's watch): the changes of a key or a range as they
 * become durable, in revision order.
 *
 *     const ac = new AbortController();
 *     const w = sv.watch("cfg/", { prefix: true, prevKv: true, signal: ac.signal });
 *     await w.ready();                       // created: every later change is seen
 *     for await (const ev of w) {            // ends on w.cancel(), abort, or break
 *       console.log(ev.type, ev.kv.key.toString(), ev.revision);
 *     }
 *
 * A client's watchers share KV.Watch streams, up to the server's 1,000 per
 * stream (one stream costs the server a thread and counts once against its
 * --max-calls-per-client); a stream closes with its last watcher. Each
 * watcher holds at most WATCH_QUEUE_BYTES of unread events: a reader that
 * falls further behind ends its own watcher with SlowReaderError, never
 * holding back the others. All events of one revision are delivered
 * together (a fragmented revision is joined first). The server ends a watcher by itself only with a reason,
 * thrown by the iteration (and by ready()): CompactedError (the start is
 * older than the history; `compactRevision` is the oldest revision still
 * served — restart there), SubvolumeDeletedError, SlowReaderError, or the
 * error a refused create would get as a call (NotFoundError for an unknown
 * subvolume, InvalidArgumentError, ...); UnavailableError when the server stops.
 */
import * as grpc from "@grpc/grpc-js";
import {
  FileWatchEvent as PbFileWatchEvent, fileWatchEvent_TypeToJSON, WatchCancelCode, WatchCreateRequest,
  WatchCreateRequest_FilterType, WatchEvent as PbWatchEvent, WatchEvent_EventType, WatchRequest, WatchResponse,
} from "./gen/cowkv/v1/kv";
import {
  classFor, CompactedError, CowkvError, DeadlineExceededError, ERROR_CLASSES, SlowReaderError, toCowkvError,
} from "./errors";
import { SPEC_WATCH_CANCEL } from "./spec.gen";
import { Rpc } from "./rpc";
import { KeyValue, kvFrom, num } from "./types";
import { Bytes, checkSubvolume, invalid, MAX_KEY_BYTES, MAX_PATH_BYTES, toBuffer } from "./validate";

export type WatchEventType = "PUT" | "DELETE";

/** One change of one key (etcd's mvccpb.Event). */
export interface WatchEvent {
  type: WatchEventType;
  /** The key as the change left it; for a DELETE only `key` and `modRevision` (the delete's revision). */
  kv: KeyValue;
  /** The key before the change (`prevKv` watchers; undefined when the change created it). */
  prevKv?: KeyValue;
  /** The revision of the change (kv.modRevision). */
  revision: number;
}

/**
 * One change of the file tree (a file watcher's event, Subvolume.watchFiles;
 * docs/api.md "File watchers").
 */
export interface FileEvent {
  /** "CREATE", "MKDIR", "SYMLINK", "LINK", "UNLINK", "RMDIR", "RENAME", "EXCHANGE", "MODIFY", "ATTRIB" or "XATTR". */
  type: string;
  revision: number;
  ino: number;
  /** Relative to the subvolume root, no leading "/". A data or attribute change names one of the inode's names. */
  path: string;
  /** The other path of a RENAME or EXCHANGE ("" otherwise). */
  newPath: string;
  /** The paths were too long to record (both empty): rescan. */
  pathsLost: boolean;
}

/** Subvolume.watchFiles's options. */
export interface FileWatchOptions {
  /** The first revision to show, replayed from what was recorded (CompactedError if before it); 0 or omitted = the next change. */
  startRevision?: number;
  /** Ask for empty responses now and then while nothing changes. */
  progressNotify?: boolean;
  /** Ends the watcher when aborted (as cancel()). */
  signal?: AbortSignal;
}

export interface WatchOptions {
  /** Watch every key that starts with the key. */
  prefix?: boolean;
  /** Watch the keys in [key, end) ("\0": every key from key on). Not with prefix. */
  end?: Bytes;
  /** The first revision to show, served from the history (CompactedError if gone); 0 or omitted = the next change. */
  startRevision?: number;
  /** Each event carries the key before the change. */
  prevKv?: boolean;
  /** Event types to leave out. */
  filters?: ("noPut" | "noDelete")[];
  /** Ask for empty responses now and then while nothing changes (`revision` then advances). */
  progressNotify?: boolean;
  /** Ends the watcher when aborted (as cancel()). */
  signal?: AbortSignal;
}

/** etcd's GetPrefixRangeEnd: the end of the keys starting with `prefix` ("\0" = every key for 0xff bytes). */
export function prefixEnd(prefix: Buffer): Buffer {
  let n = prefix.length;
  while (n > 0 && prefix[n - 1] === 0xff) n--;
  if (n === 0) return Buffer.from([0]);
  const end = Buffer.from(prefix.subarray(0, n));
  end[n - 1]++;
  return end;
}

/** A watcher's unread events, in bytes, past which it ends with SlowReaderError (one larger revision still passes alone). */
export const WATCH_QUEUE_BYTES = 16 << 20;
/** The server's bound of watchers per stream (docs/api.md "Watch"). */
const MAX_WATCHERS_PER_STREAM = 1000;

type AnyEvent = WatchEvent | FileEvent;
type Waiter = { resolve: (batch: AnyEvent[] | undefined) => void; reject: (e: unknown) => void };

/**
 * One KV.Watch stream shared by up to MAX_WATCHERS_PER_STREAM watchers of a
 * client, each with a client-chosen id unique on the stream (never reused, so
 * a late response for a closed watcher is dropped). It closes with its last
 * watcher; if it fails, every watcher on it ends with the error.
 */
class WatchStream {
  readonly watchers = new Map<bigint, Watch<AnyEvent>>();
  private nextId = 0n;
  dead = false;
  private readonly stream: grpc.ClientDuplexStream<WatchRequest, WatchResponse>;

  constructor(private readonly mux: WatchMux, rpc: Rpc) {
    // No deadline: the stream lives as long as its watchers.
    this.stream = rpc.kv.watch(rpc.metadata(), {});
    this.stream.on("data", (r: WatchResponse) => this.route(r));
    this.stream.on("error", (err) => this.fail(toCowkvError(err, "watch")));
    this.stream.on("end", () => this.fail(toCowkvError({ code: grpc.status.UNAVAILABLE, details: "the watch stream ended" }, "watch")));
  }

  get full(): boolean {
    return this.dead || this.watchers.size >= MAX_WATCHERS_PER_STREAM;
  }

  add(w: Watch<AnyEvent>, create: WatchCreateRequest): bigint {
    const id = ++this.nextId;
    this.watchers.set(id, w);
    this.write({ $case: "createRequest", createRequest: { ...create, watchId: id } });
    return id;
  }

  /** Drops a watcher; with cancel the server is told. The stream closes with its last watcher. */
  remove(id: bigint, cancel: boolean): void {
    if (this.dead || !this.watchers.delete(id)) return;
    if (this.watchers.size === 0) {
      this.close();
      return;
    }
    if (cancel) this.write({ $case: "cancelRequest", cancelRequest: { watchId: id } });
  }

  private write(u: WatchRequest["requestUnion"]): void {
    this.stream.write(WatchRequest.fromPartial({ requestUnion: u }));
  }

  private route(r: WatchResponse): void {
    if (r.watchId < 0n) return; // a progress answer for the whole stream: not asked for
    const w = this.watchers.get(r.watchId);
    if (!w) return; // closed by the client already
    const goesOn = w.onResponse(r);
    if (!goesOn) this.remove(r.watchId, !r.canceled);
  }

  private close(): void {
    this.dead = true;
    this.mux.drop(this);
    this.stream.removeAllListeners("data");
    this.stream.on("error", () => {}); // the cancel surfaces as CANCELLED
    this.stream.cancel();
  }

  private fail(err: CowkvError): void {
    if (this.dead) return;
    this.dead = true;
    this.mux.drop(this);
    const ws = [...this.watchers.values()];
    this.watchers.clear();
    for (const w of ws) w.end(err);
  }
}

/** A client's watch streams (one per Rpc). */
export class WatchMux {
  private streams: WatchStream[] = [];
  /** A watcher's unread events, in bytes, past which it ends with SlowReaderError. */
  queueBytes = WATCH_QUEUE_BYTES;

  constructor(private readonly rpc: Rpc) {}

  /** A stream with room for one more watcher, opened if needed. */
  stream(): WatchStream {
    let s = this.streams.find((x) => !x.full);
    if (!s) {
      s = new WatchStream(this, this.rpc);
      this.streams.push(s);
    }
    return s;
  }

  drop(s: WatchStream): void {
    this.streams = this.streams.filter((x) => x !== s);
  }
}

/**
 * One watcher (Subvolume.watch): an AsyncIterable of WatchEvent, or of
 * FileEvent for a file watcher (Subvolume.watchFiles). Iterate it once;
 * `break` or cancel() ends it.
 */
export class Watch<E extends AnyEvent = WatchEvent> implements AsyncIterable<E> {
  /** The latest store revision the server reported to the watcher. */
  revision = 0;
  /** The watcher's id on its stream. */
  readonly id: bigint;
  private readonly stream: WatchStream;
  private readonly queueBound: number;
  private readonly batches: AnyEvent[][] = [];
  private queuedBytes = 0;
  private readonly waiters: Waiter[] = [];
  private fragments: AnyEvent[] = [];
  private error?: CowkvError;
  private ended = false;
  private cancelled = false;
  private isCreated = false;
  private readonly created: Promise<void>;
  private createdSettle!: (err?: CowkvError) => void;
  private readonly unwatch: () => void;
  private createTimer?: NodeJS.Timeout;

  /** @internal Use Subvolume.watch or Subvolume.watchFiles (createRequest, fileCreateRequest). */
  constructor(mux: WatchMux, create: WatchCreateRequest, opts: { signal?: AbortSignal }, createTimeoutMs: number) {
    this.created = new Promise<void>((resolve, reject) => {
      this.createdSettle = (err) => (err ? reject(err) : resolve());
    });
    this.created.catch(() => {}); // surfaced by ready() and the iteration
    this.queueBound = mux.queueBytes;
    this.stream = mux.stream();
    this.id = this.stream.add(this as Watch<AnyEvent>, create);
    this.unwatch = Rpc.watch({ cancel: () => this.cancel() }, opts.signal);
    if (createTimeoutMs > 0 && !this.ended) {
      this.createTimer = setTimeout(() => {
        this.stream.remove(this.id, true);
        this.end(new DeadlineExceededError("the server did not create the watcher in time",
          grpc.status.DEADLINE_EXCEEDED, "watch"));
      }, createTimeoutMs);
      this.createTimer.unref();
    }
  }

  /** Resolves once the server created the watcher (every change after it is seen); rejects with a refused create's error or an early end. */
  ready(): Promise<void> {
    return this.created;
  }

  /** Ends the watcher (a cancel request on its stream); the iteration ends (events not yet read are dropped). Idempotent. */
  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.batches.length = 0;
    this.stream.remove(this.id, true);
    this.end(undefined);
  }

  [Symbol.asyncIterator](): AsyncIterator<E> {
    let current: E[] = [];
    return {
      next: async (): Promise<IteratorResult<E>> => {
        if (current.length === 0) {
          const batch = await this.nextBatch();
          if (batch === undefined) return { done: true, value: undefined };
          current = batch as E[];
        }
        return { done: false, value: current.shift()! };
      },
      return: async (): Promise<IteratorResult<E>> => {
        this.cancel();
        return { done: true, value: undefined };
      },
    };
  }

  /** The next whole revision(s) of events; undefined at a clean end; throws the error that ended the watcher. */
  private nextBatch(): Promise<AnyEvent[] | undefined> {
    if (this.cancelled) return Promise.resolve(undefined);
    const b = this.batches.shift();
    if (b !== undefined) {
      this.queuedBytes -= batchBytes(b);
      return Promise.resolve(b);
    }
    if (this.ended) return this.error ? Promise.reject(this.error) : Promise.resolve(undefined);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** @internal One response of this watcher (from its stream); false once it ended. */
  onResponse(r: WatchResponse): boolean {
    this.revision = Math.max(this.revision, num(r.revision));
    if (r.canceled) {
      this.end(r.cancelCode === WatchCancelCode.WATCH_CANCEL_CLIENT ? undefined : cancelError(r));
      return false;
    }
    if (r.created && !this.isCreated) {
      this.isCreated = true;
      if (this.createTimer) clearTimeout(this.createTimer);
      this.createdSettle();
    }
    for (const f of r.fileEvents) this.fragments.push(fileEventFrom(f));
    for (const e of r.events) this.fragments.push(eventFrom(e));
    if (this.fragments.length === 0 || r.fragment) return true;
    const batch = this.fragments;
    this.fragments = [];
    const w = this.waiters.shift();
    if (w) {
      w.resolve(batch);
      return true;
    }
    const bytes = batchBytes(batch);
    if (this.queuedBytes > 0 && this.queuedBytes + bytes > this.queueBound) {
      // The stream is shared: the client does not stop reading it for one reader.
      this.end(new SlowReaderError(`the reader fell behind: ${this.queuedBytes} bytes of events unread (bound ${this.queueBound})`,
        grpc.status.RESOURCE_EXHAUSTED, "watch"));
      return false;
    }
    this.batches.push(batch);
    this.queuedBytes += bytes;
    return true;
  }

  /** @internal Ends once: the error, or a clean end for undefined. */
  end(err: CowkvError | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.error = this.cancelled ? undefined : err;
    if (this.createTimer) clearTimeout(this.createTimer);
    this.createdSettle(this.error ?? (this.isCreated ? undefined : cancelledBeforeCreate()));
    this.unwatch?.();
    for (const w of this.waiters.splice(0)) {
      if (this.error) w.reject(this.error);
      else w.resolve(undefined);
    }
  }
}

function batchBytes(b: AnyEvent[]): number {
  let n = 0;
  for (const e of b) {
    if ("path" in e) {
      n += e.path.length + e.newPath.length + 64;
      continue;
    }
    n += e.kv.key.length + e.kv.value.length + 64 + (e.prevKv ? e.prevKv.key.length + e.prevKv.value.length : 0);
  }
  return n;
}

function cancelledBeforeCreate(): CowkvError {
  return toCowkvError({ code: grpc.status.CANCELLED, details: "the watcher ended before the server created it" }, "watch");
}

/** @internal A file watcher's create (Subvolume.watchFiles). */
export function fileCreateRequest(subvolume: string, prefix: string, opts: FileWatchOptions): WatchCreateRequest {
  checkSubvolume("watchFiles", subvolume);
  if (Buffer.byteLength(prefix) > MAX_PATH_BYTES) {
    throw invalid("watchFiles", `prefix: ${Buffer.byteLength(prefix)} bytes > ${MAX_PATH_BYTES}`);
  }
  const start = opts.startRevision ?? 0;
  if (!Number.isSafeInteger(start) || start < 0) throw invalid("watchFiles", `startRevision: ${start} is not a revision`);
  return {
    subvolume, key: Buffer.alloc(0), rangeEnd: Buffer.alloc(0), startRevision: BigInt(start), prevKv: false, filters: [],
    progressNotify: !!opts.progressNotify, watchId: 0n, files: { prefix },
  };
}

function fileEventFrom(f: PbFileWatchEvent): FileEvent {
  return {
    type: fileWatchEvent_TypeToJSON(f.type), revision: num(f.revision), ino: num(f.ino), path: f.path,
    newPath: f.newPath, pathsLost: f.pathsLost,
  };
}

/** @internal A KV watcher's create (Subvolume.watch). */
export function createRequest(subvolume: string, key: Bytes, opts: WatchOptions): WatchCreateRequest {
  checkSubvolume("watch", subvolume);
  const k = toBuffer(key);
  if (opts.prefix && opts.end !== undefined && toBuffer(opts.end).length > 0) {
    throw invalid("watch", "give prefix or end, not both");
  }
  const end = opts.prefix ? prefixEnd(k) : toBuffer(opts.end);
  if (k.length > MAX_KEY_BYTES) throw invalid("watch", `key: ${k.length} bytes > ${MAX_KEY_BYTES}`);
  if (k.length === 0 && end.length === 0) throw invalid("watch", "key: empty (watch a range or a prefix instead)");
  const filters: WatchCreateRequest_FilterType[] = [];
  for (const f of opts.filters ?? []) {
    if (f === "noPut") filters.push(WatchCreateRequest_FilterType.NOPUT);
    else if (f === "noDelete") filters.push(WatchCreateRequest_FilterType.NODELETE);
    else throw invalid("watch", `unknown filter ${String(f)}`);
  }
  const start = opts.startRevision ?? 0;
  if (!Number.isSafeInteger(start) || start < 0) throw invalid("watch", `startRevision: ${start} is not a revision`);
  return {
    subvolume, key: k, rangeEnd: end, startRevision: BigInt(start), prevKv: !!opts.prevKv, filters,
    progressNotify: !!opts.progressNotify, watchId: 0n, files: undefined,
  };
}

function eventFrom(e: PbWatchEvent): WatchEvent {
  const kv = kvFrom(e.kv);
  return {
    type: e.type === WatchEvent_EventType.DELETE ? "DELETE" : "PUT", kv,
    prevKv: e.prevKv ? kvFrom(e.prevKv) : undefined, revision: kv.modRevision,
  };
}

/** The error of a watcher the server ended: its cancel code decides the class (spec.gen.ts), never its text. */
function cancelError(r: WatchResponse): CowkvError {
  const end = SPEC_WATCH_CANCEL[r.cancelCode]; // COMPACTED, SUBVOLUME_DELETED, SLOW_READER
  if (end?.cls === "compacted") return new CompactedError(r.cancelReason, num(r.compactRevision), "watch");
  const cls = end && ERROR_CLASSES.get(end.cls);
  if (end && cls) return new cls(r.cancelReason, end.code as grpc.status, "watch");
  // REFUSED, SERVER: the error a call would have given
  const code = (r.errorCode || grpc.status.UNKNOWN) as grpc.status;
  const info = r.errorReason ? { reason: r.errorReason, metadata: {} } : undefined;
  return new (classFor(code, r.cancelReason, r.errorReason))(r.cancelReason, code, "watch", info);
}
