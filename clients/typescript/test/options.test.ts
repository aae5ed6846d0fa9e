/** connect() options against a live cowkvd: TLS, token, default deadline, cancellation. */
import { after, before, describe, it } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as cowkv from "../src";
import { Server, serverBinary, tempDir } from "./server";

const bin = serverBinary();

describe("connect options", { skip: bin ? false : "cowkvd not found (set COWKVD)" }, () => {
  let server: Server;
  let ca: Buffer;
  before(async () => {
    const dir = tempDir();
    const cert = path.join(dir, "cert.pem"), key = path.join(dir, "key.pem");
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
      "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=cowkvd test", "-addext", "subjectAltName=IP:127.0.0.1"],
      { stdio: "ignore" });
    ca = fs.readFileSync(cert);
    server = new Server(bin!, dir, "32M", "tok", ["--tls-cert", cert, "--tls-key", key]);
    await server.start();
  });
  after(async () => server?.stop());

  it("TLS with a token works; version and stats", async () => {
    const client = await cowkv.connect(server.addr, { tls: { rootCerts: ca }, token: "tok", waitReady: true, defaultTimeoutMs: 5000 });
    const sv = client.subvolume();
    await sv.put("k", "v");
    assert.equal((await sv.get("k")).toString(), "v");
    assert.equal((await client.version()).api, "cowkv.v1");
    assert.ok((await client.stats()).subvolumes >= 1);
    client.close();
  });
  it("no token is unauthenticated; plaintext to TLS is unavailable", async () => {
    const anon = await cowkv.connect(server.addr, { tls: { rootCerts: ca } });
    await assert.rejects(anon.subvolume().get("k"), cowkv.UnauthenticatedError);
    anon.close();
    const plain = await cowkv.connect(server.addr, { token: "tok", defaultTimeoutMs: 2000 });
    await assert.rejects(plain.subvolume().get("k"), cowkv.UnavailableError);
    plain.close();
  });
  it("the default deadline applies; a per-call one wins", async () => {
    const hasty = await cowkv.connect(server.addr, { tls: { rootCerts: ca }, token: "tok", defaultTimeoutMs: 0.001 });
    await assert.rejects(hasty.subvolume().get("k"), cowkv.DeadlineExceededError);
    assert.equal((await hasty.subvolume().get("k", { timeoutMs: 5000 })).toString(), "v");
    hasty.close();
  });
  it("an aborted signal cancels the call", async () => {
    const client = await cowkv.connect(server.addr, { tls: { rootCerts: ca }, token: "tok" });
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(client.subvolume().get("k", { signal: ac.signal }), cowkv.CancelledError);
    client.close();
  });
});
