// Goal: every absl code maps to the documented gRPC code and message
// (STYLE.md point 20: a unit test runs every code through the one table).
// Method: table-driven over all 17 codes, plain and POSIX-named.
#include "server/status_mapping.h"

#include "gtest/gtest.h"

namespace cowkv {
namespace server {
namespace {

TEST(StatusMapping, EveryCodePassesThroughExceptUnavailable) {
  for (int c = 1; c <= 16; ++c) {
    const absl::Status in(static_cast<absl::StatusCode>(c), "why");
    const grpc::Status out = ToGrpcStatus(in);
    if (c == static_cast<int>(absl::StatusCode::kUnavailable)) {
      EXPECT_EQ(out.error_code(), grpc::StatusCode::INTERNAL);
      EXPECT_EQ(out.error_message(), "device unavailable: why");
    } else {
      EXPECT_EQ(static_cast<int>(out.error_code()), c);
      EXPECT_EQ(out.error_message(), "why");
    }
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(StatusMapping, FileErrorsStartWithAPosixName) {
  struct Case {
    absl::Status in;
    grpc::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {absl::NotFoundError("ENOENT: no such file: /a"), grpc::StatusCode::NOT_FOUND, "ENOENT: no such file: /a"},
      {absl::NotFoundError("subvolume 'x' not found"), grpc::StatusCode::NOT_FOUND, "ENOENT: subvolume 'x' not found"},
      {absl::AlreadyExistsError("x"), grpc::StatusCode::ALREADY_EXISTS, "EEXIST: x"},
      {absl::FailedPreconditionError("subvolume 's' is a read-only snapshot"), grpc::StatusCode::FAILED_PRECONDITION, "EROFS: subvolume 's' is a read-only snapshot"},
      {absl::FailedPreconditionError("store is closed"), grpc::StatusCode::FAILED_PRECONDITION, "EPERM: store is closed"},
      {absl::ResourceExhaustedError("no space"), grpc::StatusCode::RESOURCE_EXHAUSTED, "ENOSPC: no space"},
      {absl::DataLossError("corrupt node"), grpc::StatusCode::DATA_LOSS, "EIO: corrupt node"},
      {absl::InvalidArgumentError("bad"), grpc::StatusCode::INVALID_ARGUMENT, "EINVAL: bad"},
      {absl::UnavailableError("EIO: cut"), grpc::StatusCode::INTERNAL, "EIO: device unavailable: cut"},
      {absl::UnavailableError("cut"), grpc::StatusCode::INTERNAL, "EIO: device unavailable: cut"},
  };
  for (const Case& c : cases) {
    const grpc::Status out = ToGrpcFileStatus(c.in);
    EXPECT_EQ(out.error_code(), c.code) << c.in;
    EXPECT_EQ(out.error_message(), c.message) << c.in;
  }
}

TEST(StatusMapping, HasPosixName) {
  EXPECT_TRUE(HasPosixName("ENOENT: x"));
  EXPECT_TRUE(HasPosixName("E2BIG: x"));
  EXPECT_FALSE(HasPosixName("Enoent: x"));
  EXPECT_FALSE(HasPosixName("ENOENT x"));
  EXPECT_FALSE(HasPosixName("E: x"));
  EXPECT_FALSE(HasPosixName(""));
}

TEST(StatusMapping, ServerOwnStatuses) {
  EXPECT_EQ(StoppingStatus().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(UnauthenticatedStatus("no token").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace server
}  // namespace cowkv
