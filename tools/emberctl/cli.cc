// Copyright 2026 The Ember Authors.

#include "tools/emberctl/cli.h"

#include <signal.h>

#include <atomic>
#include <string>

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

std::string CommandName(const CommandSpec& spec) {
  return spec.group == nullptr ? spec.name : absl::StrCat(spec.group, " ", spec.name);
}

std::string Synopsis(const CommandSpec& spec, bool brief) {
  constexpr size_t kBriefWidth = 76;
  FlagSet flags("emberctl");
  spec.declare(flags);
  std::string flag_part = flags.FlagsSynopsis();
  auto join = [&] {
    std::string out = CommandName(spec);
    for (const std::string& part : {std::string(spec.positionals), flag_part}) {
      if (!part.empty()) absl::StrAppend(&out, " ", part);
    }
    return out;
  };
  const std::string full = join();
  if (!brief || full.size() <= kBriefWidth) return full;
  // The required flags come first; the optional ones, in brackets, become "[flags]".
  const size_t optional = flag_part.find("[--");
  if (optional == std::string::npos) return full;
  flag_part = absl::StrCat(flag_part.substr(0, optional), "[flags]");
  return join();
}

std::string CommandUsage(const CommandSpec& spec) {
  FlagSet flags("emberctl");
  spec.declare(flags);
  const std::string list = flags.FlagsUsage();
  return absl::StrCat(spec.description, list.empty() ? "" : "\n", list);
}

absl::StatusOr<Runner> ParseCommand(const CommandSpec& spec, const Args& args) {
  FlagSet flags("emberctl");
  flags.ForCommand(args.command);
  const Finish finish = spec.declare(flags);
  if (absl::Status s = flags.Parse(args.flags); !s.ok()) return s;
  Args parsed = args;
  parsed.parsed = &flags;
  return finish(parsed);
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

FlagSet::Decl DeclareBy(FlagSet& flags, v1::PlanRebalanceRequest::By* by, absl::string_view help) {
  return flags.Choice<v1::PlanRebalanceRequest::By>("by", by,
                                                    {{"rows", v1::PlanRebalanceRequest::ROWS},
                                                     {"load", v1::PlanRebalanceRequest::LOAD},
                                                     {"slots", v1::PlanRebalanceRequest::SLOTS}},
                                                    help);
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
