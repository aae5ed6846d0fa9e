/**
 * Error classes from google.rpc.ErrorInfo.
 *
 * Unit: statuses with the grpc-status-details-bin trailer cowkvd sends pick
 * their class by the ErrorInfo reason whatever the text says (the messages
 * are chosen so that the text fallback would pick another class); a
 * damaged trailer falls back to the text. Live (skipped without cowkvd
 * unless COWKV_REQUIRE_SERVER=1): reason and errno of real errors.
 */
import { after, before, describe, it } from "node:test";
import * as assert from "node:assert/strict";
import { Metadata, status as Status } from "@grpc/grpc-js";
import * as cowkv from "../src";
import { Server, serverBinary, tempDir } from "./server";

/** One length-delimited protobuf field (payloads under 128 bytes). */
const field = (no: number, payload: Buffer) => {
  assert.ok(payload.length < 128);
  return Buffer.concat([Buffer.from([(no << 3) | 2, payload.length]), payload]);
};

/** A ServiceError as grpc-js gives it, with google.rpc.Status{code, message, [Any(ErrorInfo)]} in its trailers. */
function serviceError(code: Status, details: string, reason: string, md: Record<string, string> = {}, raw?: Buffer) {
  let info = Buffer.concat([field(1, Buffer.from(reason)), field(2, Buffer.from("cowkv.dev"))]);
  for (const [k, v] of Object.entries(md)) {
    info = Buffer.concat([info, field(3, Buffer.concat([field(1, Buffer.from(k)), field(2, Buffer.from(v))]))]);
  }
  const any = Buffer.concat([field(1, Buffer.from("type.googleapis.com/google.rpc.ErrorInfo")), field(2, info)]);
  const st = Buffer.concat([Buffer.from([0x08, code]), field(2, Buffer.from(details)), field(3, any)]);
  const metadata = new Metadata();
  metadata.set("grpc-status-details-bin", raw ?? st);
  return { code, details, message: `${code}: ${details}`, metadata };
}

describe("error classes from ErrorInfo", () => {
  const cases: [Status, string, string, string][] = [
    [Status.FAILED_PRECONDITION, "READ_ONLY_SNAPSHOT", "write refused", "read_only"],
    [Status.FAILED_PRECONDITION, "EROFS", "store", "read_only"],
    [Status.FAILED_PRECONDITION, "ENOTEMPTY", "read-only thing is not empty", "failed_precondition"],
    [Status.RESOURCE_EXHAUSTED, "ENOSPC", "device full", "no_space"],
    [Status.RESOURCE_EXHAUSTED, "SERVER_BUSY", "no space in the queue", "resource_exhausted"],
    [Status.RESOURCE_EXHAUSTED, "LIMIT", "no space for the response", "resource_exhausted"],
    [Status.ABORTED, "CONFLICT", "x", "conflict"],
    [Status.OUT_OF_RANGE, "TOO_OLD", "x", "too_old"],
    [Status.OUT_OF_RANGE, "COMPACTED", "x", "compacted"],
    [Status.OUT_OF_RANGE, "FUTURE_REVISION", "x", "future_revision"],
    [Status.NOT_FOUND, "LEASE_NOT_FOUND", "x", "not_found"],
    [Status.INTERNAL, "DEVICE_UNAVAILABLE", "x", "internal"],
    [Status.UNAVAILABLE, "STOPPING", "x", "unavailable"],
  ];
  for (const [code, reason, details, cls] of cases) {
    it(`${reason} -> ${cls}`, () => {
      const err = cowkv.toCowkvError(serviceError(code, details, reason, { compact_revision: "42" }), "op");
      assert.equal(err.errorClass, cls);
      assert.equal(err.reason, reason);
      assert.equal(err.metadata.compact_revision, "42");
      assert.equal(err.code, code);
      assert.equal(cowkv.isRetryable(err), cls === "conflict" || cls === "too_old" || cls === "compacted");
      if (cls === "compacted") assert.equal((err as cowkv.CompactedError).compactRevision, 42);
    });
  }
  it("takes errno from the metadata, not the text", () => {
    const err = cowkv.toCowkvError(
      serviceError(Status.FAILED_PRECONDITION, "no prefix", "READ_ONLY_SNAPSHOT", { errno: "EROFS" }), "op");
    assert.ok(err instanceof cowkv.ReadOnlyError);
    assert.equal(err.errno, "EROFS");
  });
  it("falls back to the text when the trailer is damaged or absent", () => {
    const bad = cowkv.toCowkvError(
      serviceError(Status.FAILED_PRECONDITION, "EROFS: x", "", {}, Buffer.from([0x1a, 0x7f])), "op");
    assert.equal(bad.errorClass, "read_only");
    assert.equal(bad.reason, "");
    const none = cowkv.toCowkvError({ code: Status.RESOURCE_EXHAUSTED, details: "no space left" }, "op");
    assert.equal(none.errorClass, "no_space");
    assert.equal(cowkv.errorInfoFromDetails(undefined), undefined);
  });
});

const bin = serverBinary();
if (!bin && process.env.COWKV_REQUIRE_SERVER === "1") throw new Error("cowkvd not found (set COWKVD)");

describe("ErrorInfo from a live cowkvd", { skip: bin ? false : "cowkvd not found (set COWKVD)" }, () => {
  let server: Server;
  let client: cowkv.Client;
  before(async () => {
    server = new Server(bin!, tempDir(), "64M");
    await server.start();
    client = await cowkv.connect(server.addr);
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("gives the server's reason and errno", async () => {
    await client.createSubvolume("e");
    await client.snapshot("e", "e@ro", { readOnly: true });
    const sv = client.subvolume("e"), ro = client.subvolume("e@ro");
    const check = async (p: Promise<unknown>, cls: string, reason: string, errno?: string) => {
      await assert.rejects(p, (e: unknown) => {
        assert.ok(e instanceof cowkv.CowkvError);
        assert.deepEqual([e.errorClass, e.reason, e.errno], [cls, reason, errno]);
        return true;
      });
    };
    await check(ro.put("k", "v"), "read_only", "READ_ONLY_SNAPSHOT");
    await check(ro.mkdir("/d"), "read_only", "READ_ONLY_SNAPSHOT", "EROFS");
    await sv.mkdir("/d");
    await sv.createFile("/d/f");
    await check(sv.rmdir("/d"), "failed_precondition", "ENOTEMPTY", "ENOTEMPTY");
    await check(sv.stat("/none"), "not_found", "ENOENT", "ENOENT");
    await check(client.createSubvolume("e"), "already_exists", "ALREADY_EXISTS");
  });
});
