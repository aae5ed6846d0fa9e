package dev.cowkv;

import java.util.List;

/**
 * A lease's TTLs and keys ({@link Leases#timeToLive}).
 *
 * @param id the lease
 * @param ttl seconds left, rounded up; 0 once the deadline passed until expiry runs
 * @param grantedTtl the TTL it was granted with, in seconds
 * @param keys the attached keys, sorted (only when asked for)
 */
public record LeaseInfo(long id, long ttl, long grantedTtl, List<byte[]> keys) {}
