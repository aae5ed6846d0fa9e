/**
 * The conformance runner: runs ../conformance/scenarios.json (format in
 * ../conformance/README.md) against live cowkvd processes started here
 * ($COWKVD or ../../bazel-bin/server/cowkvd; skipped when absent unless
 * COWKV_REQUIRE_SERVER=1).
 */
import { after, before, describe, it } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as cowkv from "../src";
import { deadAddress, Server, serverBinary, tempDir } from "./server";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
interface Step { op: string; args?: Json; expect?: Json; save?: Record<string, string> }
interface Scenario { name: string; server?: Json; client_side?: boolean; steps: Step[] }

const file = process.env.COWKV_SCENARIOS || path.resolve(__dirname, "../../../conformance/scenarios.json");
const scenarios: Scenario[] = JSON.parse(fs.readFileSync(file, "utf8")).scenarios;
const bin = serverBinary();
if (!bin && process.env.COWKV_REQUIRE_SERVER === "1") throw new Error("cowkvd not found (set COWKVD)");
const run = Math.floor(Math.random() * 0xffffffff).toString(16).padStart(8, "0");

// ---- values and matching (README "Values", "Matching") ----

const isBytes = (v: unknown): v is Buffer => Buffer.isBuffer(v);

function expand(v: Json, vars: Record<string, Json>): Json {
  if (typeof v === "string") {
    const whole = /^\$\{(\w+)\}$/.exec(v);
    const get = (n: string) => {
      if (!(n in vars)) throw new Error(`undefined variable \${${n}}`);
      return vars[n];
    };
    if (whole) return get(whole[1]);
    return v.replace(/\$\{(\w+)\}/g, (_, n) => String(get(n)));
  }
  if (Array.isArray(v)) return v.map((e) => expand(e, vars));
  if (v && typeof v === "object" && !isBytes(v)) {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === "base64") return Buffer.from(v.base64, "base64");
    if (keys.length === 2 && "fill" in v && "size" in v) {
      const fill = expand(v.fill, vars) as string;
      return fill.repeat(Math.ceil(v.size / fill.length) + 1).slice(0, v.size);
    }
    return Object.fromEntries(keys.map((k) => [k, expand(v[k], vars)]));
  }
  return v;
}

const show = (v: Json) => {
  const s = isBytes(v) ? JSON.stringify(v.toString("latin1"))
    : JSON.stringify(v, (_, x) => (isBytes(x) ? x.toString("latin1") : typeof x === "bigint" ? `${x}n` : x));
  return s && s.length > 200 ? `${s.slice(0, 200)}...(${s.length})` : s;
};

function match(exp: Json, act: Json, at: string): void {
  if (exp && typeof exp === "object" && !Array.isArray(exp) && !isBytes(exp)) {
    const keys = Object.keys(exp);
    if (keys.length > 0 && keys.every((k) => k.startsWith("$"))) return matchOps(exp, act, at);
    if (!act || typeof act !== "object") throw new Error(`${at}: want an object, got ${show(act)}`);
    for (const k of keys) {
      if (!(k in act)) throw new Error(`${at}.${k}: missing in result ${show(act)}`);
      match(exp[k], act[k], `${at}.${k}`);
    }
    return;
  }
  if (Array.isArray(exp)) {
    if (!Array.isArray(act) || act.length !== exp.length) throw new Error(`${at}: want ${show(exp)}, got ${show(act)}`);
    exp.forEach((e, i) => match(e, act[i], `${at}[${i}]`));
    return;
  }
  if (isBytes(act) && (typeof exp === "string" || isBytes(exp))) {
    if (act.equals(Buffer.from(exp as string))) return;
  } else if (typeof act === "bigint" && (typeof exp === "number" || typeof exp === "bigint")) {
    // Lease ids are int64 (bigint); the file's numbers are exact for the ids it names.
    if (Number.isInteger(exp) || typeof exp === "bigint") { if (BigInt(exp) === act) return; }
  } else if (exp === act) return;
  throw new Error(`${at}: want ${show(exp)}, got ${show(act)}`);
}

const matches = (exp: Json, act: Json, at: string) => {
  try { match(exp, act, at); return true; } catch { return false; }
};

function matchOps(ops: Json, act: Json, at: string): void {
  for (const [op, arg] of Object.entries(ops) as [string, Json][]) {
    const list: Json[] = Array.isArray(act) ? act : [];
    let ok: boolean;
    switch (op) {
      case "$gt": ok = act > arg; break;
      case "$ge": ok = act >= arg; break;
      case "$lt": ok = act < arg; break;
      case "$le": ok = act <= arg; break;
      case "$ne": ok = !matches(arg, act, at); break;
      case "$len": ok = list.length === arg; break;
      case "$min_len": ok = list.length >= arg; break;
      case "$contains": ok = list.some((e) => matches(arg, e, at)); break;
      case "$not_contains": ok = !list.some((e) => matches(arg, e, at)); break;
      case "$all": list.forEach((e, i) => match(arg, e, `${at}[${i}]`)); ok = true; break;
      default: throw new Error(`${at}: unknown matcher ${op}`);
    }
    if (!ok) throw new Error(`${at}: ${op} ${show(arg)} does not hold for ${show(act)}`);
  }
}

function pathGet(v: Json, p: string): Json {
  for (const part of p.split(".")) v = v?.[Array.isArray(v) ? Number(part) : part];
  return v;
}

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
const bytes = (v: Json): Buffer | undefined => (v === undefined ? undefined : isBytes(v) ? v : Buffer.from(String(v)));
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

// ---- the runner ----

