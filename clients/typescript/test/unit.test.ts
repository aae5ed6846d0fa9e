/** Unit tests without a server: error mapping, client-side checks, the retry helper. */
import { describe, it } from "node:test";
import * as assert from "node:assert/strict";
import { status as Status } from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as cowkv from "../src";
import { Rpc } from "../src/rpc";
import { checkKey, checkName, checkPath, checkSubvolume, checkValue } from "../src/validate";

describe("error mapping", () => {
  const cases: [Status, string, string, (new (...a: never[]) => cowkv.CowkvError)[], string?][] = [
    [Status.INVALID_ARGUMENT, "key: a key is 1..1024 bytes, not 0", "invalid_argument", [cowkv.InvalidArgumentError]],
    [Status.INVALID_ARGUMENT, "ENAMETOOLONG: path: a name is at most 255 bytes", "invalid_argument", [cowkv.InvalidArgumentError], "ENAMETOOLONG"],
    [Status.NOT_FOUND, "ENOENT: no such file: /a/b", "not_found", [cowkv.NotFoundError], "ENOENT"],
    [Status.ALREADY_EXISTS, "subvolume 'x' exists", "already_exists", [cowkv.AlreadyExistsError]],
    [Status.FAILED_PRECONDITION, "ENOTEMPTY: directory not empty: /d", "failed_precondition", [cowkv.FailedPreconditionError], "ENOTEMPTY"],
    [Status.FAILED_PRECONDITION, "snapshot: 'x' is not a read-only snapshot; reads of it would not be consistent", "failed_precondition", [cowkv.FailedPreconditionError]],
    [Status.FAILED_PRECONDITION, "subvolume 'x' is a read-only snapshot", "read_only", [cowkv.ReadOnlyError, cowkv.FailedPreconditionError]],
    [Status.FAILED_PRECONDITION, "EROFS: subvolume 'x' is a read-only snapshot", "read_only", [cowkv.ReadOnlyError, cowkv.FailedPreconditionError], "EROFS"],
    [Status.ABORTED, "transaction conflict on key \"k\"", "conflict", [cowkv.ConflictError]],
    [Status.OUT_OF_RANGE, "transaction too old", "too_old", [cowkv.TooOldError]],
    [Status.RESOURCE_EXHAUSTED, "too many open transactions for this client (64)", "resource_exhausted", [cowkv.ResourceExhaustedError]],
    [Status.RESOURCE_EXHAUSTED, "no space left on device: ...", "no_space", [cowkv.NoSpaceError, cowkv.ResourceExhaustedError]],
    [Status.RESOURCE_EXHAUSTED, "ENOSPC: no space left on device", "no_space", [cowkv.NoSpaceError], "ENOSPC"],
    [Status.DATA_LOSS, "EIO: corrupt node", "data_loss", [cowkv.DataLossError], "EIO"],
    [Status.UNAVAILABLE, "cowkvd is stopping", "unavailable", [cowkv.UnavailableError]],
    [Status.UNAUTHENTICATED, "missing token", "unauthenticated", [cowkv.UnauthenticatedError]],
    [Status.PERMISSION_DENIED, "no", "permission_denied", [cowkv.PermissionDeniedError]],
    [Status.DEADLINE_EXCEEDED, "Deadline exceeded", "deadline_exceeded", [cowkv.DeadlineExceededError]],
    [Status.CANCELLED, "Cancelled on client", "cancelled", [cowkv.CancelledError]],
    [Status.UNIMPLEMENTED, "unknown method", "unimplemented", [cowkv.UnimplementedError]],
    [Status.INTERNAL, "device unavailable: EIO", "internal", [cowkv.InternalError]],
    [Status.UNKNOWN, "?", "internal", [cowkv.InternalError]],
  ];
  for (const [code, details, cls, types, errno] of cases) {
    it(`${Status[code]} ${details}`, () => {
      const err = cowkv.toCowkvError({ code, details, message: `${code} ${Status[code]}: ${details}` }, "op");
      assert.equal(err.errorClass, cls);
      assert.equal(cowkv.errorClassOf(err), cls);
      for (const t of types) assert.ok(err instanceof t, `${err.name} is not ${t.name}`);
      assert.ok(err instanceof cowkv.CowkvError && err instanceof Error);
      assert.equal(err.code, code);
      assert.equal(err.details, details);
      assert.equal(err.operation, "op");
      assert.equal(err.errno, errno);
      assert.equal(cowkv.isRetryable(err), cls === "conflict" || cls === "too_old");
      if (cls !== "read_only") assert.ok(!(err instanceof cowkv.ReadOnlyError));
      if (cls !== "no_space") assert.ok(!(err instanceof cowkv.NoSpaceError));
    });
  }
  it("foreign errors", () => {
    assert.equal(cowkv.errorClassOf(new Error("x")), "unknown");
    assert.equal(cowkv.errorClassOf(undefined), "");
    assert.ok(cowkv.toCowkvError(new Error("boom"), "op") instanceof cowkv.InternalError);
  });
});

