package dev.cowkv;

import cowkv.v1.Kv;

/** When a write is acknowledged (cowkv.v1.Durability). */
public enum Durability {
  /** The server's default: durable unless cowkvd runs with --async-default. */
  DEFAULT(Kv.Durability.DURABILITY_DEFAULT),
  /** After the log sync that covers it: survives any crash. */
  DURABLE(Kv.Durability.DURABILITY_DURABLE),
  /** After it is visible; durable by the next sync, in commit order. */
  ASYNC(Kv.Durability.DURABILITY_ASYNC);

  final Kv.Durability proto;

  Durability(Kv.Durability proto) {
    this.proto = proto;
  }
}
