/**
 * The opt-in retry of UNAVAILABLE on idempotent reads (docs/api.md
 * "Retrying UNAVAILABLE"): a gRPC service config with a retryPolicy for
 * RETRIED_METHODS, passed as the channel's "grpc.service_config" option
 * (@grpc/grpc-js implements gRPC retries).
 *
 *     const client = await connect(addr, { retryUnavailable: {} });   // the defaults
 *
 * Off by default. Writes are never retried: an UNAVAILABLE write may have
 * been applied.
 */
import { invalid } from "./validate";

/** The idempotent methods retried ("service/method"; clients/conformance/unavailable_retry.json). */
export const RETRIED_METHODS: readonly string[] = [
  "cowkv.v1.KV/Get", "cowkv.v1.KV/Range",
  "cowkv.v1.Files/Stat", "cowkv.v1.Files/ReadDir", "cowkv.v1.Files/Read",
  "cowkv.v1.Files/ReadLink", "cowkv.v1.Files/Fiemap", "cowkv.v1.Files/GetXattr",
  "cowkv.v1.Files/ListXattrs",
  "cowkv.v1.Subvolumes/List", "cowkv.v1.Subvolumes/Show",
  "cowkv.v1.Lease/TimeToLive", "cowkv.v1.Lease/Leases",
  "cowkv.v1.Admin/Stats", "cowkv.v1.Admin/Version",
];

/**
 * gRPC's retryPolicy for UNAVAILABLE: at most maxAttempts calls (2..5), the
 * wait before retry n random in [0, b], b = min(maxBackoffMs,
 * initialBackoffMs * backoffMultiplier^(n-1)). Omitted fields take the
 * defaults: 5, 100 ms, 1000 ms, 2.
 */
export interface UnavailableRetry {
  maxAttempts?: number;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  backoffMultiplier?: number;
}

/** The service config JSON of the policy (with its defaults). */
export function retryServiceConfig(r: UnavailableRetry): string {
  const maxAttempts = r.maxAttempts ?? 5;
  const initial = r.initialBackoffMs ?? 100;
  const max = r.maxBackoffMs ?? 1000;
  const mult = r.backoffMultiplier ?? 2;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 2 || maxAttempts > 5) {
    throw invalid("connect", `retryUnavailable.maxAttempts: ${maxAttempts} not in [2, 5]`);
  }
  if (!(initial > 0 && max >= initial && mult > 0)) {
    throw invalid("connect", "retryUnavailable: want 0 < initialBackoffMs <= maxBackoffMs and backoffMultiplier > 0");
  }
  const secs = (ms: number) => `${(ms / 1000).toFixed(3)}s`;
  return JSON.stringify({
    methodConfig: [{
      name: RETRIED_METHODS.map((m) => ({ service: m.split("/")[0], method: m.split("/")[1] })),
      retryPolicy: {
        maxAttempts, initialBackoff: secs(initial), maxBackoff: secs(max), backoffMultiplier: mult,
        retryableStatusCodes: ["UNAVAILABLE"],
      },
    }],
  });
}
