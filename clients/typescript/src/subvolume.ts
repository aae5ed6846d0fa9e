/** A subvolume handle: its key space and its file tree. */
import { RangeRequest, RangeResponse, TxnResponse } from "./gen/cowkv/v1/kv";
import { FiemapResponse, ReadDirResponse, ReadResponse, WriteRequest, WriteResponse, FileStat as PbFileStat, OpenResponse as PbOpenResponse } from "./gen/cowkv/v1/files";
import { toCowkvError } from "./errors";
import { LeaseId, Leases } from "./lease";
import { createRequest, FileEvent, fileCreateRequest, FileWatchOptions, Watch, WatchOptions } from "./watch";
import { CallOptions, Rpc } from "./rpc";
import { Cmp, pages, rangeFields, runInTransaction, Transaction, TransactionOptions, TxnOp } from "./txn";
import {
  DirEntry, Durability, durabilityPb, Extent, ExtentFlag, FileStat, KeyRange, KeyValue, kindFrom, kvFrom, num, Page,
  PageOptions, pageFrom, RangeOptions, statFrom,
} from "./types";
import {
  Bytes, checkKey, checkName, checkPath, checkSubvolume, checkSymlinkTarget, checkValue, invalid, MAX_LEASE_MS,
  MAX_TXN_OPS, MAX_WRITE_CHUNK, toBuffer,
} from "./validate";

export interface WriteOptions {
  durability?: Durability;
}

export interface PutOptions extends WriteOptions {
  /** Attach the key to this lease (sv.leases); omitted or 0 = none: the put detaches the key from any lease, as etcd's. NotFoundError for an unknown lease. */
  lease?: LeaseId;
}

/** A one-shot transaction: if every compare holds run success, else failure, atomically. */
export interface TxnRequest {
  compare?: Cmp[];
  success?: TxnOp[];
  failure?: TxnOp[];
  durability?: Durability;
}

export type OpResult =
  | { kind: "put" }
  | { kind: "delete"; deleted: number }
  | { kind: "range"; page: Page };

export interface TxnResult {
  /** Every compare held and success ran. */
  succeeded: boolean;
  /** The writes' revision, or the revision read at. */
  revision: number;
  /** One per op of the branch that ran. */
  responses: OpResult[];
}

export interface WriteFileOptions {
  /** Where the data goes (default 0). */
  offset?: number;
  /** Create the file if absent. */
  create?: boolean;
  /** Permission bits for create (default 0o644). */
  mode?: number;
  /** Cut the file to offset before writing. */
  truncate?: boolean;
}

export interface CloneRange {
  src: string;
  srcOffset?: number;
  dst: string;
  dstOffset?: number;
  /** Bytes to clone; 0 or omitted = to the source's EOF. */
  length?: number;
}

export class Subvolume {
  /** The subvolume's leases (etcd's lease API). */
  readonly leases: Leases;

  constructor(private readonly rpc: Rpc, /** The name ("" = "default"). */ readonly name: string) {
    this.leases = new Leases(rpc, name);
  }

  // ---- Watch ----

  /**
   * Watches `key` (every key starting with it with `prefix`, or [key, end)):
   * an AsyncIterable of events (on a stream the client's watchers share); await its ready()
   * to know every later change is seen. Ends on cancel(), opts.signal, or a
   * `break`; throws the reason when the server ends it (src/watch.ts).
   */
  watch(key: Bytes, opts: WatchOptions = {}): Watch {
    return new Watch(this.rpc.watches, createRequest(this.name, key, opts), opts, this.rpc.defaultTimeout());
  }

  /**
   * Watches the file tree at `prefix` and below ("" or "/": every path; a
   * rename or exchange whose either path is under it), like inotify: an
   * AsyncIterable of FileEvent on the client's shared watch streams; await
   * its ready() before changing what it must see. Ends as a KV watcher does;
   * a read-only snapshot is FailedPreconditionError (docs/api.md "File watchers").
   */
  watchFiles(prefix: string, opts: FileWatchOptions = {}): Watch<FileEvent> {
    return new Watch<FileEvent>(this.rpc.watches, fileCreateRequest(this.name, prefix, opts), opts,
      this.rpc.defaultTimeout());
  }