describe("client-side checks", () => {
  const long = (n: number) => "x".repeat(n);
  const bad: [string, () => void, string?][] = [
    ["empty key", () => checkKey("put", "key", Buffer.alloc(0))],
    ["long key", () => checkKey("put", "key", Buffer.alloc(1025))],
    ["long value", () => checkValue("put", Buffer.alloc(cowkv.MAX_VALUE_BYTES + 1))],
    ["name with /", () => checkName("create", "name", "a/b")],
    ["empty name", () => checkName("create", "name", "")],
    ["long name", () => checkName("create", "name", long(256))],
    ["subvolume with NUL", () => checkSubvolume("get", "a\0b")],
    ["path ..", () => checkPath("mkdir", "path", "/a/../b"), "EINVAL"],
    ["path .", () => checkPath("mkdir", "path", "./b"), "EINVAL"],
    ["long component", () => checkPath("mkdir", "path", "/" + long(256)), "ENAMETOOLONG"],
    ["long path", () => checkPath("mkdir", "path", "/abcdefgh".repeat(456)), "ENAMETOOLONG"],
    ["deep path", () => checkPath("mkdir", "path", "/a".repeat(257)), "EINVAL"],
  ];
  for (const [name, fn, errno] of bad) {
    it(name, () => {
      assert.throws(fn, (err: unknown) =>
        err instanceof cowkv.InvalidArgumentError && err.code === Status.INVALID_ARGUMENT && err.errno === errno);
    });
  }
  it("accepts valid arguments", () => {
    checkKey("put", "key", Buffer.alloc(1024));
    checkName("create", "name", long(255));
    checkName("create", "name", "data@2026-11-22");
    checkSubvolume("get", "");
    for (const p of ["", "/", "a//b/", "/..a/b..", "/" + long(255), "/a".repeat(256)]) checkPath("mkdir", "path", p);
  });
  it("methods reject before any call", async () => {
    const client = await cowkv.connect("127.0.0.1:1"); // never contacted
    const sv = client.subvolume("");
    await assert.rejects(sv.put("", "v"), cowkv.InvalidArgumentError);
    await assert.rejects(client.createSubvolume("a/b"), cowkv.InvalidArgumentError);
    await assert.rejects(sv.mkdir("/x/.."), cowkv.InvalidArgumentError);
    await assert.rejects(sv.txn({ success: [cowkv.Op.put("", "v")] }), cowkv.InvalidArgumentError);
    await assert.rejects(sv.range({ start: "a", prefix: "b" }).next(), cowkv.InvalidArgumentError);
    await assert.rejects(sv.deleteRange({}), cowkv.InvalidArgumentError);
    for (const ttl of [0, -1, 1.5, cowkv.MAX_LEASE_TTL_SECONDS + 1, NaN]) {
      await assert.rejects(sv.leases.grant(ttl), cowkv.InvalidArgumentError, `ttl ${ttl}`);
    }
    await assert.rejects(sv.leases.grant(10, { id: -1 }), cowkv.InvalidArgumentError);
    await assert.rejects(sv.leases.grant(10, { id: 1n << 63n }), cowkv.InvalidArgumentError);
    await assert.rejects(client.subvolume("a/b").leases.list(), cowkv.InvalidArgumentError);
    client.close();
  });
});

/** A fake KV service for the retry helper: scripted commit results. */
function fakeKv(commits: (Status | undefined)[], beginError?: Status) {
  const calls = { begins: 0, commits: 0, aborts: 0, puts: 0 };
  const reply = (code: Status | undefined, res: object, cb: (e: unknown, r: unknown) => void) =>
    setImmediate(() => (code === undefined ? cb(null, res) : cb({ code, details: `scripted ${Status[code]}` }, undefined)));
  const kv = {
    begin: (_r: unknown, _m: unknown, _o: unknown, cb: (e: unknown, r: unknown) => void) => {
      calls.begins++;
      reply(beginError, { handle: BigInt(calls.begins), readRevision: 10n, leaseMs: 30000n }, cb);
      return { cancel() {} };
    },
    txnPut: (_r: unknown, _m: unknown, _o: unknown, cb: (e: unknown, r: unknown) => void) => {
      calls.puts++;
      reply(undefined, {}, cb);
      return { cancel() {} };
    },
    commit: (_r: unknown, _m: unknown, _o: unknown, cb: (e: unknown, r: unknown) => void) => {
      reply(commits[calls.commits++], { revision: 11n }, cb);
      return { cancel() {} };
    },
    abort: (_r: unknown, _m: unknown, _o: unknown, cb: (e: unknown, r: unknown) => void) => {
      calls.aborts++;
      reply(undefined, {}, cb);
      return { cancel() {} };
    },
  };
  const rpc = new Rpc({} as never, kv as never, {} as never, {} as never, undefined, 1000, {} as never);
  return { sv: new cowkv.Subvolume(rpc, "default"), calls };
}

