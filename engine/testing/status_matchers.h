// Status matchers for gtest (Debian's Abseil has no status_matchers.h).
//   EXPECT_THAT(s, IsOk());  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound));
//   ASSERT_OK(expr);  ASSERT_OK_AND_ASSIGN(auto v, StatusOrExpr());
#ifndef COWKV_ENGINE_TESTING_STATUS_MATCHERS_H_
#define COWKV_ENGINE_TESTING_STATUS_MATCHERS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = GetStatus(arg);
  if (!s.ok()) *result_listener << "status: " << s;
  return s.ok();
}

MATCHER_P(StatusIs, code, "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status: " << s;
  return s.code() == code;
}

}  // namespace testing
}  // namespace cowkv

#define COWKV_TESTING_CONCAT_INNER_(a, b) a##b
#define COWKV_TESTING_CONCAT_(a, b) COWKV_TESTING_CONCAT_INNER_(a, b)

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::cowkv::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::cowkv::testing::IsOk())

#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(COWKV_TESTING_CONCAT_(statusor_, __LINE__), lhs, rexpr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(so, lhs, rexpr) \
  auto so = (rexpr);                               \
  ASSERT_TRUE(so.ok()) << so.status();             \
  lhs = std::move(so).value()

#endif  // COWKV_ENGINE_TESTING_STATUS_MATCHERS_H_