  /**
   * Drops the history of revisions below `revision` (etcd's Compact):
   * reads at it still work, a watcher must start after it (CompactedError).
   * Resolves to the subvolume's compact revision.
   */
  async compact(revision: number, opts: WriteOptions = {}, call?: CallOptions): Promise<number> {
    checkSubvolume("compact", this.name);
    const m = await this.unary<{ compactRevision: bigint }>("compact", this.rpc.kv, "compact",
      { subvolume: this.name, revision: BigInt(revision), durability: durabilityPb(opts.durability) }, call);
    return num(m.compactRevision);
  }

  private unary<Res>(op: string, client: object, method: string, req: unknown, call?: CallOptions): Promise<Res> {
    return this.rpc.unary<unknown, Res>(op, client, method, req, call);
  }

  // ---- KV ----

  /**
   * Reads a key's value (NotFoundError if absent). `revision` reads it as it
   * was then, from the history: CompactedError (compactRevision) below what
   * the history keeps, FutureRevisionError past the current revision.
   */
  async get(key: Bytes, call?: ReadOptions): Promise<Buffer> {
    return (await this.getKV(key, call)).value;
  }

  /** Reads a key with its revisions, and the store revision the read saw (at `revision`, as get). */
  async getKV(key: Bytes, call?: ReadOptions): Promise<KeyValue & { revision: number }> {
    const k = toBuffer(key);
    checkSubvolume("get", this.name);
    checkKey("get", "key", k);
    const m = await this.unary<{ kv?: Parameters<typeof kvFrom>[0]; revision: bigint }>(
      "get", this.rpc.kv, "get", { subvolume: this.name, key: k, revision: BigInt(call?.revision ?? 0) }, call);
    return { ...kvFrom(m.kv), revision: num(m.revision) };
  }

  /** Writes a key (attached to opts.lease if set); resolves to the write's revision. */
  async put(key: Bytes, value: Bytes, opts: PutOptions = {}, call?: CallOptions): Promise<number> {
    const k = toBuffer(key), v = toBuffer(value);
    checkSubvolume("put", this.name);
    checkKey("put", "key", k);
    checkValue("put", v);
    const m = await this.unary<{ revision: bigint }>("put", this.rpc.kv, "put",
      { subvolume: this.name, key: k, value: v, durability: durabilityPb(opts.durability), lease: BigInt(opts.lease ?? 0) }, call);
    return num(m.revision);
  }

  /** Deletes a key (NotFoundError if absent); resolves to the revision. */
  async delete(key: Bytes, opts: WriteOptions = {}, call?: CallOptions): Promise<number> {
    const k = toBuffer(key);
    checkSubvolume("delete", this.name);
    checkKey("delete", "key", k);
    const m = await this.unary<{ revision: bigint }>("delete", this.rpc.kv, "delete",
      { subvolume: this.name, key: k, durability: durabilityPb(opts.durability) }, call);
    return num(m.revision);
  }

  /**
   * Deletes every key of a range atomically (at most 10,000). A range with
   * no bound is refused, so {} never deletes everything; {start: "\0"} does.
   */
  async deleteRange(range: KeyRange, opts: WriteOptions = {}, call?: CallOptions): Promise<{ deleted: number; revision: number }> {
    const r = rangeFields("deleteRange", range);
    checkSubvolume("deleteRange", this.name);
    r.check();
    if (r.start.length === 0 && r.end.length === 0 && r.prefix.length === 0) {
      throw invalid("deleteRange", "one of start, end and prefix must be set");
    }
    const m = await this.unary<{ deleted: bigint; revision: bigint }>("deleteRange", this.rpc.kv, "deleteRange",
      { subvolume: this.name, start: r.start, end: r.end, prefix: r.prefix, durability: durabilityPb(opts.durability) }, call);
    return { deleted: num(m.deleted), revision: num(m.revision) };
  }

