package dev.cowkv;

import java.util.List;

/**
 * What a one-shot transaction did.
 *
 * @param succeeded every compare held and the success branch ran
 * @param revision of its writes, or the revision it read at if it wrote nothing
 * @param responses one per op of the branch that ran
 */
public record TxnResult(boolean succeeded, long revision, List<OpResult> responses) {}
