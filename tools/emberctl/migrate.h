// Copyright 2026 The Ember Authors.
//
// Running online migrations from emberctl (admin.proto StartMigration): printing
// rebalance plans, starting a spec, following it to the end with progress lines on
// stderr, and the final summary. Shared by `slots move`, `rebalance`, `shards drain`,
// `shards add --rebalance` and `migrations wait`.
//
// Following polls GetMigration every 250 ms. Ctrl-C stops the follower, not the
// migration: the coordinator keeps running it, and the command says so (exit 1).

#ifndef EMBER_TOOLS_EMBERCTL_MIGRATE_H_
#define EMBER_TOOLS_EMBERCTL_MIGRATE_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/v1/admin.pb.h"
#include "tools/emberctl/cli.h"
#include "tools/emberctl/output.h"

namespace ember::ctl {

struct MigrateFlags {
  uint64_t bytes_per_sec = 0;  // copy throttle; 0: unthrottled
  bool dry_run = false;        // print the plan only
  bool detach = false;         // start and return with the op id
};

// Declares --bytes_per_sec, --dry_run (`dry_run_help`: what it prints) and --detach.
void DeclareMigrateFlags(FlagSet& flags, MigrateFlags* migrate, absl::string_view dry_run_help);

// Adds keys to the command's JSON object before "plan"/"migration" (may be empty).
using JsonExtra = std::function<void(JsonWriter&)>;

// Asks for a plan (PlanRebalance `request`), prints it and, unless flags.dry_run or the
// plan has no moves, runs it with `reason` as StartAndReport does. JSON: {extra...,
// "plan": {...}, "migration": {...} or null}.
absl::Status PlanAndRun(Session& s, const v1::PlanRebalanceRequest& request,
                        const std::string& reason, const MigrateFlags& flags,
                        const JsonExtra& extra);

// Starts `spec` and follows it (or, with flags.detach, prints the op id and returns).
// Prints the final summary; JSON: {extra..., "migration": {...}}. Errors: the RPC's;
// FAILED_PRECONDITION / CANCELLED when the migration ends FAILED / CANCELLED;
// CANCELLED when Ctrl-C stopped the follower (the migration keeps running).
absl::Status StartAndReport(Session& s, const v1::MigrationSpec& spec, const MigrateFlags& flags,
                            const JsonExtra& extra);

// Follows migration `op_id` until it ends, printing progress lines to stderr; returns
// its last state. Errors: the RPC's (after retrying UNAVAILABLE for up to 30 s);
// CANCELLED on Ctrl-C. REQUIRES: an InterruptScope is active (Ctrl-C is noticed).
absl::StatusOr<v1::Migration> Follow(Session& s, const std::string& op_id);

// Whether `phase` is DONE, CANCELLED or FAILED.
bool Finished(v1::Migration::Phase phase);
// OK unless the migration ended FAILED or CANCELLED.
absl::Status Outcome(const v1::Migration& m);

// The multi-line summary of a migration (phase, moves, rows/bytes, seconds, epochs).
std::string SummaryText(const v1::Migration& m);
// The phase's name ("COPYING").
std::string PhaseName(v1::Migration::Phase phase);

// The plan as text; `drain` are shards that give up their slots (left out of the mean).
std::string PlanText(const v1::PlanRebalanceResponse& plan, const std::set<uint32_t>& drain);
void PlanJson(JsonWriter& j, const v1::PlanRebalanceResponse& plan,
              const std::set<uint32_t>& drain);

}  // namespace ember::ctl

#endif  // EMBER_TOOLS_EMBERCTL_MIGRATE_H_