  private rangeRequest(op: string, range: KeyRange, opts: PageOptions): RangeRequest {
    const r = rangeFields(op, range);
    checkSubvolume(op, this.name);
    r.check();
    if (opts.snapshot) checkName(op, "snapshot", opts.snapshot);
    return RangeRequest.fromPartial({
      subvolume: this.name, start: r.start, end: r.end, prefix: r.prefix, reverse: !!opts.reverse,
      keysOnly: !!opts.keysOnly, countOnly: !!opts.countOnly, snapshot: opts.snapshot ?? "",
      revision: BigInt(opts.revision ?? 0),
    });
  }

  /**
   * Iterates the keys of a range, a page at a time, continuing with the page token:
   *
   *     for await (const kv of sv.range({ prefix: "user/" }, { pageSize: 500 })) { ... }
   *
   * Pages of a live subvolume are each consistent at their own revision;
   * use `snapshot` for one view.
   */
  range(range: KeyRange = {}, opts: RangeOptions = {}, call?: CallOptions): AsyncGenerator<KeyValue> {
    const self = this;
    return (async function* () {
      const req = self.rangeRequest("range", range, opts);
      yield* pages(req, opts, (req) => self.unary("range", self.rpc.kv, "range", req, call));
    })();
  }

  /** Reads one page: at most opts.limit keys (0 = the server's page limit), from opts.pageToken. */
  async rangePage(range: KeyRange = {}, opts: PageOptions = {}, call?: CallOptions): Promise<Page> {
    const req = this.rangeRequest("range", range, opts);
    req.limit = BigInt(opts.limit ?? 0);
    req.pageToken = opts.pageToken ? Buffer.from(opts.pageToken) : Buffer.alloc(0);
    return pageFrom(await this.unary<RangeResponse>("range", this.rpc.kv, "range", req, call));
  }

  /** Counts the keys of a range exactly. */
  async count(range: KeyRange = {}, opts: RangeOptions = {}, call?: CallOptions): Promise<number> {
    return (await this.rangePage(range, { ...opts, countOnly: true }, call)).count;
  }

  /** A one-shot conditional transaction (a compare that does not hold is not an error). */
  async txn(req: TxnRequest, call?: CallOptions): Promise<TxnResult> {
    const compare = req.compare ?? [], success = req.success ?? [], failure = req.failure ?? [];
    checkSubvolume("txn", this.name);
    if (compare.length > MAX_TXN_OPS || success.length > MAX_TXN_OPS || failure.length > MAX_TXN_OPS) {
      throw invalid("txn", `a Txn has at most ${MAX_TXN_OPS} compares and ${MAX_TXN_OPS} ops per branch`);
    }
    for (const c of compare) checkKey("txn", "compare.key", Buffer.from(c.pb.key));
    for (const op of [...success, ...failure]) op.check();
    const m = await this.unary<TxnResponse>("txn", this.rpc.kv, "txn", {
      subvolume: this.name, compare: compare.map((c) => c.pb), success: success.map((o) => o.pb),
      failure: failure.map((o) => o.pb), durability: durabilityPb(req.durability),
    }, call);
    return {
      succeeded: m.succeeded, revision: num(m.revision),
      responses: m.responses.map((r): OpResult => {
        const x = r.result;
        if (x?.$case === "delete") return { kind: "delete", deleted: num(x.delete.deleted) };
        if (x?.$case === "range") return { kind: "range", page: pageFrom(x.range) };
        return { kind: "put" };
      }),
    };
  }

  /** Starts an interactive transaction; finish it with commit or abort. */
  async begin(opts: { leaseMs?: number } = {}, call?: CallOptions): Promise<Transaction> {
    checkSubvolume("begin", this.name);
    const lease = opts.leaseMs ?? 0;
    if (lease < 0 || lease > MAX_LEASE_MS) throw invalid("begin", `lease_ms: at most ${MAX_LEASE_MS} ms, not ${lease}`);
    const m = await this.unary<{ handle: bigint; readRevision: bigint; leaseMs: bigint }>(
      "begin", this.rpc.kv, "begin", { subvolume: this.name, leaseMs: BigInt(lease) }, call);
    return new Transaction(this.rpc, m.handle, num(m.readRevision), num(m.leaseMs));
  }

