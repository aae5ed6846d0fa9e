/** One-shot conditional transactions (Compare, Op) and interactive ones (Transaction, with retry). */
import { Compare as PbCompare, Compare_Op, Compare_Target, RangeRequest, RequestOp } from "./gen/cowkv/v1/kv";
import { status as Status } from "@grpc/grpc-js";
import { CancelledError, CowkvError, isRetryable } from "./errors";
import { CallOptions, Rpc } from "./rpc";
import { Durability, durabilityPb, KeyRange, KeyValue, kvFrom, num, Page, RangeOptions } from "./types";
import { Bytes, checkBound, checkKey, checkValue, invalid, toBuffer } from "./validate";

/** A condition of a one-shot transaction. */
export interface Cmp {
  readonly pb: PbCompare;
}

const OPS = { eq: Compare_Op.OP_EQUAL, ne: Compare_Op.OP_NOT_EQUAL, lt: Compare_Op.OP_LESS, gt: Compare_Op.OP_GREATER };

function valueTarget(key: Bytes) {
  const k = toBuffer(key);
  const make = (op: Compare_Op) => (v: Bytes): Cmp =>
    ({ pb: PbCompare.fromPartial({ key: k, target: Compare_Target.TARGET_VALUE, op, value: toBuffer(v) }) });
  return { eq: make(OPS.eq), ne: make(OPS.ne), lt: make(OPS.lt), gt: make(OPS.gt) };
}

function numberTarget(target: Compare_Target) {
  return (key: Bytes) => {
    const k = toBuffer(key);
    const make = (op: Compare_Op) => (n: number | bigint): Cmp =>
      ({ pb: PbCompare.fromPartial({ key: k, target, op, number: BigInt(n) }) });
    return { eq: make(OPS.eq), ne: make(OPS.ne), lt: make(OPS.lt), gt: make(OPS.gt) };
  };
}

/**
 * Conditions: `Compare.value("k").eq("1")`, `Compare.version("k").gt(2)`,
 * `Compare.modRevision("k").eq(rev)`, `Compare.exists("k")`, `Compare.missing("k")`.
 * An absent key never matches a value compare and has 0 for the numbers.
 */
export const Compare = {
  value: valueTarget,
  version: numberTarget(Compare_Target.TARGET_VERSION),
  createRevision: numberTarget(Compare_Target.TARGET_CREATE_REVISION),
  modRevision: numberTarget(Compare_Target.TARGET_MOD_REVISION),
  exists: (key: Bytes): Cmp => ({ pb: PbCompare.fromPartial({ key: toBuffer(key), target: Compare_Target.TARGET_EXISTS, exists: true }) }),
  missing: (key: Bytes): Cmp => ({ pb: PbCompare.fromPartial({ key: toBuffer(key), target: Compare_Target.TARGET_EXISTS, exists: false }) }),
};

/** An operation of a one-shot transaction branch. */
export interface TxnOp {
  readonly pb: RequestOp;
  /** Checks the op's arguments (throws InvalidArgumentError). */
  check(): void;
}

/** Ops: `Op.put(k, v, { lease })`, `Op.delete(k)`, `Op.deleteRange(start, end)`, `Op.range(range, opts)`. */
export const Op = {
  put(key: Bytes, value: Bytes, opts: { lease?: bigint | number } = {}): TxnOp {
    const k = toBuffer(key), v = toBuffer(value);
    return { pb: { op: { $case: "put", put: { key: k, value: v, lease: BigInt(opts.lease ?? 0) } } }, check: () => { checkKey("txn", "put.key", k); checkValue("txn", v); } };
  },
  delete(key: Bytes): TxnOp {
    const k = toBuffer(key);
    return { pb: { op: { $case: "delete", delete: { key: k } } }, check: () => checkKey("txn", "delete.key", k) };
  },
  deleteRange(start?: Bytes, end?: Bytes): TxnOp {
    const s = toBuffer(start), e = toBuffer(end);
    return {
      pb: { op: { $case: "deleteRange", deleteRange: { start: s, end: e } } },
      check: () => { checkBound("txn", "start", s); checkBound("txn", "end", e); },
    };
  },
  range(range: KeyRange = {}, opts: RangeOptions & { countOnly?: boolean } = {}): TxnOp {
    const r = rangeFields("txn", range);
    return {
      pb: {
        op: {
          $case: "range", range: {
            start: r.start, end: r.end, prefix: r.prefix, limit: BigInt(opts.limit ?? 0), reverse: !!opts.reverse,
            keysOnly: !!opts.keysOnly, countOnly: !!opts.countOnly,
          },
        },
      },
      check: () => r.check(),
    };
  },
};

