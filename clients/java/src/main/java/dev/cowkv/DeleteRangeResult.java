package dev.cowkv;

/**
 * What a range delete did.
 *
 * @param deleted keys deleted
 * @param revision the delete's revision (the revision read at when nothing was deleted)
 */
public record DeleteRangeResult(long deleted, long revision) {}
