// COWKV_RETURN_IF_ERROR / COWKV_ASSIGN_OR_RETURN for server/ code.
//
// Debian's Abseil 20220623 has no status macros. engine/base/status.h defines
// RETURN_IF_ERROR for the engine, but engine/base is not visible to server/
// (the facade engine/store.h is the server's only engine header), so the
// server carries the two macros under STYLE.md's names.
//
//   COWKV_RETURN_IF_ERROR(ValidateKey(req.key()));
//   COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv, env.OpenSubvolume(name));
#ifndef COWKV_SERVER_STATUS_MACROS_H_
#define COWKV_SERVER_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define COWKV_SERVER_CONCAT_INNER_(a, b) a##b
#define COWKV_SERVER_CONCAT_(a, b) COWKV_SERVER_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function
// when it is not OK.
#define COWKV_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::absl::Status cowkv_status_ = (expr);           \
    if (!cowkv_status_.ok()) return cowkv_status_;  \
  } while (0)

// `COWKV_ASSIGN_OR_RETURN(auto x, StatusOrExpr())`: declares/assigns the
// value or returns the error from the enclosing function.
#define COWKV_ASSIGN_OR_RETURN(lhs, rexpr)                                     \
  COWKV_ASSIGN_OR_RETURN_IMPL_(COWKV_SERVER_CONCAT_(cowkv_statusor_, __LINE__), \
                               lhs, rexpr)

#define COWKV_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // COWKV_SERVER_STATUS_MACROS_H_
