package dev.cowkv;

/**
 * Versions of the server (cowkv.v1.VersionResponse).
 *
 * @param version cowkvd's version
 * @param api the API package, "cowkv.v1"
 */
public record VersionInfo(String version, String api, String grpcVersion, String protobufVersion,
    int nodesize) {}