/** The fields of a KeyRange as buffers, with a deferred check. */
export function rangeFields(op: string, range: KeyRange) {
  const start = toBuffer(range.start), end = toBuffer(range.end), prefix = toBuffer(range.prefix);
  return {
    start, end, prefix,
    check() {
      if (prefix.length > 0 && (start.length > 0 || end.length > 0)) {
        throw invalid(op, "prefix: start and end must be empty when prefix is set");
      }
      checkBound(op, "start", start);
      checkBound(op, "end", end);
      checkBound(op, "prefix", prefix);
    },
  };
}

/** The paging iterator shared by Subvolume.range and Transaction.range. */
export async function* pages(
  req: RangeRequest, opts: RangeOptions, fetch: (req: RangeRequest) => Promise<{ kvs: unknown[] } & Record<string, unknown>>,
): AsyncGenerator<KeyValue> {
  let n = 0;
  const limit = opts.limit ?? 0;
  for (;;) {
    let pageLimit = opts.pageSize ?? 0;
    if (limit > 0 && (pageLimit === 0 || limit - n < pageLimit)) pageLimit = limit - n;
    req.limit = BigInt(pageLimit);
    const m = (await fetch(req)) as unknown as { kvs: Parameters<typeof kvFrom>[0][]; more: boolean; nextPageToken: Uint8Array };
    for (const kv of m.kvs) {
      yield kvFrom(kv);
      if (limit > 0 && ++n >= limit) return;
    }
    if (!m.more || m.nextPageToken.length === 0) return;
    req.pageToken = Buffer.from(m.nextPageToken);
  }
}

/**
 * An interactive transaction (Subvolume.begin): reads see the latest state
 * plus the transaction's own writes and are recorded; writes are buffered
 * until commit, which rejects with ConflictError if anything read changed
 * meanwhile (TooOldError past the server's conflict window). Prefer
 * Subvolume.transaction, which retries those.
 */
export class Transaction {
  private done = false;

  constructor(
    private readonly rpc: Rpc,
    private readonly handle: bigint,
    /** The revision the transaction reads at. */
    readonly readRevision: number,
    /** The lease the server granted, in milliseconds. */
    readonly leaseMs: number,
  ) {}

  /** True once committed or aborted. */
  get finished(): boolean {
    return this.done;
  }

  /** Reads a key's value (NotFoundError if absent). */
  async get(key: Bytes, call?: CallOptions): Promise<Buffer> {
    return (await this.getKV(key, call)).value;
  }

  /** Reads a key with its revisions. */
  async getKV(key: Bytes, call?: CallOptions): Promise<KeyValue> {
    const k = toBuffer(key);
    checkKey("txnGet", "key", k);
    const m = await this.rpc.unary<unknown, { kv?: Parameters<typeof kvFrom>[0] }>(
      "txnGet", this.rpc.kv, "txnGet", { handle: this.handle, key: k }, call);
    return kvFrom(m.kv);
  }

  /** Iterates a range in the transaction (recorded; sees own writes). */
  range(range: KeyRange = {}, opts: RangeOptions = {}, call?: CallOptions): AsyncGenerator<KeyValue> {
    const r = rangeFields("txnRange", range);
    const req = RangeRequest.fromPartial({ start: r.start, end: r.end, prefix: r.prefix, reverse: !!opts.reverse, keysOnly: !!opts.keysOnly });
    const rpc = this.rpc, handle = this.handle;
    return (async function* () {
      r.check();
      yield* pages(req, opts, (req) => rpc.unary("txnRange", rpc.kv, "txnRange", { handle, range: req }, call));
    })();
  }

  /** Buffers a write. */
  async put(key: Bytes, value: Bytes, call?: CallOptions): Promise<void> {
    const k = toBuffer(key), v = toBuffer(value);
    checkKey("txnPut", "key", k);
    checkValue("txnPut", v);
    await this.rpc.unary("txnPut", this.rpc.kv, "txnPut", { handle: this.handle, key: k, value: v }, call);
  }

