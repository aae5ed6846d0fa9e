/**
 * The conformance scenarios (../conformance/scenarios.json) through this
 * client: the shared driver (clients/conformance/driver.py) runs every
 * scenario with this client's adapter (adapter.ts, one JSON op per line)
 * against cowkvd processes it starts itself, and fails on the first step of
 * a scenario whose outcome differs. The server binary is $COWKVD or
 * ../../bazel-bin/server/cowkvd (skipped when absent unless
 * COWKV_REQUIRE_SERVER=1); COWKV_SCENARIO=name runs one scenario.
 */
import { describe, it } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { serverBinary } from "./server";

const bin = serverBinary();
if (!bin && process.env.COWKV_REQUIRE_SERVER === "1") throw new Error("cowkvd not found (set COWKVD)");

describe("conformance", { skip: bin ? false : "cowkvd not found (set COWKVD)" }, () => {
  it("every scenario through the adapter", () => {
    const driver = path.resolve(__dirname, "../../../conformance/driver.py");
    const adapter = `${process.execPath} ${path.join(__dirname, "adapter.js")}`;
    const args = [driver, "--adapter", adapter, "--cowkvd", bin!];
    if (process.env.COWKV_SCENARIO) args.push("--only", process.env.COWKV_SCENARIO);
    const r = spawnSync("python3", args, { encoding: "utf8", maxBuffer: 64 << 20 });
    const out = `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ?? ""}`;
    assert.equal(r.status, 0, out);
    console.log(out.trim().split("\n").pop()); // the summary line
  });
});
