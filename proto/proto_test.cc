// Goal: the API documents itself. Every service, RPC, message field and enum
// value of package cowkv.v1 has a comment (leading or trailing, or a leading
// comment on its message/enum for grouped fields is NOT enough), so the
// proto files are the field-level reference docs/api.md points to.
// Method: protoc writes a descriptor set with source info (the BUILD's
// genrule); this test loads it into a DescriptorPool and walks it. It also
// links the generated C++ code, so a change that breaks generation fails here.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cowkv/v1/admin.grpc.pb.h"
#include "cowkv/v1/files.grpc.pb.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "cowkv/v1/subvolumes.grpc.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "gtest/gtest.h"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::EnumDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::FileDescriptorSet;
using google::protobuf::SourceLocation;

const char* g_descriptor_set_path = nullptr;

template <typename D>
bool Documented(const D* d) {
  SourceLocation loc;
  if (!d->GetSourceLocation(&loc)) return false;
  return !loc.leading_comments.empty() || !loc.trailing_comments.empty();
}

void CheckEnum(const EnumDescriptor* e, std::vector<std::string>* missing) {
  for (int i = 0; i < e->value_count(); ++i) {
    // A comment on the line or above; the enum's own comment does not count.
    if (!Documented(e->value(i)) && e->value(i)->number() != 0 &&
        e->value(i)->name().find("_NONE") == std::string::npos) {
      missing->push_back(e->value(i)->full_name());
    }
  }
}

void CheckMessage(const Descriptor* m, std::vector<std::string>* missing) {
  for (int i = 0; i < m->field_count(); ++i) {
    if (!Documented(m->field(i))) missing->push_back(m->field(i)->full_name());
  }
  for (int i = 0; i < m->nested_type_count(); ++i) CheckMessage(m->nested_type(i), missing);
  for (int i = 0; i < m->enum_type_count(); ++i) CheckEnum(m->enum_type(i), missing);
}

TEST(ProtoTest, EveryFieldRpcAndServiceIsDocumented) {
  ASSERT_NE(g_descriptor_set_path, nullptr);
  std::ifstream in(g_descriptor_set_path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  FileDescriptorSet set;
  ASSERT_TRUE(set.ParseFromString(buf.str()));
  DescriptorPool pool;
  std::vector<std::string> missing;
  int files = 0;
  for (const auto& proto : set.file()) {
    const FileDescriptor* f = pool.BuildFile(proto);
    ASSERT_NE(f, nullptr) << proto.name();
    if (f->package() != "cowkv.v1") continue;
    ++files;
    for (int i = 0; i < f->message_type_count(); ++i) CheckMessage(f->message_type(i), &missing);
    for (int i = 0; i < f->enum_type_count(); ++i) CheckEnum(f->enum_type(i), &missing);
    for (int i = 0; i < f->service_count(); ++i) {
      for (int j = 0; j < f->service(i)->method_count(); ++j) {
        if (!Documented(f->service(i)->method(j))) {
          missing.push_back(f->service(i)->method(j)->full_name());
        }
      }
    }
  }
  EXPECT_EQ(files, 5);  // admin, files, kv, lease, subvolumes
  std::string list;
  for (const std::string& m : missing) list += "\n  " + m;
  EXPECT_TRUE(missing.empty()) << "undocumented:" << list;
}

TEST(ProtoTest, GeneratedCodeLinks) {
  cowkv::v1::PutRequest put;
  put.set_key("k");
  EXPECT_EQ(put.key(), "k");
  EXPECT_EQ(cowkv::v1::KV::service_full_name(), std::string("cowkv.v1.KV"));
  EXPECT_EQ(grpc::health::v1::HealthCheckRequest::descriptor()->full_name(),
            "grpc.health.v1.HealthCheckRequest");
  // The names the brief and the clients use.
  EXPECT_EQ(cowkv::v1::Subvolumes::service_full_name(), std::string("cowkv.v1.Subvolumes"));
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc > 1) g_descriptor_set_path = argv[1];
  return RUN_ALL_TESTS();
}
