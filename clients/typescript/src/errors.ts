/**
 * Errors: one class per kind of failure (docs/api.md, "Errors"). Every
 * failed call rejects with a subclass of CowkvError, never a bare grpc-js
 * ServiceError:
 *
 *     CowkvError
 *     ├── InvalidArgumentError       INVALID_ARGUMENT     fix the request
 *     ├── NotFoundError              NOT_FOUND            key, subvolume, file or handle absent
 *     ├── AlreadyExistsError         ALREADY_EXISTS       name taken
 *     ├── FailedPreconditionError    FAILED_PRECONDITION  do not retry until something changes
 *     │   └── ReadOnlyError                               read-only snapshot or store (EROFS)
 *     ├── ConflictError              ABORTED              retry the whole transaction
 *     ├── TooOldError                OUT_OF_RANGE         retry the whole transaction
 *     │   └── CompactedError                              a read or watcher start at a compacted revision (compactRevision)
 *     ├── FutureRevisionError        OUT_OF_RANGE         a read at a revision not reached yet
 *     ├── ResourceExhaustedError     RESOURCE_EXHAUSTED   a server limit
 *     │   └── NoSpaceError                                the device is full (ENOSPC)
 *     ├── DataLossError              DATA_LOSS            a checksum failed: run Admin.Check
 *     ├── UnavailableError           UNAVAILABLE          server stopping or unreachable: retry the call
 *     ├── UnauthenticatedError       UNAUTHENTICATED      token missing or wrong
 *     ├── PermissionDeniedError      PERMISSION_DENIED
 *     ├── DeadlineExceededError      DEADLINE_EXCEEDED    the call's deadline passed
 *     ├── CancelledError             CANCELLED
 *     ├── UnimplementedError         UNIMPLEMENTED        server too old for this call
 *     ├── InternalError              INTERNAL, UNKNOWN    device I/O error, unparsable response
 *     ├── SubvolumeDeletedError                           a watcher's subvolume was deleted
 *     └── SlowReaderError                                 a watcher's events were read slower than they came
 *
 * The class comes from the google.rpc.ErrorInfo reason in the answer's
 * grpc-status-details-bin trailer (BY_REASON; any other reason keeps the
 * code's class); the message text is read only for a server that sends no
 * ErrorInfo (classFor without a reason). The tables (classes, code -> class,
 * reason -> class, retry rule, text fallbacks) come from clients/spec/errors.json
 * through the generated spec.gen.ts.
 */
import { status as Status } from "@grpc/grpc-js";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { SPEC_BY_CODE, SPEC_BY_REASON, SPEC_CLASSES, SPEC_FALLBACKS, type SpecFallback } from "./spec.gen";

/** google.rpc.ErrorInfo of a server error (domain "cowkv.dev"). */
export interface ErrorInfo {
  /** "ENOENT", "READ_ONLY_SNAPSHOT", "CONFLICT", ... (docs/api.md, "Errors"). */
  reason: string;
  /** "errno" for Files errors, "compact_revision" for COMPACTED. */
  metadata: Record<string, string>;
}

const ERRNO_PREFIX = /^(E[A-Z0-9]+): /;

export class CowkvError extends Error {
  /** The conformance class name ("not_found", "read_only", ...). */
  static readonly errorClass: string = "unknown";
  /** True when running the whole transaction again may succeed. */
  readonly retryTransaction: boolean = false;
  /** The POSIX name of a Files error ("ENOTEMPTY"): ErrorInfo's errno, else the message's prefix; or undefined. */
  readonly errno?: string;
  /** The server's ErrorInfo reason ("" from a server that sends none, or for the client's own checks). */
  readonly reason: string;
  /** The server's ErrorInfo metadata ({} when none). */
  readonly metadata: Record<string, string>;

  constructor(
    /** The server's (or the client's own check's) message. */
    readonly details: string,
    /** The gRPC status code. */
    readonly code: Status = Status.UNKNOWN,
    /** The client method that failed, e.g. "put". */
    readonly operation = "",
    info?: ErrorInfo,
  ) {
    super(operation ? `${operation}: ${details}` : details);
    this.name = new.target.name;
    this.reason = info?.reason ?? "";
    this.metadata = info?.metadata ?? {};
    this.errno = this.metadata.errno ?? ERRNO_PREFIX.exec(details)?.[1];
  }

