/**
 * The TypeScript client's conformance adapter: executes one JSON op per line
 * from stdin through the client's public API and answers on stdout
 * (clients/conformance/README.md, "Adapter protocol"). The driver,
 * clients/conformance/driver.py, owns servers, variables and matching;
 * conformance.test.ts runs it with this adapter (dist/test/adapter.js).
 * Bytes arrive and leave as base64; int64 values beyond 2^53 as bigint.
 */
import * as readline from "node:readline";
import * as cowkv from "../src";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

// ---- canonical results ----

const info = (i: cowkv.SubvolumeInfo) => ({ id: i.id, name: i.name, parent_id: i.parentId, read_only: i.readOnly });
const kvMap = (kv: cowkv.KeyValue, revision: number) => ({
  key: kv.key, value: kv.value, create_revision: kv.createRevision, mod_revision: kv.modRevision, version: kv.version, revision,
});
const kvLists = (kvs: cowkv.KeyValue[]) => ({ keys: kvs.map((k) => k.key), values: kvs.map((k) => k.value) });
const pageMap = (p: cowkv.Page) => ({ ...kvLists(p.kvs), count: p.count, more: p.more, next_page_token: p.nextPageToken });
const stat = (s: cowkv.FileStat) => ({
  ino: s.ino, kind: s.kind, mode: s.mode, nlink: s.nlink, size: s.size, uid: s.uid, gid: s.gid,
  atime_ns: s.atimeNs, mtime_ns: s.mtimeNs, ctime_ns: s.ctimeNs,
});
const attrChange = (a: Json): cowkv.AttrChange => ({
  mode: a.mode, uid: a.uid, gid: a.gid, size: a.size,
  atimeNs: a.atime_ns, mtimeNs: a.mtime_ns,
});
const FLAGS: [number, string][] = [[0x1, "LAST"], [0x100, "NOT_ALIGNED"], [0x200, "INLINE"], [0x2000, "SHARED"]];
/** A bytes argument: base64 on the wire; absent = undefined. */
const bytes = (v: Json): Buffer | undefined => (v === undefined ? undefined : Buffer.from(String(v), "base64"));
const durability = (a: Json) => ({ durability: a.durability as cowkv.Durability | undefined });
const range = (a: Json): cowkv.KeyRange => ({ start: bytes(a.start), end: bytes(a.end), prefix: bytes(a.prefix) });
const rangeOpts = (a: Json): cowkv.PageOptions => ({
  reverse: a.reverse, keysOnly: a.keys_only, countOnly: a.count_only, pageSize: a.page_size, limit: a.limit,
  snapshot: a.snapshot, pageToken: bytes(a.page_token), revision: a.revision,
});

const watchEvent = (e: cowkv.WatchEvent | cowkv.FileEvent) => ("path" in e ? {
  type: e.type.toLowerCase(), path: e.path, new_path: e.newPath, revision: e.revision, ino: e.ino, paths_lost: e.pathsLost,
} : {
  type: e.type === "PUT" ? "put" : "delete", key: e.kv.key, value: e.kv.value, create_revision: e.kv.createRevision,
  mod_revision: e.kv.modRevision, version: e.kv.version, has_prev: e.prevKv !== undefined,
  prev_value: e.prevKv?.value ?? Buffer.alloc(0), prev_mod_revision: e.prevKv?.modRevision ?? 0,
});

/** p, or a failure after ms (a watch read has no deadline of its own). */
async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function done(p: Promise<unknown>): Promise<Json> {
  await p;
  return {};
}

async function collect(it: AsyncIterable<cowkv.KeyValue>) {
  const out: cowkv.KeyValue[] = [];
  for await (const kv of it) out.push(kv);
  return kvLists(out);
}

function compare(c: Json): cowkv.Cmp {
  const k = bytes(c.key)!;
  const opName = ({ "=": "eq", "!=": "ne", "<": "lt", ">": "gt" } as const)[c.op as "=" | "!=" | "<" | ">"];
  if (c.target === "exists") return (c.exists === (c.op === "=")) ? cowkv.Compare.exists(k) : cowkv.Compare.missing(k);
  if (c.target === "value") return cowkv.Compare.value(k)[opName](bytes(c.value)!);
  const t = { version: cowkv.Compare.version, create_revision: cowkv.Compare.createRevision, mod_revision: cowkv.Compare.modRevision }[c.target as "version"];
  return t(k)[opName](c.number);
}

