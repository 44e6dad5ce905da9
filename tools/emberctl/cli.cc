// Copyright 2026 The Ember Authors.

#include "tools/emberctl/cli.h"

#include <signal.h>

#include <atomic>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ember::ctl {
namespace {

std::atomic<bool> g_in_scope{false};
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnSigint(int) {
  if (g_in_scope.load()) {
    g_interrupted.store(true);
    return;
  }
  signal(SIGINT, SIG_DFL);
  raise(SIGINT);
}

}  // namespace

absl::Status UnknownFlag(const Args& args, const Flag& flag) {
  return absl::InvalidArgumentError(
      absl::StrCat("unknown flag --", flag.name, " for '", args.command, "'"));
}

absl::Status CheckNoFlags(const Args& args) {
  return args.flags.empty() ? absl::OkStatus() : UnknownFlag(args, args.flags[0]);
}

absl::Status CheckPositionals(const Args& args, size_t min, size_t max, absl::string_view what) {
  if (args.positionals.size() < min) {
    return absl::InvalidArgumentError(absl::StrCat("'", args.command, "' needs ", what));
  }
  if (args.positionals.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positionals[max], "' for '", args.command, "'"));
  }
  return absl::OkStatus();
}

absl::Status MissingFlag(const Args& args, absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat("'", args.command, "' needs --", name));
}

absl::Status ParseDouble(const Flag& flag, double* out) { return ParseNumber(flag, out); }

absl::Status ParseBy(const Flag& flag, v1::PlanRebalanceRequest::By* out) {
  if (absl::Status s = RequireValue(flag); !s.ok()) return s;
  if (flag.value == "rows") {
    *out = v1::PlanRebalanceRequest::ROWS;
  } else if (flag.value == "load") {
    *out = v1::PlanRebalanceRequest::LOAD;
  } else if (flag.value == "slots") {
    *out = v1::PlanRebalanceRequest::SLOTS;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag.name, ": expected rows, load or slots, not '", flag.value, "'"));
  }
  return absl::OkStatus();
}

void PrintJson(Session& s, const JsonWriter& j) { *s.out << j.str() << "\n"; }

InterruptScope::InterruptScope() {
  g_interrupted.store(false);
  g_in_scope.store(true);
  signal(SIGINT, OnSigint);
}

InterruptScope::~InterruptScope() {
  g_in_scope.store(false);
  signal(SIGINT, SIG_DFL);
}

bool SleepUnlessInterrupted(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (!g_interrupted.load()) {
    const absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    absl::SleepFor(std::min(left, absl::Milliseconds(20)));
  }
  return false;
}

std::string StateName(v1::ShardInfo::State state) {
  switch (state) {
    case v1::ShardInfo::ALIVE:
      return "ALIVE";
    case v1::ShardInfo::DEAD:
      return "DEAD";
    default:
      return "UNKNOWN";
  }
}

}  // namespace ember::ctl