  /** The conformance class name of this error. */
  get errorClass(): string {
    return (this.constructor as typeof CowkvError).errorClass;
  }
}

export class InvalidArgumentError extends CowkvError { static readonly errorClass: string = "invalid_argument"; }
export class NotFoundError extends CowkvError { static readonly errorClass: string = "not_found"; }
export class AlreadyExistsError extends CowkvError { static readonly errorClass: string = "already_exists"; }
export class FailedPreconditionError extends CowkvError { static readonly errorClass: string = "failed_precondition"; }
export class ReadOnlyError extends FailedPreconditionError { static readonly errorClass: string = "read_only"; }
export class ConflictError extends CowkvError {
  static readonly errorClass: string = "conflict";
  readonly retryTransaction: boolean = SPEC_CLASSES.conflict.retryable;
}
export class TooOldError extends CowkvError {
  static readonly errorClass: string = "too_old";
  readonly retryTransaction: boolean = SPEC_CLASSES.too_old.retryable;
}
/**
 * A read, or a watcher's start, at a compacted revision: go on from
 * `compactRevision`, the oldest revision still served. A read's (in a
 * transaction: its read revision left the history) retries the whole
 * transaction, as TOO_OLD (docs/api.md); a watcher's does not.
 */
export class CompactedError extends TooOldError {
  static readonly errorClass: string = "compacted";
  readonly retryTransaction: boolean;
  constructor(details: string, readonly compactRevision: number, operation = "watch", info?: ErrorInfo) {
    super(details, Status.OUT_OF_RANGE, operation, info);
    this.retryTransaction = SPEC_CLASSES.compacted.retryable && operation !== "watch";
  }
}
/** A read at a revision the store has not reached yet (not retried). */
export class FutureRevisionError extends CowkvError { static readonly errorClass: string = "future_revision"; }
export class ResourceExhaustedError extends CowkvError { static readonly errorClass: string = "resource_exhausted"; }
export class NoSpaceError extends ResourceExhaustedError { static readonly errorClass: string = "no_space"; }
export class DataLossError extends CowkvError { static readonly errorClass: string = "data_loss"; }
export class UnavailableError extends CowkvError { static readonly errorClass: string = "unavailable"; }
export class UnauthenticatedError extends CowkvError { static readonly errorClass: string = "unauthenticated"; }
export class PermissionDeniedError extends CowkvError { static readonly errorClass: string = "permission_denied"; }
export class DeadlineExceededError extends CowkvError { static readonly errorClass: string = "deadline_exceeded"; }
export class CancelledError extends CowkvError { static readonly errorClass: string = "cancelled"; }
export class UnimplementedError extends CowkvError { static readonly errorClass: string = "unimplemented"; }
export class InternalError extends CowkvError { static readonly errorClass: string = "internal"; }
/** The server ended a watcher because its subvolume was deleted. */
export class SubvolumeDeletedError extends CowkvError { static readonly errorClass: string = "subvolume_deleted"; }
/** The server ended a watcher whose events were read slower than they came (restart after the last event read). */
export class SlowReaderError extends CowkvError { static readonly errorClass: string = "slow_reader"; }

type ErrorClass = new (details: string, code?: Status, operation?: string, info?: ErrorInfo) => CowkvError;

/** Every class, by its spec name (clients/spec/errors.json "classes"). */
export const ERROR_CLASSES: ReadonlyMap<string, ErrorClass & { errorClass: string }> = new Map(
  [
    InvalidArgumentError, NotFoundError, AlreadyExistsError, FailedPreconditionError, ReadOnlyError,
    ConflictError, TooOldError, CompactedError, FutureRevisionError, ResourceExhaustedError, NoSpaceError,
    DataLossError, UnavailableError, UnauthenticatedError, PermissionDeniedError, DeadlineExceededError,
    CancelledError, UnimplementedError, InternalError, SubvolumeDeletedError, SlowReaderError,
  ].map((c) => [c.errorClass, c as ErrorClass & { errorClass: string }]),
);

function specClass(name: string): ErrorClass {
  const cls = ERROR_CLASSES.get(name);
  if (!cls) throw new Error(`spec.gen.ts names class ${name}, errors.ts has none`);
  return cls;
}

const BY_CODE = new Map<number, ErrorClass>(Object.entries(SPEC_BY_CODE).map(([c, n]) => [Number(c), specClass(n)]));

