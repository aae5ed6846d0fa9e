/**
 * Send and receive of read-only snapshots (docs/api.md "Subvolumes";
 * docs/operations.md "Backup and restore"), used by Client.send / sendTo /
 * receive. A send stream is bytes in order: SendStream yields its chunks as
 * they arrive, and receive reads any (async) iterable of bytes, such as a
 * file's ReadStream or another server's SendStream, sending it on in pieces
 * of at most 1 MiB with the stream's backpressure: never the whole stream
 * in memory.
 */
import { status as Status } from "@grpc/grpc-js";
import { CowkvError, InternalError, toCowkvError } from "./errors";
import { PartialReceive as PbPartialReceive, ReceiveRequest, ReceiveResponse, SendRequest, SendResponse } from "./gen/cowkv/v1/subvolumes";
import { CallOptions, Rpc } from "./rpc";
import { num } from "./types";

/** Bytes per ReceiveRequest (the server takes at most 4 MiB per message). */
export const RECEIVE_CHUNK_BYTES = 1 << 20;

/** What one send did (its last message). */
export interface SendStats {
  records: number; bytes: number; items: number; deletes: number; clones: number;
  dataBytes: number; nodesRead: number; subtreesSkipped: number;
}

/** What one receive made (a dry run: the name it would have had, id 0). */
export interface ReceiveResult {
  name: string; id: number; incremental: boolean; parent: string;
  records: number; bytes: number; items: number; deletes: number; clones: number; dataBytes: number;
}

/** A resumable receive that stopped before its end; give `token` to the sender's send({ resumeToken }). */
export interface PartialReceive {
  name: string; token: string; records: number; bytes: number; uuid: string;
  generation: number; parentUuid: string; inUse: boolean;
}

/** Options of Client.send. */
export interface SendOptions {
  /** Send only the difference from this older read-only snapshot of the lineage, which the receiver holds. */
  parent?: string;
  /** Send the rest of the stream a resumable receive stopped in (a PartialReceive's token); the snapshot may then be "". */
  resumeToken?: string;
}

/** Options of Client.receive. */
export interface ReceiveOptions {
  /** The new subvolume's name (default: the name the snapshot had at the sender). */
  name?: string;
  /** Keep what arrived if the receive fails or is cut (a PartialReceive). Continuation streams always are. */
  resumable?: boolean;
  /** Check the stream and write nothing. */
  dryRun?: boolean;
}

/** What Client.receive reads. */
export type ReceiveSource = AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export function partialFrom(p: PbPartialReceive): PartialReceive {
  return { name: p.name, token: p.token, records: num(p.records), bytes: num(p.bytes), uuid: p.uuid,
    generation: num(p.generation), parentUuid: p.parentUuid, inUse: p.inUse };
}

/**
 * The chunks of one send stream, in order (`for await`); `stats` once read
 * to its end. `cancel()` (or leaving the loop early) cancels the call.
 */
export class SendStream implements AsyncIterable<Buffer> {
  /** What the send did, once the stream was read to its end. */
  stats?: SendStats;
  private readonly call: ReturnType<Rpc["subvolumes"]["send"]>;
  private readonly unwatch: () => void;

  /** @internal */
  constructor(rpc: Rpc, req: SendRequest, call?: CallOptions) {
    this.call = rpc.subvolumes.send(req, rpc.metadata(), rpc.options(call));
    this.unwatch = Rpc.watch(this.call, call?.signal);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    try {
      for await (const m of this.call as AsyncIterable<SendResponse>) {
        if (m.stats) {
          const s = m.stats;
          this.stats = { records: num(s.records), bytes: num(s.bytes), items: num(s.items), deletes: num(s.deletes),
            clones: num(s.clones), dataBytes: num(s.dataBytes), nodesRead: num(s.nodesRead), subtreesSkipped: num(s.subtreesSkipped) };
        }
        if (m.chunk.length > 0) yield Buffer.from(m.chunk);
      }
    } catch (err) {
      throw toCowkvError(err, "send");
    } finally {
      this.unwatch();
      this.call.cancel(); // a no-op after the end; stops an abandoned stream
    }
    if (!this.stats) throw new InternalError("the stream ended without its stats message", Status.INTERNAL, "send");
  }

  /** Cancels the call if the stream was not read to its end. */
  cancel(): void {
    this.call.cancel();
  }
}

/** Runs one Receive call over source's bytes; an error reading source cancels the call and is thrown as it is. */
export async function receiveStream(rpc: Rpc, source: ReceiveSource, opts: ReceiveOptions, call?: CallOptions): Promise<ReceiveResult> {
  let resolveDone!: (r: ReceiveResponse) => void, rejectDone!: (e: CowkvError) => void;
  const done = new Promise<ReceiveResponse>((res, rej) => { resolveDone = res; rejectDone = rej; });
  const stream = rpc.subvolumes.receive(rpc.metadata(), rpc.options(call), (err, res) => {
    if (err) rejectDone(toCowkvError(err, "receive"));
    else resolveDone(res);
  });
  const unwatch = Rpc.watch(stream, call?.signal);
  stream.on("error", () => {}); // the callback reports it
  let failed = false;
  done.catch(() => { failed = true; });
  let first: ReceiveRequest | undefined = ReceiveRequest.fromPartial({ name: opts.name ?? "", resumable: !!opts.resumable, dryRun: !!opts.dryRun });
  const send = async (chunk: Buffer) => {
    const msg = first ? { ...first, chunk } : ReceiveRequest.fromPartial({ chunk });
    first = undefined;
    if (!stream.write(msg)) await Promise.race([new Promise((r) => stream.once("drain", r)), done.catch(() => {})]);
  };
  try {
    try {
      for await (const piece of source) {
        const buf = Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
        for (let off = 0; off < buf.length && !failed; off += RECEIVE_CHUNK_BYTES) {
          await send(buf.subarray(off, off + RECEIVE_CHUNK_BYTES));
        }
        if (failed) break;
      }
    } catch (err) {
      stream.cancel();
      done.catch(() => {});
      throw err;
    }
    if (first && !failed) await send(Buffer.alloc(0));
    stream.end();
    const m = await done;
    return { name: m.name, id: num(m.id), incremental: m.incremental, parent: m.parent, records: num(m.records),
      bytes: num(m.bytes), items: num(m.items), deletes: num(m.deletes), clones: num(m.clones), dataBytes: num(m.dataBytes) };
  } finally {
    unwatch();
  }
}
