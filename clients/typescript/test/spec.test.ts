/**
 * The client's error classes and limits against clients/spec/*.json itself
 * (not only the generated src/spec.gen.ts): every class, code, reason, watch
 * cancel code, text fallback and limit maps as the spec says. No server.
 */
import { describe, it } from "node:test";
import * as assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { Metadata, status as Status } from "@grpc/grpc-js";
import * as cowkv from "../src";
import * as validate from "../src/validate";

/* eslint-disable @typescript-eslint/no-explicit-any */
const dir = path.resolve(__dirname, "../../../spec");
const errors: any = JSON.parse(readFileSync(path.join(dir, "errors.json"), "utf8"));
const limits: any = JSON.parse(readFileSync(path.join(dir, "limits.json"), "utf8"));
const codeNumber = new Map<string, number>(errors.codes.map((c: any) => [c.name, c.number]));
const codeClass = new Map<string, string>(errors.codes.map((c: any) => [c.name, c.class]));

/** One length-delimited protobuf field (payloads under 128 bytes). */
const field = (no: number, payload: Buffer) => Buffer.concat([Buffer.from([(no << 3) | 2, payload.length]), payload]);

function withReason(code: number, details: string, reason: string) {
  const info = Buffer.concat([field(1, Buffer.from(reason)), field(2, Buffer.from("cowkv.dev"))]);
  const any = Buffer.concat([field(1, Buffer.from("type.googleapis.com/google.rpc.ErrorInfo")), field(2, info)]);
  const metadata = new Metadata();
  metadata.set("grpc-status-details-bin", Buffer.concat([Buffer.from([0x08, code]), field(2, Buffer.from(details)), field(3, any)]));
  return { code, details, message: details, metadata };
}

describe("clients/spec/errors.json", () => {
  it("has a class for every spec class, with its parent and retry rule", () => {
    for (const c of errors.classes) {
      const cls = cowkv.ERROR_CLASSES.get(c.name);
      assert.ok(cls, c.name);
      const e = new cls("m", codeNumber.get(c.code) as Status, "op");
      assert.equal(e.errorClass, c.name);
      assert.equal(e.retryTransaction, c.retryable, c.name);
      const parent = c.parent ? cowkv.ERROR_CLASSES.get(c.parent) : cowkv.CowkvError;
      assert.equal(Object.getPrototypeOf(cls), parent, c.name);
    }
  });

  it("maps every code to its class, and every reason to its class whatever the text", () => {
    for (const c of errors.codes) {
      assert.equal(cowkv.toCowkvError({ code: c.number, details: "m" }, "op").errorClass, c.class, c.name);
    }
    for (const r of errors.reasons) {
      for (const code of r.codes) {
        const e = cowkv.toCowkvError(withReason(codeNumber.get(code)!, "read-only: no space", r.reason), "op");
        assert.equal(e.errorClass, r.class ?? codeClass.get(code), `${r.reason} ${code}`);
        assert.equal(e.reason, r.reason);
      }
    }
  });

  it("reads the text only without ErrorInfo, by the spec's fallbacks", () => {
    for (const f of errors.fallbacks) {
      for (const text of [...f.prefixes, ...f.contains]) {
        const e = cowkv.toCowkvError({ code: codeNumber.get(f.code), details: `${text} and more` }, "op");
        assert.equal(e.errorClass, f.class, text);
      }
      for (const u of f.unless) {
        assert.equal(cowkv.toCowkvError({ code: codeNumber.get(f.code), details: u }, "op").errorClass, codeClass.get(f.code));
      }
    }
  });
});

describe("clients/spec/limits.json", () => {
  it("is what the client checks", () => {
    const want = Object.fromEntries(limits.limits.map((l: any) => [l.name, l.value]));
    assert.equal(validate.MAX_KEY_BYTES, want.max_key_bytes);
    assert.equal(validate.MAX_VALUE_BYTES, want.max_value_bytes);
    assert.equal(validate.MAX_NAME_BYTES, want.max_name_bytes);
    assert.equal(validate.MAX_PATH_BYTES, want.max_path_bytes);
    assert.equal(validate.MAX_PATH_DEPTH, want.max_path_depth);
    assert.equal(validate.MAX_WRITE_CHUNK, want.max_write_chunk_bytes);
    assert.equal(validate.MAX_TXN_OPS, want.max_txn_ops);
    assert.equal(validate.MAX_LEASE_MS, want.max_lease_ms);
    assert.equal(validate.MAX_LEASE_TTL_SECONDS, want.max_lease_ttl_seconds);
    assert.throws(() => validate.checkBound("range", "end", Buffer.alloc(want.max_bound_bytes + 1)), cowkv.InvalidArgumentError);
    validate.checkBound("range", "end", Buffer.alloc(want.max_bound_bytes));
    assert.throws(() => validate.checkSymlinkTarget("symlink", "t".repeat(want.max_symlink_bytes + 1)), cowkv.InvalidArgumentError);
    validate.checkSymlinkTarget("symlink", "t".repeat(want.max_symlink_bytes));
  });
});