/** ErrorInfo reasons that pick a class finer than the code's (COMPACTED: CompactedError, in toCowkvError). */
const BY_REASON = new Map<string, ErrorClass>(Object.entries(SPEC_BY_REASON).map(([r, n]) => [r, specClass(n)]));

/** A fallback's prefix, or one of its substrings and none of its exceptions. */
function matches(f: SpecFallback, details: string): boolean {
  if (f.prefixes.some((p) => details.startsWith(p))) return true;
  const text = f.ignoreCase ? details.toLowerCase() : details;
  return !f.unless.some((u) => text.includes(u)) && f.contains.some((c) => text.includes(c));
}

/**
 * The error class for a status: by the ErrorInfo `reason` when the server
 * sent one (any other reason keeps the code's class), else by the code and,
 * for read-only and no-space, the message text (a server older than ErrorInfo).
 */
export function classFor(code: Status, details: string, reason = ""): ErrorClass {
  const cls = BY_CODE.get(code) ?? InternalError;
  if (reason) return BY_REASON.get(reason) ?? cls;
  const f = SPEC_FALLBACKS.find((fb) => fb.code === code && matches(fb, details));
  return f ? specClass(f.cls) : cls;
}

/** The length-delimited fields of a protobuf message as [number, bytes]; others are skipped. Throws when malformed. */
function fields(buf: Uint8Array): Array<[number, Uint8Array]> {
  const r = new BinaryReader(buf);
  const out: Array<[number, Uint8Array]> = [];
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (wt === WireType.LengthDelimited) out.push([no, r.bytes()]);
    else r.skip(wt, no);
  }
  return out;
}

const utf8 = new TextDecoder();

/**
 * The google.rpc.ErrorInfo in a grpc-status-details-bin value (a
 * google.rpc.Status whose details are Any), or undefined when there is
 * none or it does not parse.
 */
export function errorInfoFromDetails(bin: Uint8Array | undefined): ErrorInfo | undefined {
  if (!bin) return undefined;
  try {
    for (const [no, any] of fields(bin)) {
      if (no !== 3) continue; // Status.details
      const parts = new Map(fields(any));
      if (!utf8.decode(parts.get(1) ?? new Uint8Array()).endsWith("google.rpc.ErrorInfo")) continue;
      const info: ErrorInfo = { reason: "", metadata: {} };
      for (const [f, v] of fields(parts.get(2) ?? new Uint8Array())) {
        if (f === 1) info.reason = utf8.decode(v);
        if (f !== 3) continue;
        const entry = new Map(fields(v)); // map entry {1: key, 2: value}
        info.metadata[utf8.decode(entry.get(1) ?? new Uint8Array())] = utf8.decode(entry.get(2) ?? new Uint8Array());
      }
      return info;
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** The ErrorInfo of a grpc-js ServiceError (its trailers), or undefined. */
function errorInfoOf(e: { metadata?: unknown }): ErrorInfo | undefined {
  const md = e.metadata as { get?: (key: string) => unknown[] } | undefined;
  const bin = typeof md?.get === "function" ? md.get("grpc-status-details-bin")[0] : undefined;
  return bin instanceof Uint8Array ? errorInfoFromDetails(bin) : undefined;
}

/** Converts an error from grpc-js (or anything thrown) into a CowkvError. */
export function toCowkvError(err: unknown, operation: string): CowkvError {
  if (err instanceof CowkvError) return err;
  const e = err as { code?: unknown; details?: unknown; message?: unknown; metadata?: unknown };
  if (typeof e?.code === "number") {
    const details = typeof e.details === "string" ? e.details : String(e.message ?? "");
    const code = e.code as Status;
    const info = errorInfoOf(e);
    if (info?.reason === "COMPACTED") {
      return new CompactedError(details, Number(info.metadata.compact_revision ?? 0), operation, info);
    }
    return new (classFor(code, details, info?.reason))(details, code, operation, info);
  }
  return new InternalError(String((err as Error)?.message ?? err), Status.UNKNOWN, operation);
}

/** The conformance class name of any error ("" for none, "unknown" for foreign ones). */
export function errorClassOf(err: unknown): string {
  if (err === undefined || err === null) return "";
  return err instanceof CowkvError ? err.errorClass : "unknown";
}

/** Whether an error means "run the whole transaction again". */
export function isRetryable(err: unknown): boolean {
  return err instanceof CowkvError && err.retryTransaction;
}
