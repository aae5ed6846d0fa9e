/** connect() and the Client: subvolumes, admin calls and subvolume handles. */
import * as grpc from "@grpc/grpc-js";
import { invalid } from "./validate";
import { AdminClient, CheckResponse, StatsResponse, SyncResponse, VersionResponse } from "./gen/cowkv/v1/admin";
import { FilesClient } from "./gen/cowkv/v1/files";
import { KVClient } from "./gen/cowkv/v1/kv";
import { LeaseClient } from "./gen/cowkv/v1/lease";
import { ListSubvolumesResponse, SubvolumeInfo as PbSubvolumeInfo, SubvolumesClient, SyncSubvolumesResponse } from "./gen/cowkv/v1/subvolumes";
import { toCowkvError } from "./errors";
import { CallOptions, Rpc } from "./rpc";
import { Subvolume } from "./subvolume";
import { Transaction, TransactionOptions } from "./txn";
import { infoFrom, num, SubvolumeInfo } from "./types";
import { checkName } from "./validate";
import { retryServiceConfig, UnavailableRetry } from "./retry";
import { DigestSubvolumeResponse, PartialReceivesResponse } from "./gen/cowkv/v1/subvolumes";
import { PartialReceive, partialFrom, ReceiveOptions, ReceiveResult, ReceiveSource, receiveStream, SendOptions, SendStats, SendStream } from "./send";

/** cowkvd's default listen address. */
export const DEFAULT_ADDRESS = "127.0.0.1:7420";
/** The deadline of calls that set none, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 30000;

export interface TlsOptions {
  /** PEM roots to trust (default: the system's). */
  rootCerts?: Buffer;
  /** PEM client key and certificate chain, for mutual TLS. */
  privateKey?: Buffer;
  certChain?: Buffer;
}

export interface ConnectOptions {
  /** Connect over TLS (true = system roots). */
  tls?: boolean | TlsOptions;
  /** Sends "authorization: Bearer <token>" with every call (cowkvd --auth-token-file). */
  token?: string;
  /** Deadline of calls that set none (default 30 s; 0 = none). */
  defaultTimeoutMs?: number;
  /** A watcher's unread events, in bytes, past which it ends with SlowReaderError (default WATCH_QUEUE_BYTES, 16 MiB). */
  watchQueueBytes?: number;
  /** Wait until the connection is up (within defaultTimeoutMs) before resolving. */
  waitReady?: boolean;
  /** Extra grpc-js channel options. */
  channelOptions?: grpc.ChannelOptions;
  /**
   * Retry the idempotent reads (RETRIED_METHODS) that fail UNAVAILABLE with this
   * policy (`{}` = the defaults); off when omitted (docs/api.md "Retrying UNAVAILABLE").
   */
  retryUnavailable?: UnavailableRetry;
}

/**
 * Connects to cowkvd. Without waitReady the connection is made by the
 * first call (a server that is down surfaces as UnavailableError then).
 */
export async function connect(address: string = DEFAULT_ADDRESS, opts: ConnectOptions = {}): Promise<Client> {
  const creds = !opts.tls ? grpc.credentials.createInsecure() : opts.tls === true
    ? grpc.credentials.createSsl()
    : grpc.credentials.createSsl(opts.tls.rootCerts ?? null, opts.tls.privateKey ?? null, opts.tls.certChain ?? null);
  const channelOptions: grpc.ChannelOptions = {
    "grpc.max_receive_message_length": 20 << 20, "grpc.max_send_message_length": 20 << 20, ...opts.channelOptions,
  };
  if (opts.retryUnavailable) {
    channelOptions["grpc.service_config"] = retryServiceConfig(opts.retryUnavailable);
    channelOptions["grpc.enable_retries"] = 1;
  }
  if (opts.watchQueueBytes !== undefined && (!Number.isSafeInteger(opts.watchQueueBytes) || opts.watchQueueBytes < 1)) {
    throw invalid("connect", `watchQueueBytes: ${opts.watchQueueBytes} is not a positive integer`);
  }
  const kv = new KVClient(address, creds, channelOptions);
  const shared = { ...channelOptions, channelOverride: kv.getChannel() };
  const rpc = new Rpc(new SubvolumesClient(address, creds, shared), kv, new FilesClient(address, creds, shared),
    new AdminClient(address, creds, shared), opts.token, opts.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS,
    new LeaseClient(address, creds, shared));
  if (opts.watchQueueBytes !== undefined) rpc.watches.queueBytes = opts.watchQueueBytes;
  if (opts.waitReady) {
    await new Promise<void>((resolve, reject) =>
      kv.waitForReady(new Date(Date.now() + (opts.defaultTimeoutMs || DEFAULT_TIMEOUT_MS)), (err) => {
        if (err) {
          kv.close();
          reject(toCowkvError({ code: grpc.status.UNAVAILABLE, details: err.message }, "connect"));
        } else resolve();
      }));
  }
  return new Client(rpc);
}

export interface CheckResult {
  ok: boolean;
  problems: string[];
  rechecked: boolean;
}

/** A connection to one cowkvd. */
export class Client {
  constructor(private readonly rpc: Rpc) {}

