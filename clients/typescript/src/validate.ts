/**
 * Client-side checks of the limits the server enforces (docs/api.md,
 * "Limits"): the same error class and POSIX name as the server's, without
 * a round trip.
 */
import { status as Status } from "@grpc/grpc-js";
import { InvalidArgumentError } from "./errors";
import * as spec from "./spec.gen";

// The server's limits (clients/spec/limits.json, through spec.gen.ts).
export const MAX_KEY_BYTES = spec.SPEC_MAX_KEY_BYTES;
export const MAX_VALUE_BYTES = spec.SPEC_MAX_VALUE_BYTES;
export const MAX_NAME_BYTES = spec.SPEC_MAX_NAME_BYTES;
export const MAX_PATH_BYTES = spec.SPEC_MAX_PATH_BYTES;
export const MAX_PATH_DEPTH = spec.SPEC_MAX_PATH_DEPTH;
export const MAX_WRITE_CHUNK = spec.SPEC_MAX_WRITE_CHUNK_BYTES;
export const MAX_TXN_OPS = spec.SPEC_MAX_TXN_OPS;
export const MAX_LEASE_MS = spec.SPEC_MAX_LEASE_MS;
/** A lease's TTL in seconds is 1..MAX_LEASE_TTL_SECONDS (docs/api.md "Leases"). */
export const MAX_LEASE_TTL_SECONDS = spec.SPEC_MAX_LEASE_TTL_SECONDS;
const MAX_BOUND_BYTES = spec.SPEC_MAX_BOUND_BYTES;
const MAX_SYMLINK_BYTES = spec.SPEC_MAX_SYMLINK_BYTES;

export type Bytes = string | Uint8Array;

/** UTF-8 for strings, a Buffer view for byte arrays. */
export function toBuffer(b: Bytes | undefined): Buffer {
  if (b === undefined) return Buffer.alloc(0);
  if (typeof b === "string") return Buffer.from(b, "utf8");
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

export function invalid(op: string, details: string): InvalidArgumentError {
  return new InvalidArgumentError(details, Status.INVALID_ARGUMENT, op);
}

export function checkKey(op: string, field: string, key: Buffer): void {
  if (key.length === 0 || key.length > MAX_KEY_BYTES) {
    throw invalid(op, `${field}: a key is 1..${MAX_KEY_BYTES} bytes, not ${key.length}`);
  }
}

export function checkValue(op: string, value: Buffer): void {
  if (value.length > MAX_VALUE_BYTES) {
    throw invalid(op, `value: at most ${MAX_VALUE_BYTES} bytes, not ${value.length}`);
  }
}

export function checkBound(op: string, field: string, bound: Buffer): void {
  if (bound.length > MAX_BOUND_BYTES) {
    throw invalid(op, `${field}: a range bound is at most ${MAX_BOUND_BYTES} bytes, not ${bound.length}`);
  }
}

/** A subvolume name: 1..255 bytes, no '/' or NUL. */
export function checkName(op: string, field: string, name: string): void {
  const n = Buffer.byteLength(name, "utf8");
  if (n === 0 || n > MAX_NAME_BYTES) {
    throw invalid(op, `${field}: a subvolume name is 1..${MAX_NAME_BYTES} bytes, not ${n}`);
  }
  if (name.includes("/") || name.includes("\0")) {
    throw invalid(op, `${field}: a subvolume name may not contain '/' or NUL: ${JSON.stringify(name)}`);
  }
}

/** The subvolume of a KV or Files call ("" = default). */
export function checkSubvolume(op: string, name: string): void {
  if (name !== "") checkName(op, "subvolume", name);
}

/** A file path: at most 4096 bytes and 256 components of 1..255 bytes, no NUL, no "." or "..". */
export function checkPath(op: string, field: string, path: string): void {
  const n = Buffer.byteLength(path, "utf8");
  if (n > MAX_PATH_BYTES) {
    throw invalid(op, `ENAMETOOLONG: ${field}: a path is at most ${MAX_PATH_BYTES} bytes, not ${n}`);
  }
  if (path.includes("\0")) throw invalid(op, `EINVAL: ${field}: a path may not contain NUL`);
  let depth = 0;
  for (const part of path.split("/")) {
    if (part === "") continue;
    const len = Buffer.byteLength(part, "utf8");
    if (len > MAX_NAME_BYTES) {
      throw invalid(op, `ENAMETOOLONG: ${field}: a name is at most ${MAX_NAME_BYTES} bytes, not ${len}`);
    }
    if (part === "." || part === "..") {
      throw invalid(op, `EINVAL: ${field}: "${part}" is not a valid name: ${path}`);
    }
    if (++depth > MAX_PATH_DEPTH) {
      throw invalid(op, `EINVAL: ${field}: a path has at most ${MAX_PATH_DEPTH} components`);
    }
  }
}

export function checkSymlinkTarget(op: string, target: string): void {
  const n = Buffer.byteLength(target, "utf8");
  if (n === 0 || n > MAX_SYMLINK_BYTES) {
    throw invalid(op, `EINVAL: target: a symlink target is 1..${MAX_SYMLINK_BYTES} bytes, not ${n}`);
  }
}

/** A lease TTL: an integer number of seconds, 1..MAX_LEASE_TTL_SECONDS. */
export function checkLeaseTtl(op: string, ttl: number): void {
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > MAX_LEASE_TTL_SECONDS) {
    throw invalid(op, `ttl: ${ttl} out of range 1..${MAX_LEASE_TTL_SECONDS}`);
  }
}

/** A lease id to grant: an int64 >= 0 (0 = the server picks). */
export function checkLeaseId(op: string, field: string, id: bigint): void {
  if (id < 0n || id > 0x7fffffffffffffffn) throw invalid(op, `${field}: ${id} out of range 0..2^63-1`);
}