/**
 * link_many's names per directory: all names of one inode in one directory
 * share one inode-ref item, which must fit in a node.
 */
const LINKS_PER_DIR = 400;

class Runner {
  client!: cowkv.Client;
  connectOpts: cowkv.ConnectOptions = {};
  vars: Record<string, Json>;
  txs = new Map<string, cowkv.Transaction>();
  handles = new Map<string, cowkv.FileHandle>();
  watches = new Map<string, { w: { cancel(): void }; it: AsyncIterator<cowkv.WatchEvent | cowkv.FileEvent> }>();

  constructor(readonly sc: Scenario, public addr: string, readonly server?: Server, readonly own = false) {
    this.vars = { run, sv: `c-${run}-${sc.name}` };
  }

  async connect(opts: cowkv.ConnectOptions) {
    this.client?.close();
    this.connectOpts = opts;
    this.client = await cowkv.connect(this.addr, opts);
  }

  /** The scenario's own server, which runner-control ops need. */
  dedicated(op: string): Server {
    if (!this.own || !this.server) throw new Error(`${op} needs a scenario with its own "server"`);
    return this.server;
  }

  tx(a: Json): cowkv.Transaction {
    const tx = this.txs.get(a.tx);
    if (!tx) throw new Error(`no transaction named ${a.tx}`);
    return tx;
  }

  async exec(op: string, a: Json): Promise<Json> {
    const c = this.client, sv = c.subvolume(a.sv ?? "");
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

      case "sync": return { generation: await c.sync() };
      case "check": return { ok: (await c.check()).ok };

      case "connect":
        await this.connect({ token: a.token, defaultTimeoutMs: a.deadline_ms });
        return {};
      case "stop_server": await this.server!.stop(); return {};
      case "restart_server": {
        await this.server!.stop();
        if (a.corrupt_length > 0) {
          const fd = fs.openSync(this.server!.device, "r+");
          const buf = Buffer.alloc(a.corrupt_length);
          fs.readSync(fd, buf, 0, buf.length, a.corrupt_offset);
          for (let i = 0; i < buf.length; i++) buf[i] ^= 0xff;
          fs.writeSync(fd, buf, 0, buf.length, a.corrupt_offset);
          fs.closeSync(fd);
        }
        await this.server!.start();
        this.addr = this.server!.addr;
        await this.connect(this.connectOpts);
        return {};
      }
      case "pause_server": await this.dedicated(op).pause(); return {};
      case "resume_server": this.dedicated(op).resume(); return {};
      case "sleep": await new Promise((r) => setTimeout(r, a.ms ?? 0)); return {};
      case "repeat":
        for (let i = 0; i < a.times; i++) await this.step(i, a.step);
        return {};
    }
    throw new Error(`unknown op ${op}`);
  }

  async step(i: number, s: Step): Promise<void> {
    const args = expand(s.args ?? {}, this.vars);
    const where = `step ${i} (${s.op} ${show(s.args)})`;
    let result: Json, error: unknown;
    try {
      result = await this.exec(s.op, args);
    } catch (err) {
      error = err;
    }
    const exp = expand(s.expect ?? {}, this.vars);
    if (exp.error) {
      const got = cowkv.errorClassOf(error);
      assert.equal(got, exp.error, `${where}: want error ${exp.error}, got ${got}: ${error}`);
      if (exp.error === "read_only") assert.ok(error instanceof cowkv.FailedPreconditionError, where);
      if (exp.error === "no_space") assert.ok(error instanceof cowkv.ResourceExhaustedError, where);
      if (exp.errno) assert.equal((error as cowkv.CowkvError).errno, exp.errno, `${where}: errno of ${error}`);
      if (exp.error === "compacted") assert.ok(error instanceof cowkv.TooOldError, where);
      if ("compact_revision" in exp) match(exp.compact_revision, (error as cowkv.CompactedError).compactRevision, `${where}: compact_revision`);
      return;
    }
    if (error) throw new Error(`${where}: unexpected error: ${error}`);
    if ("result" in exp) {
      try {
        match(exp.result, result, "result");
      } catch (err) {
        throw new Error(`${where}: ${(err as Error).message}`);
      }
    }
    for (const [name, p] of Object.entries(s.save ?? {})) this.vars[name] = pathGet(result, p);
  }
}

async function runScenario(sc: Scenario, shared: Server | undefined, dead?: string): Promise<void> {
  let server = shared, own: Server | undefined;
  if (sc.server && !dead) {
    const token = expand(sc.server.auth_token ?? "", { run });
    own = server = new Server(bin!, tempDir(), sc.server.create_size ?? "32M", token);
    await own.start();
  }
  const r = new Runner(sc, dead ?? server!.addr, server, own !== undefined);
  try {
    await r.connect({});
    for (const [i, s] of sc.steps.entries()) await r.step(i, s);
  } finally {
    for (const { w } of r.watches.values()) w.cancel();
    r.client?.close();
    await own?.stop(); // resumes a server left paused by a failed step
  }
}

describe("conformance", { skip: bin ? false : "cowkvd not found (set COWKVD)" }, () => {
  let shared: Server;
  before(async () => {
    shared = new Server(bin!, tempDir(), "256M");
    await shared.start();
  });
  after(async () => shared?.stop());
  for (const sc of scenarios) {
    const only = process.env.COWKV_SCENARIO;
    it(sc.name, { skip: only && only !== sc.name ? `COWKV_SCENARIO=${only}` : false }, async () => {
      await runScenario(sc, shared);
      // Bad-input pass: the same classes against a dead address prove the client refused the input itself.
      if (sc.client_side) await runScenario(sc, undefined, await deadAddress());
    });
  }
});