  /** Closes the connection; open transactions are left to their leases. */
  close(): void {
    this.rpc.close();
  }

  /** A handle on a subvolume (or snapshot); "" = "default". No call is made. */
  subvolume(name = "default"): Subvolume {
    return new Subvolume(this.rpc, name);
  }

  /** Runs fn in a transaction on "default", retrying conflicts (Subvolume.runInTransaction). */
  runInTransaction<T>(fn: (tx: Transaction) => Promise<T>, opts?: TransactionOptions): Promise<T> {
    return this.subvolume().runInTransaction(fn, opts);
  }

  /** @deprecated The old name of {@link runInTransaction}; goes in the next release. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>, opts?: TransactionOptions): Promise<T> {
    return this.runInTransaction(fn, opts);
  }

  /** Creates an empty subvolume (AlreadyExistsError if taken). */
  async createSubvolume(name: string, call?: CallOptions): Promise<SubvolumeInfo> {
    checkName("createSubvolume", "name", name);
    return infoFrom(await this.rpc.unary<unknown, PbSubvolumeInfo>("createSubvolume", this.rpc.subvolumes, "create", { name }, call));
  }

  /**
   * Every live subvolume ("default" included), in id order, filtered and
   * sorted by the server as btrfs's `subvolume list -r -s --sort`:
   * `readOnly` keeps read-only ones, `snapshotsOnly` snapshots (parentId != 0),
   * `sort` is a list of "[+|-]FIELD" keys (gen, ogen, rootid, path; "-"
   * descending, ties by id); an unknown key is InvalidArgumentError naming
   * it. Call options may ride in the same object (`{ timeoutMs }`).
   */
  async listSubvolumes(opts: ListSubvolumesOptions & CallOptions = {}, call?: CallOptions): Promise<SubvolumeInfo[]> {
    const req = { readOnly: !!opts.readOnly, snapshotsOnly: !!opts.snapshotsOnly, sort: [...(opts.sort ?? [])] };
    const m = await this.rpc.unary<unknown, ListSubvolumesResponse>("listSubvolumes", this.rpc.subvolumes, "list", req,
      call ?? { timeoutMs: opts.timeoutMs, signal: opts.signal });
    return m.subvolumes.map(infoFrom);
  }

  /**
   * Waits until deleted subvolumes' trees are dropped and their space is free
   * (btrfs `subvolume sync`): the given ids, or every subvolume deleted before
   * the call; resolves to the ids it waited for (an id dropped already is not
   * listed). NotFoundError for an id that never was a subvolume,
   * FailedPreconditionError for a live one; DeadlineExceededError (naming the
   * ids still pending) when the call's deadline comes first.
   */
  async syncSubvolumes(ids: Array<number | bigint> = [], call?: CallOptions): Promise<number[]> {
    const wait = call?.timeoutMs ?? this.rpc.defaultTimeout();
    // The server stops first, so its answer names what is pending.
    const timeoutMs = wait > 0 ? BigInt(Math.max(1, Math.floor(wait - Math.min(500, wait / 10)))) : 0n;
    const m = await this.rpc.unary<unknown, SyncSubvolumesResponse>("syncSubvolumes", this.rpc.subvolumes, "sync",
      { ids: ids.map((i) => BigInt(i)), timeoutMs }, call);
    return m.synced.map(num);
  }

  /** One subvolume (NotFoundError if absent). */
  async showSubvolume(name: string, call?: CallOptions): Promise<SubvolumeInfo> {
    checkName("showSubvolume", "name", name);
    return infoFrom(await this.rpc.unary<unknown, PbSubvolumeInfo>("showSubvolume", this.rpc.subvolumes, "show", { name }, call));
  }

  /** Renames a subvolume; its id and contents stay. */
  async renameSubvolume(name: string, newName: string, call?: CallOptions): Promise<void> {
    checkName("renameSubvolume", "name", name);
    checkName("renameSubvolume", "new_name", newName);
    await this.rpc.unary("renameSubvolume", this.rpc.subvolumes, "rename", { name, newName }, call);
  }

  /** Deletes a subvolume ("default" cannot be: FailedPreconditionError). Its snapshots stay. */
  async deleteSubvolume(name: string, call?: CallOptions): Promise<void> {
    checkName("deleteSubvolume", "name", name);
    await this.rpc.unary("deleteSubvolume", this.rpc.subvolumes, "delete", { name }, call);
  }

  /** Snapshots source as name in O(1); a read-only one refuses writes (ReadOnlyError). */
  async snapshot(source: string, name: string, opts: { readOnly?: boolean } = {}, call?: CallOptions): Promise<SubvolumeInfo> {
    checkName("snapshot", "source", source);
    checkName("snapshot", "name", name);
    return infoFrom(await this.rpc.unary<unknown, PbSubvolumeInfo>("snapshot", this.rpc.subvolumes, "snapshot",
      { source, name, readOnly: !!opts.readOnly }, call));
  }