function txnOps(list: Json[] | undefined): cowkv.TxnOp[] {
  return (list ?? []).map((o) => {
    const [kind, a] = Object.entries(o)[0] as [string, Json];
    switch (kind) {
      case "put": return cowkv.Op.put(bytes(a.key)!, bytes(a.value) ?? "", { lease: a.lease });
      case "delete": return cowkv.Op.delete(bytes(a.key)!);
      case "delete_range": return cowkv.Op.deleteRange(bytes(a.start), bytes(a.end));
      default: return cowkv.Op.range(range(a), rangeOpts(a));
    }
  });
}

/**
 * link_many's names per directory: all names of one inode in one directory
 * share one inode-ref item, which must fit in a node.
 */
const LINKS_PER_DIR = 400;

/** Not a client error: the adapter could not carry out the op. */
class AdapterFailure extends Error {}

/** One client and the named handles of the current scenario. */
class Adapter {
  client?: cowkv.Client;
  txs = new Map<string, cowkv.Transaction>();
  handles = new Map<string, cowkv.FileHandle>();
  watches = new Map<string, { w: { cancel(): void }; it: AsyncIterator<cowkv.WatchEvent | cowkv.FileEvent> }>();

  cl(): cowkv.Client {
    if (!this.client) throw new AdapterFailure("no client: connect first");
    return this.client;
  }

  /** A new client (a new connection) with these options, lazily. */
  async connect(a: Json): Promise<Json> {
    this.client?.close();
    this.client = undefined;
    this.client = await cowkv.connect(a.address, { token: a.token || undefined, defaultTimeoutMs: a.deadline_ms || undefined });
    return {};
  }

  /** End of a scenario: watchers cancelled, handles forgotten, client closed. */
  reset(): Json {
    for (const { w } of this.watches.values()) w.cancel();
    this.watches.clear();
    this.txs.clear();
    this.handles.clear();
    this.client?.close();
    this.client = undefined;
    return {};
  }

  tx(a: Json): cowkv.Transaction {
    const tx = this.txs.get(a.tx);
    if (!tx) throw new AdapterFailure(`no transaction named ${a.tx}`);
    return tx;
  }

  /** Send and receive; a send stream is held whole (scenarios keep it small). */
  async sendOp(c: cowkv.Client, op: string, a: Json): Promise<Json> {
    switch (op) {
      case "send": {
        const stream = c.send(a.snapshot ?? "", { parent: a.parent, resumeToken: a.resume_token });
        const chunks: Buffer[] = [];
        for await (const chunk of stream) chunks.push(Buffer.from(chunk));
        return { stream: Buffer.concat(chunks), records: stream.stats!.records, bytes: stream.stats!.bytes };
      }
      case "receive": {
        const data = bytes(a.stream) ?? Buffer.alloc(0), cut = a.cut_after_bytes ?? 0;
        const r = await c.receive([cut > 0 ? data.subarray(0, cut) : data], { name: a.name, resumable: a.resumable, dryRun: a.dry_run });
        return { name: r.name, incremental: r.incremental, parent: r.parent, records: r.records };
      }
      case "partial_receives":
        return { partials: (await c.partialReceives()).map((p) => ({ name: p.name, token: p.token, records: p.records })) };
      case "abort_receive": return done(c.abortReceive(a.name));
    }
    return { digest: await c.digest(a.subvolume) };
  }