  /**
   * Runs fn in an interactive transaction and commits it (the retry helper of
   * every cowkv client; begin() starts one without retries), retrying the whole
   * transaction with jittered exponential backoff (docs/api.md, "Retrying
   * transactions": 10 attempts, waits in [d/2, d], d = 10 ms doubling to 1 s) on ConflictError and
   * TooOldError (fn must be safe to run again and read through tx).
   * Resolves to fn's result.
   */
  runInTransaction<T>(fn: (tx: Transaction) => Promise<T>, opts: TransactionOptions = {}): Promise<T> {
    return runInTransaction(() => this.begin({ leaseMs: opts.leaseMs }), fn, opts);
  }

  /** @deprecated The old name of {@link runInTransaction} (the retry helper's name in every client); goes in the next release. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>, opts: TransactionOptions = {}): Promise<T> {
    return this.runInTransaction(fn, opts);
  }

  // ---- Files ----

  private async fileCall<Res>(op: string, method: string, req: Record<string, unknown>, paths: Record<string, string>, call?: CallOptions): Promise<Res> {
    checkSubvolume(op, this.name);
    for (const [field, p] of Object.entries(paths)) checkPath(op, field, p);
    return this.unary<Res>(op, this.rpc.files, method, { subvolume: this.name, ...req }, call);
  }

  /** Attributes of a file, directory or symlink (never followed). */
  async stat(path: string, call?: CallOptions): Promise<FileStat> {
    return statFrom(await this.fileCall<PbFileStat>("stat", "stat", { path, ino: 0n, handle: 0n }, { path }, call));
  }

  /** Creates a directory (mode default 0o755); the parent must exist. */
  async mkdir(path: string, opts: { mode?: number } = {}, call?: CallOptions): Promise<FileStat> {
    return statFrom(await this.fileCall<PbFileStat>("mkdir", "mkdir", { path, mode: opts.mode ?? 0 }, { path }, call));
  }

  /** Creates an empty regular file (mode default 0o644); AlreadyExistsError (EEXIST) if taken. */
  async createFile(path: string, opts: { mode?: number } = {}, call?: CallOptions): Promise<FileStat> {
    return statFrom(await this.fileCall<PbFileStat>("createFile", "create", { path, mode: opts.mode ?? 0 }, { path }, call));
  }

  /** Lists a directory in creation order, fetching pages of pageSize entries until the end. */
  async readDir(path: string, opts: { pageSize?: number } = {}, call?: CallOptions): Promise<DirEntry[]> {
    const out: DirEntry[] = [];
    let cookie = 0n;
    for (;;) {
      const m = await this.fileCall<ReadDirResponse>("readDir", "readDir",
        { path, ino: 0n, cookie, limit: BigInt(opts.pageSize ?? 0) }, { path }, call);
      for (const e of m.entries) out.push({ name: e.name, ino: num(e.ino), kind: kindFrom(e.kind), cookie: num(e.cookie) });
      if (!m.more) return out;
      cookie = m.nextCookie;
    }
  }

  /** Reads a regular file (or length bytes from offset; 0 = to EOF), streamed in 1 MiB chunks. Holes read as zeros. */
  async readFile(path: string, opts: { offset?: number; length?: number } = {}, call?: CallOptions): Promise<Buffer> {
    checkSubvolume("read", this.name);
    checkPath("read", "path", path);
    return this.readStream(path, 0n, opts, call);
  }

  /** The Read stream of a path or (handle != 0) an open handle. @internal */
  async readStream(path: string, handle: bigint, opts: { offset?: number; length?: number }, call?: CallOptions): Promise<Buffer> {
    const stream = this.rpc.files.read({ subvolume: this.name, path, ino: 0n, handle, offset: BigInt(opts.offset ?? 0), length: BigInt(opts.length ?? 0) },
      this.rpc.metadata(), this.rpc.options(call));
    const unwatch = Rpc.watch(stream, call?.signal);
    const chunks: Buffer[] = [];
    try {
      for await (const m of stream as AsyncIterable<ReadResponse>) chunks.push(Buffer.from(m.data));
    } catch (err) {
      throw toCowkvError(err, "read");
    } finally {
      unwatch();
    }
    return Buffer.concat(chunks);
  }

