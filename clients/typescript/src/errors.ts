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
 *     │   └── CompactedError                              a watcher's start revision is compacted (compactRevision)
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
 */
import { status as Status } from "@grpc/grpc-js";

const ERRNO_PREFIX = /^(E[A-Z0-9]+): /;

export class CowkvError extends Error {
  /** The conformance class name ("not_found", "read_only", ...). */
  static readonly errorClass: string = "unknown";
  /** True when running the whole transaction again may succeed. */
  readonly retryTransaction: boolean = false;
  /** The POSIX name Files errors start with ("ENOTEMPTY"), or undefined. */
  readonly errno?: string;

  constructor(
    /** The server's (or the client's own check's) reason. */
    readonly details: string,
    /** The gRPC status code. */
    readonly code: Status = Status.UNKNOWN,
    /** The client method that failed, e.g. "put". */
    readonly operation = "",
  ) {
    super(operation ? `${operation}: ${details}` : details);
    this.name = new.target.name;
    this.errno = ERRNO_PREFIX.exec(details)?.[1];
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
  readonly retryTransaction = true;
}
export class TooOldError extends CowkvError {
  static readonly errorClass: string = "too_old";
  readonly retryTransaction: boolean = true;
}
/** A watcher's start revision is compacted: restart at `compactRevision`, the oldest revision still served. */
export class CompactedError extends TooOldError {
  static readonly errorClass: string = "compacted";
  readonly retryTransaction = false;
  constructor(details: string, readonly compactRevision: number, operation = "watch") {
    super(details, Status.OUT_OF_RANGE, operation);
  }
}
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

type ErrorClass = new (details: string, code?: Status, operation?: string) => CowkvError;

const BY_CODE: Partial<Record<Status, ErrorClass>> = {
  [Status.INVALID_ARGUMENT]: InvalidArgumentError,
  [Status.NOT_FOUND]: NotFoundError,
  [Status.ALREADY_EXISTS]: AlreadyExistsError,
  [Status.FAILED_PRECONDITION]: FailedPreconditionError,
  [Status.ABORTED]: ConflictError,
  [Status.OUT_OF_RANGE]: TooOldError,
  [Status.RESOURCE_EXHAUSTED]: ResourceExhaustedError,
  [Status.DATA_LOSS]: DataLossError,
  [Status.UNAVAILABLE]: UnavailableError,
  [Status.UNAUTHENTICATED]: UnauthenticatedError,
  [Status.PERMISSION_DENIED]: PermissionDeniedError,
  [Status.DEADLINE_EXCEEDED]: DeadlineExceededError,
  [Status.CANCELLED]: CancelledError,
  [Status.UNIMPLEMENTED]: UnimplementedError,
  [Status.INTERNAL]: InternalError,
  [Status.UNKNOWN]: InternalError,
};

/** The error class for a status code and message (read-only and no-space refine). */
export function classFor(code: Status, details: string): ErrorClass {
  const cls = BY_CODE[code] ?? InternalError;
  if (cls === FailedPreconditionError &&
      (details.startsWith("EROFS:") || (details.includes("read-only") && !details.includes("not a read-only")))) {
    return ReadOnlyError;
  }
  if (cls === ResourceExhaustedError && (details.startsWith("ENOSPC:") || details.toLowerCase().includes("no space"))) {
    return NoSpaceError;
  }
  return cls;
}

/** Converts an error from grpc-js (or anything thrown) into a CowkvError. */
export function toCowkvError(err: unknown, operation: string): CowkvError {
  if (err instanceof CowkvError) return err;
  const e = err as { code?: unknown; details?: unknown; message?: unknown };
  if (typeof e?.code === "number") {
    const details = typeof e.details === "string" ? e.details : String(e.message ?? "");
    const code = e.code as Status;
    return new (classFor(code, details))(details, code, operation);
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
