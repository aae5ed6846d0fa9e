/**
 * Leases against a live cowkvd ($COWKVD or ../../bazel-bin/server/cowkvd;
 * skipped when absent unless COWKV_REQUIRE_SERVER=1).
 *
 * Goal: the client's lease surface (grant, put/Op.put with a lease,
 * timeToLive, list, revoke, keepAliveOnce, the background keepAlive) does
 * what docs/api.md "Leases" says, including expiry and errors.
 * Method: direct cases with TTLs of 1-2 s, plus a seeded random walk of
 * grants, puts with and without leases, deletes and revokes checked against
 * a model of which key belongs to which lease after every step.
 * Replay: COWKV_LEASE_SEED=N (the failure message prints it).
 */
import { after, before, describe, it } from "node:test";
import * as assert from "node:assert/strict";
import * as cowkv from "../src";
import { Server, serverBinary, tempDir } from "./server";

const bin = serverBinary();
if (!bin && process.env.COWKV_REQUIRE_SERVER === "1") throw new Error("cowkvd not found (set COWKVD)");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const keysOf = async (sv: cowkv.Subvolume) => {
  const out: string[] = [];
  for await (const kv of sv.range({ prefix: "k" }, { keysOnly: true })) out.push(kv.key.toString());
  return out;
};

