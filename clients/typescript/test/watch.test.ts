/**
 * Watch against a live cowkvd ($COWKVD or ../../bazel-bin/server/cowkvd;
 * skipped when absent unless COWKV_REQUIRE_SERVER=1).
 *
 * Goal: sv.watch does what docs/api.md "Watch" says through this client:
 * events of puts, deletes and txns in revision order with prevKv, prefixes,
 * a replay from an older revision, filters, cancel()/AbortSignal/break
 * ending the iteration cleanly, typed ends (CompactedError with the
 * compact revision, SubvolumeDeletedError), a fragmented revision joined,
 * refused creates. Method: direct cases plus a seeded random walk of puts,
 * deletes and txns whose watcher's events must equal the model's change
 * list. Replay: COWKV_WATCH_SEED=N (the failure message prints it).
 */
import { after, before, describe, it } from "node:test";
import * as assert from "node:assert/strict";
import * as cowkv from "../src";
import { deadAddress, Server, serverBinary, tempDir } from "./server";

const bin = serverBinary();
if (!bin && process.env.COWKV_REQUIRE_SERVER === "1") throw new Error("cowkvd not found (set COWKVD)");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The next n events of an iterator, within 10 s. */
async function take(it: AsyncIterator<cowkv.WatchEvent>, n: number): Promise<cowkv.WatchEvent[]> {
  const out: cowkv.WatchEvent[] = [];
  const deadline = Date.now() + 10_000;
  while (out.length < n) {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, rej) => { timer = setTimeout(() => rej(new Error(`only ${out.length} events`)), deadline - Date.now()); });
    try {
      const r = await Promise.race([it.next(), late]);
      if (r.done) throw new Error(`ended after ${out.length} events`);
      out.push(r.value);
    } finally {
      clearTimeout(timer);
    }
  }
  return out;
}

const describeEvents = (evs: cowkv.WatchEvent[]) => evs.map((e) =>
  `${e.type} ${e.kv.key}=${e.kv.value}@${e.revision}` + (e.prevKv ? `(prev ${e.prevKv.value}@${e.prevKv.modRevision})` : "")).join("; ");

describe("watch client checks", () => {
  it("refuses bad input before any call", async () => {
    const client = await cowkv.connect(await deadAddress());
    const sv = client.subvolume("");
    assert.throws(() => sv.watch(""), cowkv.InvalidArgumentError);
    assert.throws(() => sv.watch("k".repeat(1025)), cowkv.InvalidArgumentError);
    assert.throws(() => sv.watch("a", { prefix: true, end: "b" }), cowkv.InvalidArgumentError);
    assert.throws(() => sv.watch("a", { startRevision: -1 }), cowkv.InvalidArgumentError);
    assert.deepEqual(cowkv.prefixEnd(Buffer.from("a/")), Buffer.from("a0"));
    assert.deepEqual(cowkv.prefixEnd(Buffer.from([0xff, 0xff])), Buffer.from([0]));
    client.close();
  });
});

