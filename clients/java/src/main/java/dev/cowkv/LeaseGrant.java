package dev.cowkv;

/**
 * A granted lease ({@link Leases#grant}).
 *
 * @param id the lease's id (the one asked for, or the server's pick: a random positive int64)
 * @param ttl the TTL granted, in seconds
 */
public record LeaseGrant(long id, long ttl) {}