describe("leases", { skip: bin ? false : "cowkvd not found (set COWKVD)" }, () => {
  let server: Server;
  let client: cowkv.Client;
  let n = 0;
  const fresh = async () => {
    const name = `lease-${++n}`;
    await client.createSubvolume(name);
    return client.subvolume(name);
  };
  before(async () => {
    server = new Server(bin!, tempDir(), "64M");
    await server.start();
    client = await cowkv.connect(server.addr);
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("grant, put with a lease, timeToLive with keys, revoke deletes the keys", async () => {
    const sv = await fresh();
    const g = await sv.leases.grant(60);
    assert.equal(typeof g.id, "bigint");
    assert.ok(g.id > 0n);
    assert.equal(g.ttl, 60);
    const mine = await sv.leases.grant(30, { id: 77 });
    assert.equal(mine.id, 77n);
    await assert.rejects(sv.leases.grant(30, { id: 77n }), cowkv.AlreadyExistsError);
    await sv.put("k1", "a", { lease: g.id });
    await sv.txn({ success: [cowkv.Op.put("k2", "b", { lease: g.id }), cowkv.Op.put("k3", "c")] });
    await sv.put("k4", "d", { lease: 77 });
    const info = await sv.leases.timeToLive(g.id, { keys: true });
    assert.equal(info.id, g.id);
    assert.equal(info.grantedTtl, 60);
    assert.ok(info.ttl > 0 && info.ttl <= 60, `ttl ${info.ttl}`);
    assert.deepEqual(info.keys.map(String), ["k1", "k2"]);
    assert.deepEqual((await sv.leases.timeToLive(g.id)).keys, []);
    assert.deepEqual(await sv.leases.list(), [77n, g.id].sort((a, b) => (a < b ? -1 : 1)));
    assert.equal(await sv.leases.keepAliveOnce(g.id), 60);
    const rev = await sv.leases.revoke(g.id);
    assert.ok(rev > 0);
    assert.deepEqual(await keysOf(sv), ["k3", "k4"]);
    assert.deepEqual(await sv.leases.list(), [77n]);
  });

  it("a lease that is not kept alive expires with its keys", async () => {
    const sv = await fresh();
    const { id } = await sv.leases.grant(1);
    await sv.put("k", "v", { lease: id });
    await sleep(1800);
    await assert.rejects(sv.get("k"), cowkv.NotFoundError);
    await assert.rejects(sv.leases.timeToLive(id), cowkv.NotFoundError);
  });

  it("keepAlive keeps a lease alive past its TTL until stopped", async () => {
    const sv = await fresh();
    const { id } = await sv.leases.grant(1);
    await sv.put("k", "v", { lease: id });
    // Through a client whose default deadline (800 ms) is far shorter: the stream has none.
    const hasty = await cowkv.connect(server.addr, { defaultTimeoutMs: 800 });
    const ka = hasty.subvolume(sv.name).leases.keepAlive(id);
    await sleep(2500);
    assert.equal((await sv.get("k")).toString(), "v");
    assert.equal(ka.ttl, 1);
    assert.ok(!ka.lost && ka.error === undefined);
    await ka.stop();
    await ka.stop(); // twice is fine
    assert.equal(ka.error, undefined, "stop() is not an error");
    hasty.close();
    await sleep(1800);
    await assert.rejects(sv.get("k"), cowkv.NotFoundError);
  });

  it("an AbortSignal stops keepAlive; a revoked lease makes it lost", async () => {
    const sv = await fresh();
    const { id } = await sv.leases.grant(3);
    const ac = new AbortController();
    const ka = sv.leases.keepAlive(id, { signal: ac.signal });
    await sleep(100);
    ac.abort();
    await ka.done;
    assert.ok(!ka.lost && ka.error === undefined);
    await sv.leases.revoke(id);
    const gone = sv.leases.keepAlive(id);
    await gone.done;
    assert.ok(gone.lost);
    assert.equal(gone.error, undefined);
  });

  it("an unknown lease is NotFoundError", async () => {
    const sv = await fresh();
    await assert.rejects(sv.leases.revoke(424242), cowkv.NotFoundError);
    await assert.rejects(sv.leases.timeToLive(424242, { keys: true }), cowkv.NotFoundError);
    await assert.rejects(sv.leases.keepAliveOnce(424242), cowkv.NotFoundError);
    await assert.rejects(sv.put("k", "v", { lease: 424242 }), cowkv.NotFoundError);
    await assert.rejects(sv.txn({ success: [cowkv.Op.put("k", "v", { lease: 424242n })] }), cowkv.NotFoundError);
    await assert.rejects(sv.get("k"), cowkv.NotFoundError);
    await assert.rejects(client.subvolume("no-such-subvolume").leases.list(), cowkv.NotFoundError);
  });

  it("random grants, puts, deletes and revokes match a model", async () => {
    const seed = Number(process.env.COWKV_LEASE_SEED ?? Math.floor(Math.random() * 2 ** 31));
    let state = seed;
    const rand = (k: number) => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return (state >>> 8) % k;
    };
    const sv = await fresh();
    const owner = new Map<string, bigint>(); // key -> lease (0n = none)
    const leases = new Set<bigint>();
    const ids = [1n, 2n, 3n];
    for (let step = 0; step < 120; step++) {
      const where = `seed=${seed} step=${step} (replay: COWKV_LEASE_SEED=${seed})`;
      const key = `k${rand(6)}`, id = ids[rand(ids.length)];
      switch (rand(5)) {
        case 0:
          if (leases.has(id)) await assert.rejects(sv.leases.grant(60, { id }), cowkv.AlreadyExistsError, where);
          else { await sv.leases.grant(60, { id }); leases.add(id); }
          break;
        case 1: case 2: {
          const lease = rand(3) === 0 ? 0n : id;
          if (lease !== 0n && !leases.has(lease)) {
            await assert.rejects(sv.put(key, "v", { lease }), cowkv.NotFoundError, where);
          } else {
            await sv.put(key, "v", { lease });
            owner.set(key, lease);
          }
          break;
        }
        case 3:
          if (owner.has(key)) { await sv.delete(key); owner.delete(key); }
          break;
        default:
          if (!leases.has(id)) { await assert.rejects(sv.leases.revoke(id), cowkv.NotFoundError, where); break; }
          await sv.leases.revoke(id);
          leases.delete(id);
          for (const [k, l] of owner) if (l === id) owner.delete(k);
      }
      assert.deepEqual(await keysOf(sv), [...owner.keys()].sort(), where);
      assert.deepEqual(await sv.leases.list(), [...leases].sort((a, b) => (a < b ? -1 : 1)), where);
      for (const l of leases) {
        const want = [...owner].filter(([, o]) => o === l).map(([k]) => k).sort();
        assert.deepEqual((await sv.leases.timeToLive(l, { keys: true })).keys.map(String), want, `${where} lease ${l}`);
      }
    }
  });
});
