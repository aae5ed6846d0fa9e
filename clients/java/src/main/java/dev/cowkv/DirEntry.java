package dev.cowkv;

/**
 * One directory entry.
 *
 * @param name one path component
 * @param ino the inode it names
 * @param cookie its position; a listing from cookie + 1 continues after it
 */
public record DirEntry(String name, long ino, FileKind kind, long cookie) {}
