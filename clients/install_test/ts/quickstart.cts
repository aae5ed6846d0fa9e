// The TypeScript quickstart of clients/install_test.sh as CommonJS
// (`require`), type-checked against the tarball's index.d.ts and run as
// quickstart.cjs. Usage: node quickstart.cjs HOST:PORT SUBVOLUME.
import cowkv = require("@cowkv/client");

async function main(addr: string, name: string): Promise<void> {
  const client = await cowkv.connect(addr);
  try {
    const sv = client.subvolume(name);
    // The ESM run wrote these: the same answers through the other entry point.
    const v = (await sv.get("user/1")).toString();
    let users = 0;
    for await (const _kv of sv.range({ prefix: "user/" })) users++;
    const n = Number((await sv.get("n")).toString());
    const missing = await sv.get("missing").then(() => "present", (e: unknown) => {
      if (e instanceof cowkv.NotFoundError) return "not-found";
      throw e;
    });
    console.log(`quickstart: user/1=${v} users=${users} n=${n} missing=${missing}`);
  } finally {
    client.close();
  }
}

main(process.argv[2], process.argv[3]).catch((e) => {
  console.error("quickstart:", e);
  process.exit(1);
});
