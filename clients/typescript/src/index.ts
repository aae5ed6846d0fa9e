/**
 * The TypeScript/Node client of cowkvd.
 *
 *     import { connect, Compare, Op, NotFoundError } from "@cowkv/client";
 *     const client = await connect("127.0.0.1:7420", { token });
 *     const sv = client.subvolume("default");
 *     await sv.put("k", "v");
 *     const v = await sv.get("k");                        // Buffer
 *     for await (const kv of sv.range({ prefix: "user/" })) { ... }
 *     await sv.runInTransaction(async (tx) => { ... });   // retried on conflict
 *     const { id } = await sv.leases.grant(10);           // leases: src/lease.ts
 *     await sv.put("svc/a", "1", { lease: id });
 *     for await (const ev of sv.watch("cfg/", { prefix: true, signal })) { ... }  // src/watch.ts
 */
export {
  connect, Client, ConnectOptions, TlsOptions, CheckResult, DEFAULT_ADDRESS, DEFAULT_TIMEOUT_MS, ListSubvolumesOptions,
} from "./client";
export {
  Subvolume, TxnRequest, TxnResult, OpResult, WriteOptions, PutOptions, WriteFileOptions, CloneRange, AttrChange, XATTR_CREATE,
  XATTR_REPLACE, setAttrFields, FileHandle, ReadOptions, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE,
} from "./subvolume";
export {
  Compare, Op, Cmp, TxnOp, Transaction, TransactionOptions, runInTransaction, runTransaction, backoffMs,
  DEFAULT_MAX_ATTEMPTS, DEFAULT_BACKOFF_MS, DEFAULT_MAX_BACKOFF_MS,
} from "./txn";
export { CallOptions } from "./rpc";
export { PartialReceive, ReceiveOptions, ReceiveResult, ReceiveSource, RECEIVE_CHUNK_BYTES, SendOptions, SendStats, SendStream } from "./send";
export * from "./types";
export * from "./errors";
export {
  Bytes, MAX_KEY_BYTES, MAX_VALUE_BYTES, MAX_NAME_BYTES, MAX_PATH_BYTES, MAX_PATH_DEPTH, MAX_TXN_OPS, MAX_LEASE_MS,
} from "./validate";
export { Leases, LeaseId, LeaseGrant, LeaseInfo, KeepAlive, KeepAliveOptions } from "./lease";
export { MAX_LEASE_TTL_SECONDS } from "./validate";
export { RETRIED_METHODS, UnavailableRetry } from "./retry";
export { FileEvent, FileWatchOptions, Watch, WatchEvent, WatchEventType, WatchOptions, prefixEnd } from "./watch";
