// Goal: every absl code maps to the documented gRPC code and message
// (STYLE.md point 20: a unit test runs every code through the one table).
// Method: table-driven over all 17 codes, plain and POSIX-named.
#include "server/status_mapping.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
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
      {absl::NotFoundError("ENOENT: no such file: /a"), grpc::StatusCode::NOT_FOUND,
       "ENOENT: no such file: /a"},
      {absl::NotFoundError("subvolume 'x' not found"), grpc::StatusCode::NOT_FOUND,
       "ENOENT: subvolume 'x' not found"},
      {absl::AlreadyExistsError("x"), grpc::StatusCode::ALREADY_EXISTS, "EEXIST: x"},
      {WithReason(absl::FailedPreconditionError("subvolume 's' is a read-only snapshot"),
                  ErrorReason::kReadOnlySnapshot),
       grpc::StatusCode::FAILED_PRECONDITION, "EROFS: subvolume 's' is a read-only snapshot"},
      // The class comes from the reason, never from the words.
      {absl::FailedPreconditionError("subvolume 's' is a read-only snapshot"),
       grpc::StatusCode::FAILED_PRECONDITION, "EPERM: subvolume 's' is a read-only snapshot"},
      {WithReason(absl::FailedPreconditionError("store is read-only after a failed commit"),
                  ErrorReason::kEROFS),
       grpc::StatusCode::FAILED_PRECONDITION, "EROFS: store is read-only after a failed commit"},
      {PosixError(ErrorReason::kENOTEMPTY, "dir /d"), grpc::StatusCode::FAILED_PRECONDITION,
       "ENOTEMPTY: dir /d"},
      {absl::FailedPreconditionError("store is closed"), grpc::StatusCode::FAILED_PRECONDITION,
       "EPERM: store is closed"},
      {absl::ResourceExhaustedError("no space"), grpc::StatusCode::RESOURCE_EXHAUSTED,
       "ENOSPC: no space"},
      {absl::DataLossError("corrupt node"), grpc::StatusCode::DATA_LOSS, "EIO: corrupt node"},
      {absl::InvalidArgumentError("bad"), grpc::StatusCode::INVALID_ARGUMENT, "EINVAL: bad"},
      {absl::UnavailableError("EIO: cut"), grpc::StatusCode::INTERNAL,
       "EIO: device unavailable: cut"},
      {absl::UnavailableError("cut"), grpc::StatusCode::INTERNAL, "EIO: device unavailable: cut"},
  };
  for (const Case& c : cases) {
    const grpc::Status out = ToGrpcFileStatus(c.in);
    EXPECT_EQ(out.error_code(), c.code) << c.in;
    EXPECT_EQ(out.error_message(), c.message) << c.in;
  }
}

// Goal: every error carries google.rpc.ErrorInfo whose reason is the class
// set where the error was decided (engine, server), else the code's name.
TEST(StatusMapping, EveryErrorCarriesErrorInfo) {
  for (int c = 1; c <= 16; ++c) {
    const absl::Status in(static_cast<absl::StatusCode>(c), "why");
    const ErrorInfoFields plain = ErrorInfoOf(ToGrpcStatus(in));
    EXPECT_EQ(plain.domain, "cowkv.dev");
    EXPECT_EQ(plain.reason, c == static_cast<int>(absl::StatusCode::kUnavailable)
                                ? "DEVICE_UNAVAILABLE"
                                : absl::StatusCodeToString(in.code()));
    EXPECT_EQ(plain.errno_name, "");
    const grpc::Status file = ToGrpcFileStatus(in);
    EXPECT_EQ(ErrorInfoOf(file).errno_name,
              file.error_message().substr(0, file.error_message().find(':')));
  }
  for (int r = 1; r < kErrorReasonCount; ++r) {
    const ErrorReason reason = static_cast<ErrorReason>(r);
    const absl::Status in = WithReason(absl::FailedPreconditionError("x"), reason);
    EXPECT_EQ(ErrorInfoOf(ToGrpcStatus(in)).reason, ReasonName(reason));
    const grpc::Status file = ToGrpcFileStatus(in);
    EXPECT_EQ(ErrorInfoOf(file).reason, ReasonName(reason));
    EXPECT_EQ(ErrorInfoOf(file).errno_name, ReasonPosixName(reason));
    EXPECT_EQ(file.error_message(), absl::StrCat(ReasonPosixName(reason), ": x"));
  }
  EXPECT_EQ(ErrorInfoOf(ToGrpcStatus(WithReason(absl::ResourceExhaustedError("too big"),
                                                ErrorReason::kLimit)))
                .reason,
            "LIMIT");
  EXPECT_EQ(ErrorInfoOf(ToGrpcStatus(
                            WithReason(absl::ResourceExhaustedError("full"), ErrorReason::kENOSPC)))
                .reason,
            "ENOSPC");
  EXPECT_EQ(ErrorInfoOf(
                ToGrpcStatus(WithServerReason(absl::ResourceExhaustedError("busy"), "SERVER_BUSY")))
                .reason,
            "SERVER_BUSY");
  EXPECT_EQ(ErrorInfoOf(StoppingStatus()).reason, "STOPPING");
  EXPECT_EQ(ErrorInfoOf(UnauthenticatedStatus("no token")).reason, "UNAUTHENTICATED");
  EXPECT_EQ(ErrorInfoOf(UnparsableRequestStatus("/cowkv.v1.Files/Stat", "cowkv.v1.StatRequest", ""))
                .errno_name,
            "EINVAL");
  EXPECT_EQ(ErrorInfoOf(grpc::Status::OK).reason, "");
}

// Goal: a reason survives the engine's status plumbing (copies, payloads).
TEST(ErrorReason, RoundTripsAndNamesAreUnique) {
  std::set<std::string> names;
  for (int r = 1; r < kErrorReasonCount; ++r) {
    const ErrorReason reason = static_cast<ErrorReason>(r);
    EXPECT_TRUE(names.insert(std::string(ReasonName(reason))).second) << ReasonName(reason);
    absl::Status s = WithReason(absl::InternalError("x"), reason);
    absl::Status copy = s;
    EXPECT_EQ(ReasonOf(copy), reason);
    EXPECT_FALSE(ReasonPosixName(reason).empty());
  }
  EXPECT_EQ(ReasonOf(absl::InternalError("ENOENT: looks like one")), ErrorReason::kNone);
  EXPECT_EQ(ReasonOf(WithReason(absl::OkStatus(), ErrorReason::kENOENT)), ErrorReason::kNone);
  EXPECT_EQ(ReasonOf(WithReason(WithReason(absl::InternalError("x"), ErrorReason::kENOENT),
                                ErrorReason::kNone)),
            ErrorReason::kNone);
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
