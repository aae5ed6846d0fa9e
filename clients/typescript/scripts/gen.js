// Generates static TypeScript stubs of proto/cowkv/v1 into src/gen with
// Debian's protoc ($PROTOC overrides) and the ts-proto plugin pinned in
// package.json. Run by `npm run build` (and so by `npm test`).
"use strict";
const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const root = path.resolve(__dirname, "..");
const protoRoot = path.resolve(root, "../../proto");
const out = path.join(root, "src/gen");
const protos = fs.readdirSync(path.join(protoRoot, "cowkv/v1"))
  .filter((f) => f.endsWith(".proto")).sort().map((f) => path.join(protoRoot, "cowkv/v1", f));
const plugin = path.join(root, "node_modules/.bin/protoc-gen-ts_proto");

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
execFileSync(process.env.PROTOC || "/usr/bin/protoc", [
  `--plugin=protoc-gen-ts_proto=${plugin}`,
  `--ts_proto_out=${out}`,
  "--ts_proto_opt=outputServices=grpc-js,env=node,forceLong=bigint,oneof=unions,esModuleInterop=true,useOptionals=none",
  `-I${protoRoot}`,
  ...protos,
], { stdio: "inherit" });