  /**
   * Writes data into a regular file, streamed in chunks of at most 4 MiB
   * (each chunk is atomic, the whole write is not). Resolves to the bytes
   * written and the file's attributes afterwards.
   */
  async writeFile(path: string, data: Bytes | AsyncIterable<Uint8Array>, opts: WriteFileOptions = {}, call?: CallOptions):
    Promise<{ bytesWritten: number; stat: FileStat }> {
    checkSubvolume("write", this.name);
    checkPath("write", "path", path);
    return this.writeStream(path, 0n, data, opts, call);
  }

  /** The Write stream to a path or (handle != 0) an open handle. @internal */
  async writeStream(path: string, handle: bigint, data: Bytes | AsyncIterable<Uint8Array>, opts: WriteFileOptions, call?: CallOptions):
    Promise<{ bytesWritten: number; stat: FileStat }> {
    let resolveDone!: (r: WriteResponse) => void, rejectDone!: (e: unknown) => void;
    const done = new Promise<WriteResponse>((res, rej) => { resolveDone = res; rejectDone = rej; });
    const stream = this.rpc.files.write(this.rpc.metadata(), this.rpc.options(call), (err, res) => {
      if (err) rejectDone(toCowkvError(err, "write"));
      else resolveDone(res);
    });
    const unwatch = Rpc.watch(stream, call?.signal);
    stream.on("error", () => {}); // the callback reports it
    let failed = false;
    done.catch(() => { failed = true; });
    const first = WriteRequest.fromPartial({
      subvolume: this.name, path, handle, offset: BigInt(opts.offset ?? 0), create: !!opts.create, mode: opts.mode ?? 0,
      truncate: !!opts.truncate,
    });
    let sent = false;
    const send = async (chunk: Buffer) => {
      const msg = sent ? WriteRequest.fromPartial({ data: chunk }) : { ...first, data: chunk };
      sent = true;
      if (!stream.write(msg)) await Promise.race([new Promise((r) => stream.once("drain", r)), done.catch(() => {})]);
    };
    try {
      const source = typeof data === "string" || data instanceof Uint8Array ? [toBuffer(data)] : data;
      for await (const piece of source) {
        const buf = toBuffer(piece);
        for (let off = 0; off < buf.length && !failed; off += MAX_WRITE_CHUNK) {
          await send(buf.subarray(off, off + MAX_WRITE_CHUNK));
        }
        if (failed) break;
      }
      if (!sent && !failed) await send(Buffer.alloc(0));
      stream.end();
      const m = await done;
      return { bytesWritten: num(m.bytesWritten), stat: statFrom(m.stat) };
    } finally {
      unwatch();
    }
  }

  /** Sets a regular file's size (cuts, or extends with a hole). */
  async truncate(path: string, size: number, call?: CallOptions): Promise<FileStat> {
    return statFrom(await this.fileCall<PbFileStat>("truncate", "truncate", { path, ino: 0n, handle: 0n, size: BigInt(size) }, { path }, call));
  }

  /** Renames (moves) a name; an existing `to` is replaced unless noReplace; exchange swaps the two. */
  async rename(from: string, to: string, opts: { noReplace?: boolean; exchange?: boolean } = {}, call?: CallOptions): Promise<void> {
    if (opts.noReplace && opts.exchange) throw invalid("rename", "EINVAL: flags: NOREPLACE and EXCHANGE together");
    const flags = (opts.noReplace ? 1 : 0) | (opts.exchange ? 2 : 0);
    await this.fileCall("rename", "rename", { from, to, flags }, { from, to }, call);
  }

