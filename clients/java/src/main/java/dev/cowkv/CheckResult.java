package dev.cowkv;

import java.util.List;

/**
 * The result of an online check (cowkv.v1.CheckResponse). Findings are data, not an exception.
 *
 * @param ok no findings
 * @param problems one line per finding
 * @param generation generation of the committed state checked
 * @param rechecked a commit raced the first run; this is the second, with commits held back
 */
public record CheckResult(boolean ok, List<String> problems, long generation, String fsid,
    int nodesize, long totalBytes, long trees, long nodes, long items, long extents,
    long usedBytes, boolean rechecked) {}