  async exec(op: string, a: Json): Promise<Json> {
    const c = this.cl(), sv = c.subvolume(a.sv ?? "");
    switch (op) {
      case "create_subvolume": return info(await c.createSubvolume(a.name));
      case "show_subvolume": return info(await c.showSubvolume(a.name));
      case "list_subvolumes": {
        const opts = { readOnly: a.read_only, snapshotsOnly: a.snapshots_only, sort: a.sort };
        return { names: (await c.listSubvolumes(opts)).map((i) => i.name) };
      }
      case "sync_subvolumes": return { synced: await c.syncSubvolumes(a.ids ?? []) };
      case "snapshot": return info(await c.snapshot(a.source, a.name, { readOnly: a.read_only }));
      case "rename_subvolume": return done(c.renameSubvolume(a.name, a.new_name));
      case "delete_subvolume": return done(c.deleteSubvolume(a.name));

      case "get": { const kv = await sv.getKV(bytes(a.key)!, { revision: a.revision }); return kvMap(kv, kv.revision); }
      case "put": return { revision: await sv.put(bytes(a.key)!, bytes(a.value) ?? "", { ...durability(a), lease: a.lease }) };
      case "delete": return { revision: await sv.delete(bytes(a.key)!, durability(a)) };
      case "delete_range": return await sv.deleteRange(range(a), durability(a));
      case "range": return collect(sv.range(range(a), rangeOpts(a)));
      case "range_page": return pageMap(await sv.rangePage(range(a), rangeOpts(a)));
      case "put_many":
        for (let round = 0; round < (a.rounds ?? 1); round++) {
          for (let i = 0; i < a.count; i += 1000) {
            const ops = [];
            for (let j = i; j < Math.min(i + 1000, a.count); j++) {
              ops.push(cowkv.Op.put(`${a.prefix}${String(j).padStart(6, "0")}`, bytes(a.value) ?? ""));
            }
            await sv.txn({ success: ops, durability: a.durability });
          }
        }
        return {};
      case "txn": {
        const r = await sv.txn({ compare: (a.compare ?? []).map(compare), success: txnOps(a.success), failure: txnOps(a.failure), durability: a.durability });
        const responses = r.responses.map((o) =>
          o.kind === "put" ? { put: {} } : o.kind === "delete" ? { delete: { deleted: o.deleted } } : { range: pageMap(o.page) });
        return { succeeded: r.succeeded, revision: r.revision, responses };
      }

      case "begin": {
        const tx = await sv.begin({ leaseMs: a.lease_ms });
        if (a.as) this.txs.set(a.as, tx);
        return { read_revision: tx.readRevision, lease_ms: tx.leaseMs };
      }
      case "tx_get": { const tx = this.tx(a); return kvMap(await tx.getKV(bytes(a.key)!), tx.readRevision); }
      case "tx_range": return collect(this.tx(a).range(range(a), rangeOpts(a)));
      case "tx_put": return done(this.tx(a).put(bytes(a.key)!, bytes(a.value) ?? ""));
      case "tx_delete": return done(this.tx(a).delete(bytes(a.key)!));
      case "tx_delete_range": return done(this.tx(a).deleteRange(bytes(a.start)!, bytes(a.end)));
      case "commit": return { revision: await this.tx(a).commit(durability(a)) };
      case "abort": return done(this.tx(a).abort());
      case "retry_txn_conflict_once": {
        let attempts = 0;
        await sv.runInTransaction(async (tx) => {
          attempts++;
          let n = 0;
          try {
            n = parseInt((await tx.get(bytes(a.key)!)).toString(), 10);
          } catch (err) {
            if (!(err instanceof cowkv.NotFoundError)) throw err;
          }
          if (attempts === 1) await sv.put(bytes(a.key)!, bytes(a.interfere)!);
          await tx.put(bytes(a.key)!, String(n + 1));
        }, { backoffMs: 1, maxBackoffMs: 20 });
        return { attempts };
      }

      case "stat": return stat(await sv.stat(a.path));
      case "mkdir": return stat(await sv.mkdir(a.path, { mode: a.mode }));
      case "create_file": return stat(await sv.createFile(a.path, { mode: a.mode }));
      case "write_file": {
        const r = await sv.writeFile(a.path, bytes(a.data) ?? "", { offset: a.offset, create: a.create, mode: a.mode, truncate: a.truncate });
        return { bytes_written: r.bytesWritten, size: r.stat.size };
      }
      case "read_file": { const d = await sv.readFile(a.path, { offset: a.offset, length: a.length }); return { data: d, size: d.length }; }
      case "readdir": return { names: (await sv.readDir(a.path, { pageSize: a.page_size })).map((e) => e.name) };
      case "rename": {
        const flags: string[] = a.flags ?? [];
        return done(sv.rename(a.from, a.to, { noReplace: flags.includes("noreplace"), exchange: flags.includes("exchange") }));
      }
      case "link": return stat(await sv.link(a.existing, a.new_path));
      case "symlink": return stat(await sv.symlink(a.target, a.path));
      case "readlink": return { target: await sv.readLink(a.path) };
      case "unlink": return done(sv.unlink(a.path));
      case "rmdir": return done(sv.rmdir(a.path));
      case "truncate": return stat(await sv.truncate(a.path, a.size));
      case "fsync": return done(sv.fsync(a.path, { datasync: a.datasync, offset: a.offset, length: a.length }));
      case "open_handle": case "create_tmpfile": {
        const h = op === "open_handle" ? await sv.openHandle(a.path, { leaseMs: a.lease_ms })
          : await sv.createTmpfile(a.dir, { mode: a.mode });
        this.handles.set(a.as, h);
        return { ino: h.ino, lease_ms: h.leaseMs, stat: stat(h.openedStat) };
      }
      case "handle_stat": return stat(await this.handles.get(a.h)!.stat());
      case "handle_read": {
        const data = await this.handles.get(a.h)!.read({ offset: a.offset, length: a.length });
        return { data, size: data.length };
      }
      case "handle_write": return { bytes_written: (await this.handles.get(a.h)!.write(bytes(a.data) ?? Buffer.alloc(0), { offset: a.offset })).bytesWritten };
      case "handle_link": return stat(await this.handles.get(a.h)!.link(a.new_path));
      case "close_handle": {
        const h = this.handles.get(a.h)!;
        this.handles.delete(a.h);
        return done(h.close());
      }
      case "fallocate": {
        const mode: string[] = a.mode ?? [];
        return stat(await sv.fallocate(a.path, a.offset ?? 0, a.length ?? 0, {
          keepSize: mode.includes("keep_size"), punchHole: mode.includes("punch_hole"), zeroRange: mode.includes("zero_range"),
        }));
      }
      case "set_attr": return stat(await sv.setAttr(a.path, attrChange(a)));
      case "set_xattr": {
        const flags = a.flags === "create" ? cowkv.XATTR_CREATE : a.flags === "replace" ? cowkv.XATTR_REPLACE : 0;
        return done(sv.setXattr(a.path, a.name, bytes(a.value) ?? Buffer.alloc(0), { flags }));
      }
      case "get_xattr": return { value: await sv.getXattr(a.path, a.name) };
      case "list_xattrs": return { names: await sv.listXattrs(a.path) };
      case "remove_xattr": return done(sv.removeXattr(a.path, a.name));
      case "link_many":
        for (let i = 0; i < a.count; i++) {
          const dir = `${a.prefix}${String(Math.floor(i / LINKS_PER_DIR)).padStart(4, "0")}`;
          if (i % LINKS_PER_DIR === 0) await sv.mkdir(dir);
          await sv.link(a.existing, `${dir}/${String(i).padStart(6, "0")}`);
        }
        return {};
      case "clone":
        await sv.clone({ src: a.src_path, srcOffset: a.src_offset, dst: a.dst_path, dstOffset: a.dst_offset, length: a.length });
        return {};
      case "fiemap": {
        const extents = (await sv.fiemap(a.path, { offset: a.offset, length: a.length })).map((e) => ({
          logical: e.logical, physical: e.physical, length: e.length,
          flags: FLAGS.filter(([bit]) => e.flags & bit).map(([, name]) => name),
        }));
        return { extents };
      }

      case "lease_grant": return sv.leases.grant(a.ttl ?? 0, { id: a.id });
      case "lease_revoke": return { revision: await sv.leases.revoke(a.id ?? 0) };
      case "lease_keep_alive_once": return { ttl: await sv.leases.keepAliveOnce(a.id ?? 0) };
      case "lease_time_to_live": {
        const i = await sv.leases.timeToLive(a.id ?? 0, { keys: a.keys });
        return { id: i.id, ttl: i.ttl, granted_ttl: i.grantedTtl, keys: i.keys };
      }
      case "lease_list": return { ids: await sv.leases.list() };

      case "compact": return { compact_revision: await sv.compact(a.revision ?? 0) };
      case "watch": {
        const filters = (a.filters ?? []).map((f: string) => (f === "noput" ? "noPut" : "noDelete"));
        const w = sv.watch(bytes(a.key) ?? "", {
          prefix: a.prefix, end: bytes(a.end), startRevision: a.start_revision, prevKv: a.prev_kv, filters,
        });
        await w.ready();
        if (a.as) this.watches.set(a.as, { w, it: w[Symbol.asyncIterator]() });
        else w.cancel();
        return {};
      }
      case "file_watch": {
        const w = sv.watchFiles(a.prefix ?? "", { startRevision: a.start_revision });
        await w.ready();
        if (a.as) this.watches.set(a.as, { w, it: w[Symbol.asyncIterator]() });
        else w.cancel();
        return {};
      }
      case "watch_next": {
        const { it } = this.watches.get(a.w)!;
        const events = [];
        while (events.length < a.count) {
          const r = await within(10_000, it.next());
          if (r.done) throw new Error("the watcher ended without a reason");
          events.push(watchEvent(r.value));
        }
        return { events };
      }
      case "watch_cancel": {
        const { w, it } = this.watches.get(a.w)!;
        this.watches.delete(a.w);
        w.cancel();
        const events = [];
        for (;;) {
          const r = await within(10_000, it.next());
          if (r.done) return { events };
          events.push(watchEvent(r.value));
        }
      }

      case "send": case "receive": case "partial_receives": case "abort_receive": case "digest":
        return this.sendOp(c, op, a);

      case "sync": return { generation: await c.sync() };
      case "check": return { ok: (await c.check()).ok };

    }
    throw new Error(`unknown op ${op}`);
  }
}