  /**
   * Opens a file on the server (Files.Open; leaseMs 0 = the server's 30 s):
   * while the handle is open, removing the file's last name does not delete it.
   */
  async openHandle(path: string, opts: { leaseMs?: number } = {}, call?: CallOptions): Promise<FileHandle> {
    const m = await this.fileCall<PbOpenResponse>("open", "open", { path, ino: 0n, leaseMs: BigInt(opts.leaseMs ?? 0) }, { path }, call);
    return new FileHandle(this, this.rpc, m);
  }

  /** O_TMPFILE: a new regular file without a name in directory dir, opened; handle.link names it, close without a name deletes it. */
  async createTmpfile(dir: string, opts: { mode?: number; leaseMs?: number } = {}, call?: CallOptions): Promise<FileHandle> {
    const m = await this.fileCall<PbOpenResponse>("tmpfile", "createTmpfile", {
      dirPath: dir, dirIno: 0n, mode: opts.mode ?? 0, leaseMs: BigInt(opts.leaseMs ?? 0),
    }, { dir_path: dir }, call);
    return new FileHandle(this, this.rpc, m);
  }

  /** Adds a hard link newPath to the file at existing. */
  async link(existing: string, newPath: string, call?: CallOptions): Promise<FileStat> {
    return statFrom(await this.fileCall<PbFileStat>("link", "link", { existing, newPath, ino: 0n, handle: 0n }, { existing, new_path: newPath }, call));
  }

  /** Creates a symlink at path holding target (never resolved). */
  async symlink(target: string, path: string, call?: CallOptions): Promise<FileStat> {
    checkSymlinkTarget("symlink", target);
    return statFrom(await this.fileCall<PbFileStat>("symlink", "symlink", { target, path }, { path }, call));
  }

  /** A symlink's target. */
  async readLink(path: string, call?: CallOptions): Promise<string> {
    return (await this.fileCall<{ target: string }>("readLink", "readLink", { path }, { path }, call)).target;
  }

  /** Removes a name of a file or symlink. */
  async unlink(path: string, call?: CallOptions): Promise<void> {
    await this.fileCall("unlink", "unlink", { path }, { path }, call);
  }

  /** Removes an empty directory. */
  async rmdir(path: string, call?: CallOptions): Promise<void> {
    await this.fileCall("rmdir", "rmdir", { path }, { path }, call);
  }

  /** Makes a file (and, for a directory, its entries) durable; datasync = fdatasync. */
  async fsync(path: string, opts: { datasync?: boolean; offset?: number | bigint; length?: number | bigint } = {}, call?: CallOptions): Promise<void> {
    await this.fileCall("fsync", "fsync", {
      path, ino: 0n, handle: 0n, offset: BigInt(opts.offset ?? 0), length: BigInt(opts.length ?? 0), datasync: !!opts.datasync,
    }, { path }, call);
  }

  /**
   * fallocate(2) on a regular file: by default the range's holes get
   * preallocated extents (reading as zeros, ExtentFlag.UNWRITTEN in fiemap)
   * and the file grows to offset + length; `keepSize` keeps the size,
   * `punchHole` makes the range a hole (and keeps the size), `zeroRange` makes
   * it read as zeros. punchHole with zeroRange, or length 0, is
   * InvalidArgumentError (EINVAL). Resolves to the file's attributes.
   */
  async fallocate(path: string, offset: number | bigint, length: number | bigint,
    opts: { keepSize?: boolean; punchHole?: boolean; zeroRange?: boolean } = {}, call?: CallOptions): Promise<FileStat> {
    const mode = (opts.keepSize || opts.punchHole ? FALLOC_FL_KEEP_SIZE : 0) | (opts.punchHole ? FALLOC_FL_PUNCH_HOLE : 0) |
      (opts.zeroRange ? FALLOC_FL_ZERO_RANGE : 0);
    return statFrom(await this.fileCall<PbFileStat>("fallocate", "fallocate", {
      path, ino: 0n, mode, offset: BigInt(offset), length: BigInt(length),
    }, { path }, call));
  }