  /** Buffers the delete of a key. */
  async delete(key: Bytes, call?: CallOptions): Promise<void> {
    const k = toBuffer(key);
    checkKey("txnDelete", "key", k);
    await this.rpc.unary("txnDelete", this.rpc.kv, "txnDelete", { handle: this.handle, key: k, range: false, end: Buffer.alloc(0) }, call);
  }

  /** Buffers the delete of [start, end) (end omitted = through the last key). */
  async deleteRange(start: Bytes, end?: Bytes, call?: CallOptions): Promise<void> {
    const s = toBuffer(start), e = toBuffer(end);
    checkKey("txnDelete", "key", s);
    checkBound("txnDelete", "end", e);
    await this.rpc.unary("txnDelete", this.rpc.kv, "txnDelete", { handle: this.handle, key: s, range: true, end: e }, call);
  }

  /** Validates and applies the transaction; resolves to its revision. Finished whatever the result. */
  async commit(opts: { durability?: Durability } = {}, call?: CallOptions): Promise<number> {
    this.done = true;
    const m = await this.rpc.unary<unknown, { revision: bigint }>(
      "commit", this.rpc.kv, "commit", { handle: this.handle, durability: durabilityPb(opts.durability) }, call);
    return num(m.revision);
  }

  /** Drops the transaction and its buffered writes. */
  async abort(call?: CallOptions): Promise<void> {
    this.done = true;
    await this.rpc.unary("abort", this.rpc.kv, "abort", { handle: this.handle }, call);
  }
}

/** The retry helper's defaults, the same in every client (docs/api.md, "Retrying transactions"). */
export const DEFAULT_MAX_ATTEMPTS = 10;
export const DEFAULT_BACKOFF_MS = 10;
export const DEFAULT_MAX_BACKOFF_MS = 1000;

export interface TransactionOptions {
  /** Runs of the transaction in all (default 10). */
  maxAttempts?: number;
  /** First wait between attempts in ms (default 10); doubles up to maxBackoffMs. */
  backoffMs?: number;
  /** Largest wait in ms (default 1000). Each wait is random in [d/2, d]. */
  maxBackoffMs?: number;
  /** Lease of each attempt's transaction. */
  leaseMs?: number;
  /** Durability of the commit. */
  durability?: Durability;
  /** Stops retrying (and the waits) when aborted. */
  signal?: AbortSignal;
  /** For tests: replaces the wait between attempts. */
  sleep?: (ms: number) => Promise<void>;
}

/** The wait before attempt n+1 (n >= 1): random in [d/2, d], d = min(max, first * 2^(n-1)). */
export function backoffMs(n: number, first: number, max: number): number {
  let d = first;
  for (let i = 1; i < n && d < max; i++) d *= 2;
  d = Math.min(d, max);
  return d / 2 + Math.random() * (d / 2);
}

function sleepFor(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(signal?.reason); };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs fn in a transaction and commits it, retrying the whole transaction
 * (after a jittered exponential backoff) when fn or the commit rejects with
 * ConflictError or TooOldError. Other errors abort the transaction and are
 * rethrown. Resolves to fn's result.
 */
export async function runInTransaction<T>(
  begin: () => Promise<Transaction>, fn: (tx: Transaction) => Promise<T>, opts: TransactionOptions = {},
): Promise<T> {
  const attempts = opts.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const first = opts.backoffMs ?? DEFAULT_BACKOFF_MS, max = opts.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS;
  const sleep = opts.sleep ?? ((ms: number) => sleepFor(ms, opts.signal));
  for (let attempt = 1; ; attempt++) {
    try {
      const tx = await begin();
      let result: T;
      try {
        result = await fn(tx);
      } catch (err) {
        if (!tx.finished) tx.abort({ timeoutMs: 5000 }).catch(() => {});
        throw err;
      }
      await tx.commit({ durability: opts.durability });
      return result;
    } catch (err) {
      if (!isRetryable(err) || attempt >= attempts) {
        if (isRetryable(err) && err instanceof CowkvError) {
          err.message = `${err.message} (transaction gave up after ${attempt} attempts)`;
        }
        throw err;
      }
    }
    try {
      await sleep(backoffMs(attempt, first, max));
    } catch (err) {
      throw new CancelledError(`transaction retry cancelled: ${String((err as Error)?.message ?? err)}`, Status.CANCELLED, "transaction");
    }
  }
}

/** @deprecated The old name of {@link runInTransaction}; goes in the next release. */
export const runTransaction = runInTransaction;