  /**
   * The send stream of the read-only snapshot (`for await (const chunk of
   * client.send(...))`): the whole of it, or with `parent` its difference
   * from that older read-only snapshot; with `resumeToken` (a
   * PartialReceive's at the receiver) the rest of the stream that receive
   * stopped in, `snapshot` then "". Errors come from the iteration:
   * NotFoundError for an unknown snapshot, FailedPreconditionError for a
   * writable one, InvalidArgumentError (reason RESUME_TOKEN) for a damaged
   * token, NotFoundError (RESUME_MISMATCH) for one whose snapshots are not
   * here. The call's deadline (default: the client's) bounds the whole stream.
   */
  send(snapshot: string, opts: SendOptions = {}, call?: CallOptions): SendStream {
    if (snapshot !== "" || !opts.resumeToken) checkName("send", "snapshot", snapshot);
    if (opts.parent) checkName("send", "parent", opts.parent);
    return new SendStream(this.rpc, { snapshot, parent: opts.parent ?? "", resumeToken: opts.resumeToken ?? "" }, call);
  }

  /** Writes the whole send stream (as send) to a writable (a file), honouring its backpressure; resolves to the send's stats. */
  async sendTo(out: NodeJS.WritableStream, snapshot: string, opts: SendOptions = {}, call?: CallOptions): Promise<SendStats> {
    const stream = this.send(snapshot, opts, call);
    for await (const chunk of stream) {
      if (!out.write(chunk)) await new Promise((r) => out.once("drain", r));
    }
    return stream.stats!;
  }

  /**
   * Receives a send stream, read from source (an async iterable of bytes such
   * as fs.createReadStream or another server's send(), or an iterable), into
   * a new read-only subvolume that appears only once the whole stream arrived
   * and verified. `resumable` keeps what arrived if the receive fails or is
   * cut (partialReceives). Errors: DataLossError (STREAM_CORRUPT) for a
   * damaged or truncated stream, NotFoundError / FailedPreconditionError
   * (PARENT_MISMATCH) for an incremental stream whose parent is missing or
   * differs, AlreadyExistsError for a taken name (PARTIAL_RECEIVE: a partial
   * receive's), RESUME_MISMATCH for a continuation that does not fit. An
   * error thrown reading source cancels the call and is rethrown as it is.
   */
  async receive(source: ReceiveSource, opts: ReceiveOptions = {}, call?: CallOptions): Promise<ReceiveResult> {
    if (opts.name) checkName("receive", "name", opts.name);
    return receiveStream(this.rpc, source, opts, call);
  }

  /** The partial receives this server keeps, each with its resume token. */
  async partialReceives(call?: CallOptions): Promise<PartialReceive[]> {
    const m = await this.rpc.unary<unknown, PartialReceivesResponse>("partialReceives", this.rpc.subvolumes, "partialReceives", {}, call);
    return m.partial.map(partialFrom);
  }

  /** Drops a partial receive: NotFoundError (RESUME_MISMATCH) if none, FailedPreconditionError (PARTIAL_RECEIVE) while a receive writes it. */
  async abortReceive(name: string, call?: CallOptions): Promise<void> {
    checkName("abortReceive", "name", name);
    await this.rpc.unary("abortReceive", this.rpc.subvolumes, "abortReceive", { name }, call);
  }

  /** SHA-256 (64 hex digits) over a subvolume's items and file data: equal for a sent snapshot and its received copy. */
  async digest(name: string, call?: CallOptions): Promise<string> {
    checkName("digest", "name", name);
    return (await this.rpc.unary<unknown, DigestSubvolumeResponse>("digest", this.rpc.subvolumes, "digest", { name }, call)).sha256;
  }

  /** Commits everything written so far; resolves to the commit's generation. */
  async sync(call?: CallOptions): Promise<number> {
    return num((await this.rpc.unary<unknown, SyncResponse>("sync", this.rpc.admin, "sync", {}, call)).generation);
  }

  /** Verifies the last committed state; findings are data, not an error. */
  async check(call?: CallOptions): Promise<CheckResult> {
    const m = await this.rpc.unary<unknown, CheckResponse>("check", this.rpc.admin, "check", {}, call);
    return { ok: m.ok, problems: m.problems, rechecked: m.rechecked };
  }

  /** The server's version and API name. */
  async version(call?: CallOptions): Promise<{ version: string; api: string; grpcVersion: string; protobufVersion: string }> {
    const m = await this.rpc.unary<unknown, VersionResponse>("version", this.rpc.admin, "version", {}, call);
    return { version: m.version, api: m.api, grpcVersion: m.grpcVersion, protobufVersion: m.protobufVersion };
  }

  /** The server's counters (Admin.Stats), as numbers by camelCase name. */
  async stats(call?: CallOptions): Promise<Record<string, number>> {
    const m = await this.rpc.unary<unknown, StatsResponse>("stats", this.rpc.admin, "stats", {}, call);
    return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Number(v)]));
  }
}

/** Server-side filters and sort of Client.listSubvolumes. */
export interface ListSubvolumesOptions {
  readOnly?: boolean;
  snapshotsOnly?: boolean;
  /** "[+|-]FIELD" keys: gen, ogen, rootid, path. */
  sort?: string[];
}