// ---- the wire: JSON lines, int64 beyond 2^53 kept exact ----

/** Marks an integer beyond 2^53 while it passes through JSON.parse/stringify as a string. */
const BIG = "#cowkv-bigint:";

/**
 * JSON.parse keeping integers beyond 2^53 as bigint (lease ids are int64):
 * such literals outside strings pass through JSON.parse as marked strings.
 */
function parseLine(line: string): Json {
  const marked = line.replace(/"[^"\\]*(?:\\.[^"\\]*)*"|-?\d{16,}(?![.eE\d])/g, (m) =>
    m[0] === '"' || Number.isSafeInteger(Number(m)) ? m : `"${BIG}${m}"`);
  return JSON.parse(marked, (_k, v) => (typeof v === "string" && v.startsWith(BIG) ? BigInt(v.slice(BIG.length)) : v));
}

/** JSON with Buffers as base64 and bigints as exact integers. */
function stringify(v: Json): string {
  const s = JSON.stringify(v, function (this: Json, k: string, x: Json) {
    const orig = this[k];
    if (Buffer.isBuffer(orig) || orig instanceof Uint8Array) return Buffer.from(orig).toString("base64");
    if (typeof x === "bigint") return `${BIG}${x}`;
    return x;
  });
  return s.replace(/"#cowkv-bigint:(-?\d+)"/g, "$1");
}

function errorAnswer(err: unknown): Json {
  if (!(err instanceof cowkv.CowkvError)) return undefined;
  const is = [];
  if (err instanceof cowkv.FailedPreconditionError) is.push("failed_precondition");
  if (err instanceof cowkv.ResourceExhaustedError) is.push("resource_exhausted");
  if (err instanceof cowkv.TooOldError) is.push("too_old");
  const e: Json = { class: cowkv.errorClassOf(err), is, message: err.message };
  if (err.errno) e.errno = err.errno;
  if (err instanceof cowkv.CompactedError) e.compact_revision = err.compactRevision;
  return e;
}

async function handle(adapter: Adapter, req: Json): Promise<Json> {
  const a = req.args ?? {};
  try {
    if (req.op === "connect") return { id: req.id, result: await adapter.connect(a) };
    if (req.op === "reset") return { id: req.id, result: adapter.reset() };
    return { id: req.id, result: await adapter.exec(req.op, a) };
  } catch (err) {
    const e = errorAnswer(err);
    if (e) return { id: req.id, error: e };
    return { id: req.id, fail: `${(err as Error)?.stack ?? err}` };
  }
}

async function main(): Promise<void> {
  const adapter = new Adapter();
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    process.stdout.write(stringify(await handle(adapter, parseLine(line))) + "\n");
  }
  adapter.reset();
}

main().catch((err) => {
  console.error(err);
  process.exit(2);
});
