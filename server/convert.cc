// Engine <-> proto field copies; see convert.h.
#include "server/convert.h"

namespace cowkv {
namespace server {

void ToProto(const SubvolumeInfo& in, v1::SubvolumeInfo* out) {
  out->set_id(in.id);
  out->set_name(in.name);
  out->set_parent_id(in.parent_id);
  out->set_generation(in.generation);
  out->set_last_snapshot(in.last_snapshot);
  out->set_created_unix_ms(in.created_unix_ms);
  out->set_read_only(in.read_only);
  out->set_creation_generation(in.creation_generation);
  for (const std::string& name : in.snapshots) out->add_snapshots(name);
  out->set_uuid(in.uuid);
  out->set_parent_uuid(in.parent_uuid);
  out->set_received_uuid(in.received_uuid);
  out->set_received_generation(in.received_generation);
}

void ToProto(const KeyValue& in, v1::KeyValue* out) {
  out->set_key(in.key);
  out->set_value(in.value);
  out->set_create_revision(in.create_revision);
  out->set_mod_revision(in.mod_revision);
  out->set_version(in.version);
}

v1::FileKind ToProto(FileKind kind) {
  switch (kind) {
    case FileKind::kRegular: return v1::FILE_KIND_REGULAR;
    case FileKind::kDirectory: return v1::FILE_KIND_DIRECTORY;
    case FileKind::kSymlink: return v1::FILE_KIND_SYMLINK;
  }
  return v1::FILE_KIND_REGULAR;
}

void ToProto(const FileStat& in, v1::FileStat* out) {
  out->set_ino(in.ino);
  out->set_kind(ToProto(in.kind));
  out->set_mode(in.mode);
  out->set_nlink(in.nlink);
  out->set_size(in.size);
  out->set_bytes(in.bytes);
  out->set_uid(in.uid);
  out->set_gid(in.gid);
  out->set_atime_ns(in.atime_ns);
  out->set_mtime_ns(in.mtime_ns);
  out->set_ctime_ns(in.ctime_ns);
  out->set_btime_ns(in.btime_ns);
  out->set_generation(in.generation);
  out->set_transid(in.transid);
}

void ToProto(const FiemapExtent& in, v1::FiemapExtent* out) {
  out->set_logical(in.logical);
  out->set_physical(in.physical);
  out->set_length(in.length);
  out->set_flags(in.flags);
}

void ToProto(const CheckReport& in, v1::CheckResponse* out) {
  out->set_ok(in.ok());
  for (const std::string& p : in.problems) out->add_problems(p);
  out->set_generation(in.generation);
  out->set_fsid(in.fsid_hex);
  out->set_nodesize(in.nodesize);
  out->set_total_bytes(in.total_bytes);
  out->set_trees(in.trees);
  out->set_nodes(in.nodes);
  out->set_items(in.items);
  out->set_extents(in.extents);
  out->set_used_bytes(in.used_bytes);
}

Durability ToEngine(v1::Durability d) {
  switch (d) {
    case v1::DURABILITY_DURABLE: return Durability::kDurable;
    case v1::DURABILITY_ASYNC: return Durability::kAsync;
    default: return Durability::kDefault;
  }
}

Compare ToEngine(const v1::Compare& in) {
  Compare c;
  c.key = in.key();
  switch (in.target()) {
    case v1::Compare::TARGET_CREATE_REVISION: c.target = Compare::Target::kCreateRevision; break;
    case v1::Compare::TARGET_MOD_REVISION: c.target = Compare::Target::kModRevision; break;
    case v1::Compare::TARGET_VERSION: c.target = Compare::Target::kVersion; break;
    case v1::Compare::TARGET_EXISTS: c.target = Compare::Target::kExists; break;
    default: c.target = Compare::Target::kValue; break;
  }
  switch (in.op()) {
    case v1::Compare::OP_NOT_EQUAL: c.op = Compare::Op::kNotEqual; break;
    case v1::Compare::OP_LESS: c.op = Compare::Op::kLess; break;
    case v1::Compare::OP_GREATER: c.op = Compare::Op::kGreater; break;
    default: c.op = Compare::Op::kEqual; break;
  }
  c.value = in.value();
  c.number = in.number();
  c.exists = in.exists();
  return c;
}

}  // namespace server
}  // namespace cowkv
