/**
 * Send and receive against two live cowkvd servers: a random subvolume's
 * snapshots sent whole into the same server under a new name and piped into
 * the other, an incremental stream, a resumable receive truncated
 * mid-stream and resumed from its listed token, one whose source throws
 * mid-upload aborted, and damaged and stale tokens and a partial receive's
 * name refused with their classes and reasons. Every copy has its source's
 * digest. $COWKV_SEND_SEED replays a seed.
 */
import { after, before, describe, it } from "node:test";
import * as assert from "node:assert/strict";
import { Writable } from "node:stream";
import * as cowkv from "../src";
import { Server, serverBinary, tempDir } from "./server";

const bin = serverBinary();

/** A small seeded PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function fill(r: () => number, sv: cowkv.Subvolume, round: number): Promise<void> {
  for (let i = 0; i < 40; i++) {
    const k = `k${String(Math.floor(r() * 60)).padStart(3, "0")}`;
    if (r() < 0.25) await sv.delete(k).catch((e) => { if (!(e instanceof cowkv.NotFoundError)) throw e; });
    else await sv.put(k, `v${round}-${r()}`);
  }
  const big = Buffer.alloc((1 << 20) + Math.floor(r() * (2 << 20)));
  for (let i = 0; i < big.length; i++) big[i] = Math.floor(r() * 256);
  await sv.writeFile(`/big${round}`, big, { create: true });
  await sv.writeFile("/small", `round ${round}`, { create: true, truncate: true });
}

async function collect(stream: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(c);
  return Buffer.concat(parts);
}

async function* pieces(data: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let off = 0; off < data.length; off += size) yield data.subarray(off, off + size);
}

const hasReason = (cls: Function, reason: string) => (e: unknown) => {
  assert.ok(e instanceof cls, `${e} is not a ${cls.name}`);
  assert.equal((e as cowkv.CowkvError).reason, reason);
  return true;
};

describe("send and receive", { skip: bin ? false : "cowkvd not found (set COWKVD)" }, () => {
  let sa: Server, sb: Server;
  let a: cowkv.Client, b: cowkv.Client;
  before(async () => {
    sa = new Server(bin!, tempDir(), "256M");
    sb = new Server(bin!, tempDir(), "256M");
    await Promise.all([sa.start(), sb.start()]);
    a = await cowkv.connect(sa.addr);
    b = await cowkv.connect(sb.addr);
    const seed = Number(process.env.COWKV_SEND_SEED ?? Date.now() % 1e9);
    console.log(`seed ${seed}`);
    const r = rng(seed);
    await a.createSubvolume("src");
    for (const round of [1, 2]) {
      await fill(r, a.subvolume("src"), round);
      await a.snapshot("src", `s${round}`, { readOnly: true });
    }
  });
  after(async () => {
    a?.close();
    b?.close();
    await sa?.stop();
    await sb?.stop();
  });

  it("full into the same server and piped into another, then incremental", async () => {
    const parts: Buffer[] = [];
    const sink = new Writable({ write(c, _e, cb) { parts.push(c); cb(); } });
    const stats = await a.sendTo(sink, "s1");
    const full = Buffer.concat(parts);
    assert.equal(stats.bytes, full.length);
    let got = await a.receive(pieces(full, 300000), { name: "s1copy" });
    assert.equal(got.name, "s1copy");
    assert.equal(got.incremental, false);
    assert.equal(await a.digest("s1copy"), await a.digest("s1"));
    const s = a.send("s1");
    got = await b.receive(s);
    assert.equal(got.name, "s1");
    assert.ok(s.stats);
    assert.equal(await b.digest("s1"), await a.digest("s1"));
    got = await b.receive(a.send("s2", { parent: "s1" }));
    assert.ok(got.incremental);
    assert.equal(got.parent, "s1");
    assert.equal(await b.digest("s2"), await a.digest("s2"));
    await assert.rejects(collect(a.send("nosuch")), cowkv.NotFoundError);
  });

  it("resumes a cut receive from its token, refuses bad tokens, aborts", async () => {
    const full = await collect(a.send("s2"));
    const cutAt = Math.floor(full.length / 4 + Math.random() * full.length / 2);
    await assert.rejects(b.receive(pieces(full.subarray(0, cutAt), 1 << 20), { name: "cut", resumable: true }),
      hasReason(cowkv.DataLossError, "STREAM_CORRUPT"));
    const p = (await b.partialReceives()).find((x) => x.name === "cut");
    assert.ok(p && p.token && !p.inUse);
    const bad = Buffer.from(p.token);
    bad[bad.length >> 1] ^= 1;
    await assert.rejects(collect(a.send("", { resumeToken: bad.toString() })), hasReason(cowkv.InvalidArgumentError, "RESUME_TOKEN"));
    await assert.rejects(b.receive([full], { name: "cut" }), hasReason(cowkv.AlreadyExistsError, "PARTIAL_RECEIVE"));
    const got = await b.receive(a.send("", { resumeToken: p.token }));
    assert.equal(got.name, "cut");
    assert.equal(await b.digest("cut"), await a.digest("s2"));
    await assert.rejects(b.receive(a.send("", { resumeToken: p.token })), hasReason(cowkv.NotFoundError, "RESUME_MISMATCH"));

    const dropped = new Error("upload dropped");
    async function* dying(): AsyncGenerator<Buffer> {
      yield full.subarray(0, full.length >> 1);
      await new Promise((r) => setTimeout(r, 300));
      throw dropped;
    }
    await assert.rejects(b.receive(dying(), { name: "drop", resumable: true }), (e) => e === dropped);
    let listed: cowkv.PartialReceive | undefined;
    for (let i = 0; i < 1000 && !listed; i++) {
      listed = (await b.partialReceives()).find((x) => x.name === "drop" && !x.inUse);
      if (!listed) await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(listed, "the cancelled receive is not listed");
    await b.abortReceive("drop");
    await assert.rejects(b.abortReceive("drop"), hasReason(cowkv.NotFoundError, "RESUME_MISMATCH"));
    assert.deepEqual(await b.partialReceives(), []);
  });
});
