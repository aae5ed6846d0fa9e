/**
 * The opt-in retry of UNAVAILABLE (docs/api.md "Retrying UNAVAILABLE"): the
 * method list equals clients/conformance/unavailable_retry.json; against a
 * server down for the first attempt(s) that comes back on its port, a read
 * succeeds with retryUnavailable and fails fast with UnavailableError
 * without it; a write is never retried.
 */
import { describe, it } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as cowkv from "../src";
import { Server, serverBinary, tempDir } from "./server";

const bin = serverBinary();
if (!bin && process.env.COWKV_REQUIRE_SERVER === "1") throw new Error("cowkvd not found (set COWKVD)");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("retryUnavailable", () => {
  it("retries the methods of the spec", async () => {
    const spec = JSON.parse(fs.readFileSync(path.resolve(__dirname, "../../../conformance/unavailable_retry.json"), "utf8"));
    assert.deepEqual([...cowkv.RETRIED_METHODS], spec.methods);
    await assert.rejects(cowkv.connect("127.0.0.1:1", { retryUnavailable: { maxAttempts: 6 } }), cowkv.InvalidArgumentError);
  });

  it("a read outlives a restart only with the option", { skip: bin ? false : "cowkvd not found (set COWKVD)" }, async () => {
    const server = new Server(bin!, tempDir(), "64M");
    await server.start();
    const first = await cowkv.connect(server.addr);
    await first.subvolume("").put("k", "v");
    first.close();
    await server.stop();
    const i = server.args.indexOf("--listen");
    server.args[i + 1] = server.addr;
    const plain = await cowkv.connect(server.addr);
    const t0 = Date.now();
    await assert.rejects(plain.subvolume("").get("k"), cowkv.UnavailableError);
    assert.ok(Date.now() - t0 < 5000);
    plain.close();
    // Backoffs of seconds: a retry comes after the channel reconnected.
    const patient = await cowkv.connect(server.addr, { retryUnavailable: { initialBackoffMs: 2000, maxBackoffMs: 5000 } });
    await assert.rejects(patient.subvolume("").put("k", "w"), cowkv.UnavailableError);
    const restarted = sleep(300).then(() => server.start());
    try {
      const t1 = Date.now();
      const v = await patient.subvolume("").get("k");
      await restarted;
      assert.equal(v?.toString(), "v");
      assert.ok(Date.now() - t1 >= 300);
    } finally {
      patient.close();
      await restarted.catch(() => {}); // the server it starts must be stopped too
      await server.stop();
    }
  });
});
