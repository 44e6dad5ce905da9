// Copyright 2026 The Ember Authors.
//
// Small equivalents of the status macros that Abseil 20220623 does not ship.
//
//   EMBER_RETURN_IF_ERROR(DoThing());
//   EMBER_ASSIGN_OR_RETURN(Row row, store.Get(id));

#ifndef EMBER_COMMON_STATUS_MACROS_H_
#define EMBER_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define EMBER_STATUS_CONCAT_INNER_(a, b) a##b
#define EMBER_STATUS_CONCAT_(a, b) EMBER_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define EMBER_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status ember_status_ = (expr);         \
    if (!ember_status_.ok()) return ember_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, otherwise
// move-assigns the value to `lhs` (which may be a declaration).
#define EMBER_ASSIGN_OR_RETURN(lhs, rexpr) \
  EMBER_ASSIGN_OR_RETURN_IMPL_(EMBER_STATUS_CONCAT_(ember_statusor_, __LINE__), lhs, rexpr)

#define EMBER_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // EMBER_COMMON_STATUS_MACROS_H_
