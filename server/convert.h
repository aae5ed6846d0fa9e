// Conversions between the engine's types (engine/include/cowkv/store.h) and the
// cowkv.v1 messages. Field-for-field copies only: no validation (validate.h)
// and no error mapping (status_mapping.h) happen here.
//
// Thread-safe (pure functions).
#ifndef COWKV_SERVER_CONVERT_H_
#define COWKV_SERVER_CONVERT_H_

#include "cowkv/store.h"
#include "cowkv/v1/admin.pb.h"
#include "cowkv/v1/files.pb.h"
#include "cowkv/v1/kv.pb.h"
#include "cowkv/v1/subvolumes.pb.h"

namespace cowkv {
namespace server {

void ToProto(const SubvolumeInfo& in, v1::SubvolumeInfo* out);
void ToProto(const KeyValue& in, v1::KeyValue* out);
void ToProto(const FileStat& in, v1::FileStat* out);
v1::FileKind ToProto(FileKind kind);
void ToProto(const FiemapExtent& in, v1::FiemapExtent* out);
void ToProto(const CheckReport& in, v1::CheckResponse* out);

Durability ToEngine(v1::Durability d);
Compare ToEngine(const v1::Compare& in);

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_CONVERT_H_