  /**
   * setattr: changes the attributes `change` names (an absent one is kept) in
   * one call — chmod, chown, truncate, utimensat (a time may be "now", the
   * server's clock) — and resolves to them afterwards; ctime becomes now when
   * anything changes.
   */
  async setAttr(path: string, change: AttrChange, call?: CallOptions): Promise<FileStat> {
    return statFrom(await this.fileCall<PbFileStat>("setAttr", "setAttr", { path, ino: 0n, ...setAttrFields(change) }, { path }, call));
  }

  /** Sets an extended attribute; flags: XATTR_CREATE (EEXIST if set) or XATTR_REPLACE (ENODATA if not). */
  async setXattr(path: string, name: string, value: Bytes, opts: { flags?: number } = {}, call?: CallOptions): Promise<void> {
    await this.fileCall("setXattr", "setXattr", { path, ino: 0n, name, value: toBuffer(value), flags: opts.flags ?? 0 }, { path }, call);
  }

  /** An extended attribute's value; NotFoundError (errno ENODATA) if it is not set. */
  async getXattr(path: string, name: string, call?: CallOptions): Promise<Buffer> {
    return (await this.fileCall<{ value: Buffer }>("getXattr", "getXattr", { path, ino: 0n, name }, { path }, call)).value;
  }

  /** The names of a file's extended attributes, sorted. */
  async listXattrs(path: string, call?: CallOptions): Promise<string[]> {
    return (await this.fileCall<{ names: string[] }>("listXattrs", "listXattrs", { path, ino: 0n }, { path }, call)).names;
  }

  /** Removes an extended attribute; NotFoundError (errno ENODATA) if it is not set. */
  async removeXattr(path: string, name: string, call?: CallOptions): Promise<void> {
    await this.fileCall("removeXattr", "removeXattr", { path, ino: 0n, name }, { path }, call);
  }

  /** Reflink: makes a range of dst share the extents of a range of src (no data copied). */
  async clone(r: CloneRange, call?: CallOptions): Promise<void> {
    await this.fileCall("clone", "clone", {
      srcPath: r.src, srcIno: 0n, srcOffset: BigInt(r.srcOffset ?? 0), dstPath: r.dst, dstIno: 0n,
      dstOffset: BigInt(r.dstOffset ?? 0), length: BigInt(r.length ?? 0),
    }, { src_path: r.src, dst_path: r.dst }, call);
  }

  /** The extents holding [offset, offset+length) of a file (length 0 = to EOF), across the server's pages. */
  async fiemap(path: string, opts: { offset?: number; length?: number } = {}, call?: CallOptions): Promise<Extent[]> {
    const out: Extent[] = [];
    let offset = opts.offset ?? 0, length = opts.length ?? 0;
    const end = offset + length;
    for (;;) {
      const m = await this.fileCall<FiemapResponse>("fiemap", "fiemap",
        { path, ino: 0n, handle: 0n, offset: BigInt(offset), length: BigInt(length) }, { path }, call);
      for (const e of m.extents) {
        out.push({ logical: num(e.logical), physical: num(e.physical), length: num(e.length), flags: e.flags,
          shared: (e.flags & ExtentFlag.SHARED) !== 0 });
      }
      if (!m.more || m.extents.length === 0) return out;
      const last = out[out.length - 1];
      offset = last.logical + last.length;
      if (length !== 0) {
        if (offset >= end) return out;
        length = end - offset;
      }
    }
  }
}

/** What Subvolume.setAttr changes; an absent field is kept. */
export interface AttrChange {
  /** Permission bits (0o7777; EINVAL beyond). */
  mode?: number;
  uid?: number;
  gid?: number;
  /** A truncate (regular files). */
  size?: number | bigint;
  /** Nanoseconds since the epoch, or "now" (the server's clock, utimensat's UTIME_NOW). */
  atimeNs?: bigint | number | "now";
  mtimeNs?: bigint | number | "now";
}

/** fallocate(2) modes (Linux's FALLOC_FL_* values). */
export const FALLOC_FL_KEEP_SIZE = 0x01;
export const FALLOC_FL_PUNCH_HOLE = 0x02;
export const FALLOC_FL_ZERO_RANGE = 0x10;