describe("transaction retry helper", () => {
  it("retries conflicts and too-old with jittered exponential backoff", async () => {
    const { sv, calls } = fakeKv([Status.ABORTED, Status.OUT_OF_RANGE, Status.ABORTED]);
    const sleeps: number[] = [];
    let runs = 0;
    const out = await sv.runInTransaction(async (tx) => {
      runs++;
      await tx.put("k", "v");
      return "result";
    }, { backoffMs: 10, maxBackoffMs: 25, sleep: async (ms) => { sleeps.push(ms); } });
    assert.equal(out, "result");
    assert.deepEqual([runs, calls.begins, calls.commits, calls.aborts], [4, 4, 4, 0]);
    [10, 20, 25].forEach((max, i) => assert.ok(sleeps[i] >= max / 2 && sleeps[i] <= max, `sleep ${i} = ${sleeps[i]}`));
  });
  it("gives up after maxAttempts with the conflict error", async () => {
    const { sv, calls } = fakeKv([Status.ABORTED, Status.ABORTED, Status.ABORTED, Status.ABORTED]);
    await assert.rejects(sv.runInTransaction(async () => {}, { maxAttempts: 3, sleep: async () => {} }),
      (e: unknown) => e instanceof cowkv.ConflictError && /gave up after 3 attempts/.test(e.message));
    assert.equal(calls.commits, 3);
  });
  it("does not retry other errors, and aborts on the body's error", async () => {
    const { sv, calls } = fakeKv([]);
    const mine = new Error("application says no");
    let runs = 0;
    await assert.rejects(sv.runInTransaction(async () => { runs++; throw mine; }), (e) => e === mine);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual([runs, calls.aborts, calls.commits], [1, 1, 0]);
    const ro = fakeKv([Status.FAILED_PRECONDITION]);
    await assert.rejects(ro.sv.runInTransaction(async () => {}), cowkv.FailedPreconditionError);
    assert.equal(ro.calls.commits, 1);
    const missing = fakeKv([], Status.NOT_FOUND);
    await assert.rejects(missing.sv.runInTransaction(async () => {}), cowkv.NotFoundError);
  });
  it("retries when the body hits an expired handle", async () => {
    const { sv, calls } = fakeKv([]);
    let runs = 0;
    await sv.runInTransaction(async () => {
      if (++runs === 1) throw cowkv.toCowkvError({ code: Status.ABORTED, details: "transaction expired" }, "txnGet");
    }, { sleep: async () => {} });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual([runs, calls.aborts, calls.commits], [2, 1, 1]);
  });
  it("stops waiting when its signal aborts", async () => {
    const { sv } = fakeKv([Status.ABORTED]);
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(sv.runInTransaction(async () => {}, { backoffMs: 3600000, signal: ac.signal }), cowkv.CancelledError);
  });
  it("keeps the one retry rule with its defaults (clients/conformance/retry_rule.json)", async () => {
    const rule = JSON.parse(readFileSync(join(__dirname, "../../../conformance/retry_rule.json"), "utf8")) as {
      max_attempts: number; first_wait_ms: number; max_wait_ms: number; waits_ms: [number, number][];
    };
    assert.deepEqual([cowkv.DEFAULT_MAX_ATTEMPTS, cowkv.DEFAULT_BACKOFF_MS, cowkv.DEFAULT_MAX_BACKOFF_MS],
      [rule.max_attempts, rule.first_wait_ms, rule.max_wait_ms]);
    for (let round = 0; round < 5; round++) {
      const { sv, calls } = fakeKv(Array(2 * rule.max_attempts).fill(Status.ABORTED));
      const sleeps: number[] = [];
      let runs = 0;
      // transaction, the deprecated name, is the same helper.
      await assert.rejects(sv.transaction(async () => { runs++; }, { sleep: async (ms) => { sleeps.push(ms); } }),
        cowkv.ConflictError);
      assert.deepEqual([runs, calls.commits, sleeps.length], [rule.max_attempts, rule.max_attempts, rule.waits_ms.length]);
      rule.waits_ms.forEach(([lo, hi], i) => assert.ok(sleeps[i] >= lo && sleeps[i] <= hi, `wait ${i + 1} = ${sleeps[i]}`));
    }
  });
  it("backoff stays within bounds", () => {
    for (let n = 1; n < 40; n++) {
      const d = cowkv.backoffMs(n, 10, 1000);
      assert.ok(d >= 5 && d <= 1000, `backoff(${n}) = ${d}`);
    }
  });
});

describe("setAttr request", () => {
  it("sends exactly the fields a change names (FATTR_* bits)", () => {
    const cases: [cowkv.AttrChange, number][] = [
      [{}, 0], [{ mode: 0o600 }, 1], [{ uid: 7 }, 2], [{ gid: 7 }, 4], [{ size: 5 }, 8],
      [{ atimeNs: 1n }, 16], [{ mtimeNs: 2 }, 32], [{ atimeNs: "now" }, 128], [{ mtimeNs: "now" }, 256],
    ];
    for (const [c, want] of cases) assert.equal(cowkv.setAttrFields(c).fields, want, JSON.stringify(c, (_k, v) => String(v)));
    const f = cowkv.setAttrFields({ mode: 0o600, size: 5, atimeNs: 1_000_000_002n });
    assert.deepEqual([f.mode, f.size, f.atimeNs, f.uid, f.mtimeNs], [0o600, 5n, 1_000_000_002n, 0, 0n]);
  });
});