describe("watch", { skip: bin ? false : "cowkvd not found (set COWKVD)" }, () => {
  let server: Server;
  let client: cowkv.Client;
  let n = 0;
  const fresh = async () => {
    const name = `watch-${++n}`;
    await client.createSubvolume(name);
    return client.subvolume(name);
  };
  before(async () => {
    server = new Server(bin!, tempDir(), "128M");
    await server.start();
    // A short default timeout: a watcher must outlive it.
    client = await cowkv.connect(server.addr, { defaultTimeoutMs: 1500 });
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("puts, deletes and a txn in revision order, with prevKv, under a prefix", async () => {
    const sv = await fresh();
    const w = sv.watch("cfg/", { prefix: true, prevKv: true });
    await w.ready();
    await sleep(2000); // past the default timeout
    const r1 = await sv.put("cfg/a", "1");
    const r2 = await sv.put("cfg/a", "2");
    await sv.put("cfg0", "outside");
    const r3 = await sv.delete("cfg/a");
    const t = await sv.txn({ success: [cowkv.Op.put("cfg/b", "x"), cowkv.Op.put("cfg/c", "y")] });
    const evs = await take(w[Symbol.asyncIterator](), 5);
    assert.equal(describeEvents(evs), `PUT cfg/a=1@${r1}; PUT cfg/a=2@${r2}(prev 1@${r1}); DELETE cfg/a=@${r3}(prev 2@${r2}); ` +
      `PUT cfg/b=x@${t.revision}; PUT cfg/c=y@${t.revision}`);
    assert.ok(w.revision >= r1);
    w.cancel();
  });

  it("replays from an older revision; a compacted start ends with CompactedError", async () => {
    const sv = await fresh();
    const r1 = await sv.put("h", "1");
    const r2 = await sv.put("h", "2");
    const r3 = await sv.put("h", "3");
    const vals: string[] = [];
    for await (const ev of sv.watch("h", { startRevision: r1 })) {
      vals.push(ev.kv.value.toString());
      if (vals.length === 3) break; // ends the watcher
    }
    assert.deepEqual(vals, ["1", "2", "3"]);
    assert.equal(await sv.compact(r2), r2);
    for (const start of [r1, r2]) {
      await assert.rejects(async () => {
        for await (const _ of sv.watch("h", { startRevision: start })) assert.fail("an event");
      }, (e: unknown) => e instanceof cowkv.CompactedError && e instanceof cowkv.TooOldError &&
        e.compactRevision === r2 + 1 && e.errorClass === "compacted");
    }
    const w = sv.watch("h", { startRevision: r2 + 1 });
    assert.equal(describeEvents(await take(w[Symbol.asyncIterator](), 1)), `PUT h=3@${r3}`);
    w.cancel();
  });

  it("filters", async () => {
    const sv = await fresh();
    const np = sv.watch("f", { filters: ["noPut"] });
    const nd = sv.watch("f", { filters: ["noDelete"] });
    await Promise.all([np.ready(), nd.ready()]);
    const p1 = await sv.put("f", "1");
    const d = await sv.delete("f");
    const p2 = await sv.put("f", "2");
    assert.equal(describeEvents(await take(np[Symbol.asyncIterator](), 1)), `DELETE f=@${d}`);
    assert.equal(describeEvents(await take(nd[Symbol.asyncIterator](), 2)), `PUT f=1@${p1}; PUT f=2@${p2}`);
    np.cancel();
    nd.cancel();
  });

  it("cancel() and an AbortSignal end the iteration without an error", async () => {
    const sv = await fresh();
    const w = sv.watch("quiet");
    await w.ready();
    setTimeout(() => w.cancel(), 200);
    for await (const _ of w) assert.fail("an event");
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const start = Date.now();
    for await (const _ of sv.watch("quiet", { signal: ac.signal })) assert.fail("an event");
    assert.ok(Date.now() - start < 5000);
  });

  it("a deleted subvolume ends the watcher with SubvolumeDeletedError", async () => {
    const sv = await fresh();
    const w = sv.watch("k");
    await w.ready();
    const it = w[Symbol.asyncIterator]();
    await sv.put("k", "v");
    await take(it, 1);
    await client.deleteSubvolume(sv.name);
    await assert.rejects(it.next(), (e: unknown) => e instanceof cowkv.SubvolumeDeletedError && e.errorClass === "subvolume_deleted");
  });

  it("joins a fragmented revision", async () => {
    const sv = await fresh();
    const w = sv.watch("big/", { prefix: true });
    await w.ready();
    const ops = [0, 1, 2].map((i) => cowkv.Op.put(`big/${i}`, Buffer.alloc(700_000, 97 + i)));
    const t = await sv.txn({ success: ops });
    const evs = await take(w[Symbol.asyncIterator](), 3);
    evs.forEach((e, i) => {
      assert.equal(e.revision, t.revision);
      assert.equal(e.kv.value.length, 700_000);
      assert.equal(e.kv.value[0], 97 + i);
    });
    w.cancel();
  });

  it("watchFiles: create, write, rename, unlink under a prefix in order; replay; refused", async () => {
    const sv = await fresh();
    await sv.put("k0", "v"); // a KV write first: see clients/go/filewatch_test.go
    await sv.mkdir("d");
    const w = sv.watchFiles("d/");
    await w.ready();
    const st = await sv.createFile("d/a");
    await sv.createFile("outside");
    await sv.writeFile("d/a", "hello", { create: false, truncate: false });
    await sv.rename("d/a", "d/b");
    await sv.unlink("d/b");
    const it = w[Symbol.asyncIterator]() as AsyncIterator<unknown> as AsyncIterator<cowkv.WatchEvent>;
    const evs = (await take(it, 4)) as unknown as cowkv.FileEvent[];
    const show = (e: cowkv.FileEvent[]) => e.map((x) => `${x.type} ${x.path}>${x.newPath}`).join("; ");
    const want = "CREATE d/a>; MODIFY d/a>; RENAME d/a>d/b; UNLINK d/b>";
    assert.equal(show(evs), want);
    assert.ok(evs.every((e, i) => i === 0 || e.revision > evs[i - 1].revision), JSON.stringify(evs));
    assert.ok(evs.every((e) => e.ino === st.ino));
    w.cancel();
    const again = sv.watchFiles("d", { startRevision: evs[0].revision });
    await again.ready();
    const it2 = again[Symbol.asyncIterator]() as AsyncIterator<unknown> as AsyncIterator<cowkv.WatchEvent>;
    const evs2 = (await take(it2, 4)) as unknown as cowkv.FileEvent[];
    assert.equal(show(evs2), want);
    assert.equal(evs2[3].revision, evs[3].revision);
    again.cancel();
    await client.snapshot(sv.name, `${sv.name}.ro`, { readOnly: true });
    await assert.rejects(client.subvolume(`${sv.name}.ro`).watchFiles("").ready(), cowkv.FailedPreconditionError);
    await assert.rejects(client.subvolume("no-such").watchFiles("").ready(), cowkv.NotFoundError);
  });

  it("refused creates reject ready() with the call's error", async () => {
    await assert.rejects(client.subvolume("no-such").watch("k").ready(), cowkv.NotFoundError);
    await assert.rejects((await fresh()).watch("b", { end: "a" }).ready(), cowkv.InvalidArgumentError);
  });

  it("model: a random walk's changes equal the watcher's events", async () => {
    const seed = Number(process.env.COWKV_WATCH_SEED ?? Math.floor(Math.random() * 2 ** 31));
    let state = seed;
    const rnd = (k: number) => { state = (state * 1103515245 + 12345) % 2 ** 31; return state % k; };
    const sv = await fresh();
    const w = sv.watch("m/", { prefix: true, prevKv: true });
    await w.ready();
    const model = new Map<string, string>();
    const want: string[] = [];
    const change = (k: string, v: string | undefined, rev: number) => {
      const p = model.get(k) ?? "-";
      want.push(v === undefined ? `DELETE ${k}@${rev}(prev ${p})` : `PUT ${k}=${v}@${rev}(prev ${p})`);
      if (v === undefined) model.delete(k); else model.set(k, v);
    };
    let mid = 0;
    for (let i = 0; i < 100; i++) {
      const k = `m/${rnd(4)}`, op = rnd(10);
      if (op < 5) change(k, `v${i}`, await sv.put(k, `v${i}`));
      else if (op < 8) { if (model.has(k)) change(k, undefined, await sv.delete(k)); }
      else {
        const k2 = `m/${4 + rnd(2)}`;
        const t = await sv.txn({ success: [cowkv.Op.put(k, `t${i}`), cowkv.Op.put(k2, `t${i}`)] });
        change(k, `t${i}`, t.revision);
        change(k2, `t${i}`, t.revision);
      }
      if (i === 50) mid = want.length;
    }
    const show = (e: cowkv.WatchEvent) => e.type === "DELETE"
      ? `DELETE ${e.kv.key}@${e.revision}(prev ${e.prevKv?.value ?? "-"})`
      : `PUT ${e.kv.key}=${e.kv.value}@${e.revision}(prev ${e.prevKv?.value ?? "-"})`;
    assert.deepEqual((await take(w[Symbol.asyncIterator](), want.length)).map(show), want, `seed ${seed}`);
    w.cancel();
    if (mid < want.length) {
      const from = Number(/@(\d+)/.exec(want[mid])![1]);
      const late = sv.watch("m/", { prefix: true, prevKv: true, startRevision: from });
      assert.deepEqual((await take(late[Symbol.asyncIterator](), want.length - mid)).map(show), want.slice(mid), `seed ${seed}`);
      late.cancel();
    }
  });
});

/**
 * A client's watchers share KV.Watch streams. Goal: 60 watchers of one
 * client work on a server that lets a client have only 3 calls in flight
 * (a stream per watcher would be refused past the third); cancelling some
 * leaves the others' events intact; a reader that falls behind ends only
 * its own watcher (SlowReaderError) while another watcher of the same stream
 * gets every event; after the last watcher, a new watch opens a new stream.
 */
describe("watch streams shared", { skip: bin ? false : "cowkvd not found (set COWKVD)" }, () => {
  let server: Server;
  let client: cowkv.Client;
  before(async () => {
    server = new Server(bin!, tempDir(), "256M", "", ["--max-calls-per-client", "3"]);
    await server.start();
    // A 2 MiB bound: the slow reader passes it while the stream carries far
    // less than the server's own 24 MiB bound, however slowly this test runs.
    client = await cowkv.connect(server.addr, { watchQueueBytes: 2 << 20 });
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("60 watchers, cancels, one slow reader, reopening", async () => {
    const sv = client.subvolume("");
    const n = 60;
    const ws = Array.from({ length: n }, (_, i) => sv.watch(`s/${i}`));
    await Promise.all(ws.map((w) => w.ready()));
    const its = ws.map((w) => w[Symbol.asyncIterator]());
    for (let i = 0; i < n; i++) await sv.put(`s/${i}`, "a");
    for (let i = 0; i < n; i++) assert.equal((await take(its[i], 1))[0].kv.key.toString(), `s/${i}`);
    for (let i = 0; i < n; i += 2) ws[i].cancel();
    for (let i = 0; i < n; i++) await sv.put(`s/${i}`, "b");
    for (let i = 0; i < n; i++) {
      if (i % 2 === 0) assert.equal((await its[i].next()).done, true);
      else assert.equal((await take(its[i], 1))[0].kv.value.toString(), "b");
    }

    const slow = sv.watch("big");
    const fast = sv.watch("big");
    await Promise.all([slow.ready(), fast.ready()]);
    const puts = 4; // 4 MiB: past the client's 2 MiB per watcher
    const fastIt = fast[Symbol.asyncIterator]();
    const reading = take(fastIt, puts);
    const value = Buffer.alloc(1 << 20, 118);
    for (let i = 0; i < puts; i++) await sv.put("big", value);
    assert.equal((await reading).length, puts);
    const slowIt = slow[Symbol.asyncIterator]();
    let got = 0;
    await assert.rejects(async () => {
      for (;;) {
        const r = await slowIt.next();
        if (r.done) assert.fail("ended without an error");
        got++;
      }
    }, cowkv.SlowReaderError);
    assert.ok(got < puts, `${got} events before the end`);
    for (const w of [...ws, slow, fast]) w.cancel();
    const again = sv.watch("again");
    await again.ready();
    const r = await sv.put("again", "x");
    assert.equal((await take(again[Symbol.asyncIterator](), 1))[0].revision, r);
    again.cancel();
  });
});
