// The TypeScript quickstart of clients/install_test.sh as an ES module
// (`import`), type-checked against the tarball's index.d.mts and run as
// quickstart.mjs. Usage: node quickstart.mjs HOST:PORT SUBVOLUME.
import { connect, NotFoundError } from "@cowkv/client";

const [addr, name] = process.argv.slice(2);
const client = await connect(addr);
try {
  await client.createSubvolume(name);
  const sv = client.subvolume(name);
  await sv.put("user/1", "alice");
  await sv.put("user/2", "bob");
  const v = (await sv.get("user/1")).toString();
  let users = 0;
  for await (const _kv of sv.range({ prefix: "user/" })) users++;
  const n = await sv.transaction(async (tx) => { // retried on conflict
    const old = await tx.get("n").catch((e: unknown) => { if (e instanceof NotFoundError) return Buffer.from("0"); throw e; });
    await tx.put("n", String(Number(old.toString()) + 1));
    return Number(old.toString()) + 1;
  });
  const missing = await sv.delete("missing").then(() => "present", (e: unknown) => {
    if (e instanceof NotFoundError) return "not-found";
    throw e;
  });
  console.log(`quickstart: user/1=${v} users=${users} n=${n} missing=${missing}`);
} finally {
  client.close();
}