/** setxattr(2) flags for Subvolume.setXattr. */
export const XATTR_CREATE = 1;
export const XATTR_REPLACE = 2;

/** The SetAttrRequest fields of a change: the FATTR_* mask and the values (exported for tests). */
export function setAttrFields(c: AttrChange) {
  let fields = 0;
  const time = (v: AttrChange["atimeNs"], bit: number, nowBit: number): bigint => {
    if (v === "now") fields |= nowBit;
    else if (v !== undefined) fields |= bit;
    return v === undefined || v === "now" ? 0n : BigInt(v);
  };
  if (c.mode !== undefined) fields |= 1;
  if (c.uid !== undefined) fields |= 2;
  if (c.gid !== undefined) fields |= 4;
  if (c.size !== undefined) fields |= 8;
  const atimeNs = time(c.atimeNs, 16, 128), mtimeNs = time(c.mtimeNs, 32, 256);
  return {
    fields, mode: c.mode ?? 0, uid: c.uid ?? 0, gid: c.gid ?? 0, size: BigInt(c.size ?? 0), atimeNs, mtimeNs,
  };
}

/**
 * A file open on the server, with a lease every call on it renews; one
 * unused for longer is closed by the server (calls then reject with
 * NotFoundError, errno EBADF).
 */
export class FileHandle {
  readonly handle: bigint;
  readonly ino: number;
  readonly leaseMs: number;
  /** The attributes at open. */
  readonly openedStat: FileStat;

  constructor(private readonly sv: Subvolume, private readonly rpc: Rpc, m: PbOpenResponse) {
    this.handle = m.handle;
    this.ino = num(m.ino);
    this.leaseMs = num(m.leaseMs);
    this.openedStat = statFrom(m.stat);
  }

  private call<Res>(op: string, method: string, req: Record<string, unknown>, call?: CallOptions): Promise<Res> {
    return this.rpc.unary<unknown, Res>(op, this.rpc.files, method, { subvolume: this.sv.name, handle: this.handle, ...req }, call);
  }

  /** The file's attributes now (nlink 0 once its last name went). */
  async stat(call?: CallOptions): Promise<FileStat> {
    return statFrom(await this.call<PbFileStat>("stat", "stat", { path: "", ino: 0n }, call));
  }

  /** Bytes from offset, length of them (0 = to EOF). */
  read(opts: { offset?: number; length?: number } = {}, call?: CallOptions): Promise<Buffer> {
    return this.sv.readStream("", this.handle, opts, call);
  }

  /** Writes data at offset; resolves to the bytes written and the attributes afterwards. */
  write(data: Bytes | AsyncIterable<Uint8Array>, opts: { offset?: number } = {}, call?: CallOptions): Promise<{ bytesWritten: number; stat: FileStat }> {
    return this.sv.writeStream("", this.handle, data, { offset: opts.offset }, call);
  }

  async truncate(size: number, call?: CallOptions): Promise<FileStat> {
    return statFrom(await this.call<PbFileStat>("truncate", "truncate", { path: "", ino: 0n, size: BigInt(size) }, call));
  }

  async fsync(opts: { datasync?: boolean } = {}, call?: CallOptions): Promise<void> {
    await this.call("fsync", "fsync", { path: "", ino: 0n, datasync: !!opts.datasync, offset: 0n, length: 0n }, call);
  }

  /** Gives the file the name newPath (linkat): an O_TMPFILE's first name; a file whose names all went is NotFoundError (ENOENT). */
  async link(newPath: string, call?: CallOptions): Promise<FileStat> {
    checkPath("link", "new_path", newPath);
    return statFrom(await this.call<PbFileStat>("link", "link", { existing: "", ino: 0n, newPath }, call));
  }

  /** Closes the handle; the last one of a file without a name deletes it. */
  async close(call?: CallOptions): Promise<void> {
    await this.rpc.unary("close", this.rpc.files, "closeHandle", { handle: this.handle }, call);
  }
}

/** Call options of a read, with the revision to read at (0 or absent = the latest). */
export interface ReadOptions extends CallOptions {
  revision?: number | bigint;
}
