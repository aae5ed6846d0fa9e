// Helpers for server_test.cc: an in-process cowkvd on a temporary device and
// stubs for every service. Test-only.
#ifndef COWKV_SERVER_SERVER_TEST_UTIL_H_
#define COWKV_SERVER_SERVER_TEST_UTIL_H_

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/v1/admin.grpc.pb.h"
#include "cowkv/v1/files.grpc.pb.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "cowkv/v1/subvolumes.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/server.h"

namespace cowkv {
namespace server {
namespace testing_util {

// A fresh path under the test's temporary directory.
inline std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  static int counter = 0;
  return absl::StrCat(dir ? dir : "/tmp", "/", name, "-", ::getpid(), "-", ++counter, ".img");
}

inline ServerOptions TestOptions(const std::string& name, uint64_t size = 64ull << 20) {
  ServerOptions o;
  o.device.path = TempPath(name);
  o.device.create_size = size;
  o.listen = "127.0.0.1:0";
  o.metrics_listen = "127.0.0.1:0";
  o.engine.commit_interval_ms = 0;
  o.max_txns_per_peer = 4;
  o.drain_timeout = absl::Seconds(5);
  o.reap_interval = absl::Milliseconds(50);
  return o;
}

struct Client {
  explicit Client(int port) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                        grpc::InsecureChannelCredentials(), args);
    subvolumes = v1::Subvolumes::NewStub(channel);
    kv = v1::KV::NewStub(channel);
    files = v1::Files::NewStub(channel);
    admin = v1::Admin::NewStub(channel);
  }
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Subvolumes::Stub> subvolumes;
  std::unique_ptr<v1::KV::Stub> kv;
  std::unique_ptr<v1::Files::Stub> files;
  std::unique_ptr<v1::Admin::Stub> admin;
};

// A client context with a 60 s deadline (gRPC sets none by default).
inline std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "") {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  return ctx;
}

}  // namespace testing_util
}  // namespace server
}  // namespace cowkv

#define EXPECT_CODE(status_expr, code)                                          \
  do {                                                                          \
    const grpc::Status s_ = (status_expr);                                      \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code) << s_.error_message();   \
  } while (0)

#define ASSERT_GRPC_OK(status_expr)                                             \
  do {                                                                          \
    const grpc::Status s_ = (status_expr);                                      \
    ASSERT_TRUE(s_.ok()) << s_.error_code() << ": " << s_.error_message();     \
  } while (0)

#define EXPECT_POSIX(status_expr, code, posix)                                  \
  do {                                                                          \
    const grpc::Status s_ = (status_expr);                                      \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code) << s_.error_message();   \
    EXPECT_EQ(s_.error_message().rfind(posix ": ", 0), 0u) << s_.error_message(); \
  } while (0)

#endif  // COWKV_SERVER_SERVER_TEST_UTIL_H_
