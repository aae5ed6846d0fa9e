// The README's example (compiled by `npm run build`, not run: it needs a server).
import { connect, Compare, Op, NotFoundError } from "../src";

export async function example(): Promise<void> {
  const client = await connect("127.0.0.1:7420", { token: process.env.COWKV_TOKEN });
  const sv = client.subvolume("default");
  await sv.put("greeting", "hello");
  const v = await sv.get("missing").catch((e) => { if (e instanceof NotFoundError) return Buffer.from("default"); throw e; });
  for await (const kv of sv.range({ prefix: "user/" }, { pageSize: 500 })) console.log(`${kv.key}=${kv.value}`);
  await sv.runInTransaction(async (tx) => { const n = Number(await tx.get("n").catch(() => "0")); await tx.put("n", String(n + 1)); });
  await sv.txn({ compare: [Compare.value("greeting").eq("hello")], success: [Op.put("greeting", "bye")] });
  client.close();
  void v;
}
