/** Plain types of the client's results, converted from the generated messages. */
import { Durability as PbDurability, KeyValue as PbKeyValue, RangeResponse } from "./gen/cowkv/v1/kv";
import { FileKind, FileStat as PbFileStat } from "./gen/cowkv/v1/files";
import { SubvolumeInfo as PbSubvolumeInfo } from "./gen/cowkv/v1/subvolumes";
import { Bytes } from "./validate";

/**
 * When a write is acknowledged: "default" = the server's default (durable
 * unless cowkvd runs with --async-default), "durable" = after the log sync
 * that covers it, "async" = once visible (durable by the next sync, in order).
 */
export type Durability = "default" | "durable" | "async";

export function durabilityPb(d: Durability | undefined): PbDurability {
  switch (d) {
    case "durable": return PbDurability.DURABILITY_DURABLE;
    case "async": return PbDurability.DURABILITY_ASYNC;
    default: return PbDurability.DURABILITY_DEFAULT;
  }
}

/** Revisions, versions, sizes and counts are numbers (exact up to 2^53). */
export const num = (n: bigint | number): number => Number(n);

export interface KeyValue {
  key: Buffer;
  /** Empty for keysOnly reads. */
  value: Buffer;
  /** Revision of the write that created the key. */
  createRevision: number;
  /** Revision of the last write to the key. */
  modRevision: number;
  /** Writes since creation; 1 = just created. */
  version: number;
}

export function kvFrom(m: PbKeyValue | undefined): KeyValue {
  return {
    key: Buffer.from(m?.key ?? []), value: Buffer.from(m?.value ?? []),
    createRevision: num(m?.createRevision ?? 0n), modRevision: num(m?.modRevision ?? 0n), version: num(m?.version ?? 0n),
  };
}

/** Keys [start, end) (start omitted = from the first, end omitted = through the last), or every key with prefix. */
export interface KeyRange {
  start?: Bytes;
  end?: Bytes;
  prefix?: Bytes;
}

export interface RangeOptions {
  /** Largest keys first. */
  reverse?: boolean;
  /** No values. */
  keysOnly?: boolean;
  /** Iterators: keys per call (default: the server's page limit, 10,000). */
  pageSize?: number;
  /** Iterators: keys in all; rangePage and Op.range: keys in the page. */
  limit?: number;
  /** Read this read-only snapshot instead of the live subvolume (one view across pages). */
  snapshot?: string;
  /** Read the range as it was at this revision, from the history (every page at it); errors as Subvolume.get. */
  revision?: number | bigint;
}

export interface PageOptions extends RangeOptions {
  /** Only the count. */
  countOnly?: boolean;
  /** Continue from a previous page's nextPageToken. */
  pageToken?: Uint8Array;
}

/** One Range response. */
export interface Page {
  kvs: KeyValue[];
  /** Keys from this page's start: exact when !more or countOnly. */
  count: number;
  more: boolean;
  revision: number;
  /** Pass as pageToken for the next page; empty when !more. */
  nextPageToken: Buffer;
}

export function pageFrom(m: RangeResponse): Page {
  return {
    kvs: m.kvs.map(kvFrom), count: num(m.count), more: m.more, revision: num(m.revision),
    nextPageToken: Buffer.from(m.nextPageToken),
  };
}

export interface SubvolumeInfo {
  id: number;
  name: string;
  /** The subvolume this is a snapshot of; 0 = none. */
  parentId: number;
  generation: number;
  lastSnapshot: number;
  created: Date;
  readOnly: boolean;
}

export function infoFrom(m: PbSubvolumeInfo): SubvolumeInfo {
  return {
    id: num(m.id), name: m.name, parentId: num(m.parentId), generation: num(m.generation),
    lastSnapshot: num(m.lastSnapshot), created: new Date(num(m.createdUnixMs)), readOnly: m.readOnly,
  };
}

export type Kind = "regular" | "directory" | "symlink";

export function kindFrom(k: FileKind): Kind {
  return k === FileKind.FILE_KIND_DIRECTORY ? "directory" : k === FileKind.FILE_KIND_SYMLINK ? "symlink" : "regular";
}

export interface FileStat {
  /** The root directory is 256. */
  ino: number;
  kind: Kind;
  /** Permission bits (0o7777). */
  mode: number;
  nlink: number;
  size: number;
  /** Data bytes referenced (holes excluded). */
  bytes: number;
  uid: number;
  gid: number;
  /** Times in nanoseconds since the epoch. */
  atimeNs: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  btimeNs: bigint;
  generation: number;
  transid: number;
}

export function statFrom(m: PbFileStat | undefined): FileStat {
  const s = m ?? PbFileStat.fromPartial({});
  return {
    ino: num(s.ino), kind: kindFrom(s.kind), mode: s.mode, nlink: s.nlink, size: num(s.size), bytes: num(s.bytes),
    uid: s.uid, gid: s.gid, atimeNs: s.atimeNs, mtimeNs: s.mtimeNs, ctimeNs: s.ctimeNs, btimeNs: s.btimeNs,
    generation: num(s.generation), transid: num(s.transid),
  };
}

export interface DirEntry {
  name: string;
  ino: number;
  kind: Kind;
  cookie: number;
}

/** Linux's FIEMAP_EXTENT_* bits. */
export const ExtentFlag = { LAST: 0x1, NOT_ALIGNED: 0x100, INLINE: 0x200, UNWRITTEN: 0x800, SHARED: 0x2000 } as const;

export interface Extent {
  /** File offset. */
  logical: number;
  /** Device byte address (0 for inline data). */
  physical: number;
  length: number;
  /** Bit mask of ExtentFlag values. */
  flags: number;
  /** Shared with another file or snapshot (reflink or snapshot). */
  shared: boolean;
}
