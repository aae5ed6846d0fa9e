// COWKV_RETURN_IF_ERROR / COWKV_ASSIGN_OR_RETURN: the status macros of every
// cowkv layer (engine, server, tools). Debian's Abseil 20220623 has none.
//
//   COWKV_RETURN_IF_ERROR(ValidateKey(key));
//   COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv, store.OpenSubvolume(name));
#ifndef COWKV_INCLUDE_COWKV_STATUS_MACROS_H_
#define COWKV_INCLUDE_COWKV_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define COWKV_STATUS_CONCAT_INNER_(a, b) a##b
#define COWKV_STATUS_CONCAT_(a, b) COWKV_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function
// when it is not OK.
#define COWKV_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status cowkv_status_ = (expr);         \
    if (!cowkv_status_.ok()) return cowkv_status_; \
  } while (0)

// `COWKV_ASSIGN_OR_RETURN(auto x, StatusOrExpr())`: declares/assigns the
// value or returns the error from the enclosing function.
#define COWKV_ASSIGN_OR_RETURN(lhs, rexpr) \
  COWKV_ASSIGN_OR_RETURN_IMPL_(COWKV_STATUS_CONCAT_(cowkv_statusor_, __LINE__), lhs, rexpr)

#define COWKV_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // COWKV_INCLUDE_COWKV_STATUS_MACROS_H_
