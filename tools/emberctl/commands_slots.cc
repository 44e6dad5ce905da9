// Copyright 2026 The Ember Authors.
//
// `slots show|move` and `rebalance`.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/ps_client_cluster.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "common/slot_ranges.h"
#include "common/status_macros.h"
#include "tools/emberctl/cli.h"
#include "tools/emberctl/migrate.h"

namespace ember::ctl {
namespace {

// The map's owners (every slot unowned before slots are assigned).
absl::StatusOr<std::vector<uint32_t>> Owners(const v1::GetClusterMapResponse& map) {
  if (map.epoch() == 0 && map.slot_owners().empty()) {
    return std::vector<uint32_t>(kNumSlots, kNoShard);
  }
  EMBER_ASSIGN_OR_RETURN(SlotMap slots, DecodeSlotOwners(map.slot_owners(), map.epoch()));
  return slots.owners();
}

void RangesJson(JsonWriter& j, const std::vector<v1::SlotRange>& ranges) {
  j.BeginArray();
  for (const v1::SlotRange& r : ranges) j.BeginArray().Uint(r.first()).Uint(r.last()).EndArray();
  j.EndArray();
}

absl::Status RunShow(Session& s, std::optional<uint32_t> only) {
  EMBER_ASSIGN_OR_RETURN(v1::GetClusterMapResponse map, s.client->GetClusterMap());
  EMBER_ASSIGN_OR_RETURN(std::vector<uint32_t> owners, Owners(map));
  std::map<uint32_t, std::vector<uint32_t>> by_shard;  // registered shards, even without slots
  for (const v1::ShardInfo& sh : map.shards()) by_shard[sh.shard_id()];
  std::vector<uint32_t> unowned;
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
    (owners[slot] == kNoShard ? unowned : by_shard[owners[slot]]).push_back(slot);
  }
  if (only.has_value()) {
    if (by_shard.count(*only) == 0) {
      return absl::NotFoundError(absl::StrCat("shard ", *only, " is not registered"));
    }
    by_shard = {{*only, by_shard[*only]}};
  }
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("epoch").Uint(map.epoch()).Key("shards").BeginArray();
    for (const auto& [id, slots] : by_shard) {
      j.BeginObject().Key("shard_id").Uint(id).Key("slots").Uint(slots.size()).Key("ranges");
      RangesJson(j, ToRanges(slots));
      j.EndObject();
    }
    j.EndArray();
    if (!only.has_value()) {
      j.Key("unowned").BeginObject().Key("slots").Uint(unowned.size()).Key("ranges");
      RangesJson(j, ToRanges(unowned));
      j.EndObject();
    }
    j.EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  TextTable t({"SHARD", "SLOTS", "RANGES"});
  for (const auto& [id, slots] : by_shard) {
    t.AddRow({absl::StrCat(id), absl::StrCat(slots.size()),
              slots.empty() ? "-" : FormatRanges(ToRanges(slots))});
  }
  if (!only.has_value() && !unowned.empty()) {
    t.AddRow({"unowned", absl::StrCat(unowned.size()), FormatRanges(ToRanges(unowned))});
  }
  *s.out << "epoch " << map.epoch() << "\n" << t.Render();
  return absl::OkStatus();
}

struct ShowOptions {
  std::optional<uint32_t> shard;
};

void DeclareShow(FlagSet& flags, ShowOptions& o) {
  flags.Number("shard", &o.shard, "N", "only this shard");
}

absl::StatusOr<Runner> FinishShow(const Args& args, const ShowOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([shard = o.shard](Session& s) { return RunShow(s, shard); });
}

struct MoveOptions {
  std::vector<uint32_t> slots;
  uint32_t to = 0;
  MigrateFlags migrate;
};

void DeclareMove(FlagSet& flags, MoveOptions& o) {
  flags
      .Custom("slots", "LIST", "e.g. 0-99,200,300-310 (slots 0-16383)",
              [&o](const Flag& f) -> absl::Status {
                absl::StatusOr<std::vector<uint32_t>> slots = ParseSlotList(f.value);
                if (!slots.ok()) {
                  return absl::InvalidArgumentError(
                      absl::StrCat("--slots: ", slots.status().message()));
                }
                o.slots = *std::move(slots);
                return absl::OkStatus();
              })
      .Required();
  flags.Number("to", &o.to, "N", "target shard").Required();
  DeclareMigrateFlags(flags, &o.migrate, "print the moves only");
}

absl::Status RunMove(Session& s, const MoveOptions& o) {
  EMBER_ASSIGN_OR_RETURN(v1::GetClusterMapResponse map, s.client->GetClusterMap());
  if (map.epoch() == 0) {
    return absl::FailedPreconditionError("slots are not assigned yet (epoch 0)");
  }
  EMBER_ASSIGN_OR_RETURN(std::vector<uint32_t> owners, Owners(map));
  bool known = false;
  for (const v1::ShardInfo& sh : map.shards()) known |= sh.shard_id() == o.to;
  if (!known) return absl::NotFoundError(absl::StrCat("shard ", o.to, " is not registered"));
  std::map<uint32_t, std::vector<uint32_t>> by_source;
  std::vector<uint32_t> skipped;
  for (uint32_t slot : o.slots) {
    const uint32_t owner = owners[slot];
    if (owner == kNoShard) {
      return absl::FailedPreconditionError(absl::StrCat(
          "slot ", slot, " is unowned in epoch ", map.epoch(), "; only owned slots can move"));
    }
    (owner == o.to ? skipped : by_source[owner]).push_back(slot);
  }
  v1::MigrationSpec spec;
  spec.set_reason("slots move");
  spec.set_bytes_per_sec(o.migrate.bytes_per_sec);
  for (const auto& [source, slots] : by_source) {
    v1::SlotMove* move = spec.add_moves();
    move->set_source(source);
    move->set_target(o.to);
    for (const v1::SlotRange& r : ToRanges(slots)) *move->add_ranges() = r;
  }
  auto extra = [&](JsonWriter& j) {
    j.Key("target").Uint(o.to).Key("skipped");
    RangesJson(j, ToRanges(skipped));
    j.Key("moves").BeginArray();
    for (const v1::SlotMove& m : spec.moves()) {
      j.BeginObject().Key("source").Uint(m.source()).Key("slots").Uint(CountSlots(m.ranges()));
      j.Key("ranges");
      RangesJson(j, std::vector<v1::SlotRange>(m.ranges().begin(), m.ranges().end()));
      j.EndObject();
    }
    j.EndArray();
  };
  if (!s.options.json) {
    if (!skipped.empty()) {
      *s.out << skipped.size() << " slots already on shard " << o.to
             << ", skipped: " << FormatRanges(ToRanges(skipped), 60) << "\n";
    }
    for (const v1::SlotMove& m : spec.moves()) {
      *s.out << "move " << CountSlots(m.ranges()) << " slots " << m.source() << " -> " << o.to
             << ": " << FormatRanges(m.ranges(), 60) << "\n";
    }
    *s.out << std::flush;
  }
  if (spec.moves_size() == 0 || o.migrate.dry_run) {
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject();
      extra(j);
      j.Key("dry_run").Bool(o.migrate.dry_run).Key("migration").Null().EndObject();
      PrintJson(s, j);
    } else {
      *s.out << (spec.moves_size() == 0 ? "nothing to move\n" : "dry run: nothing started\n");
    }
    return absl::OkStatus();
  }
  return StartAndReport(s, spec, o.migrate, extra);
}

absl::StatusOr<Runner> FinishMove(const Args& args, const MoveOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([o](Session& s) { return RunMove(s, o); });
}

struct RebalanceOptions {
  v1::PlanRebalanceRequest::By by = v1::PlanRebalanceRequest::ROWS;
  std::optional<double> tolerance;
  MigrateFlags migrate;
};

void DeclareRebalance(FlagSet& flags, RebalanceOptions& o) {
  DeclareBy(flags, &o.by, "what to even out");
  flags.Number("tolerance", &o.tolerance, "F", "stop when every shard is within F of the mean")
      .Min(0.0)
      .DefaultText("0.05")
      .Check([](const Flag& f) {
        // Below 10 (a half-open range FlagSet does not state); it parsed already.
        double tolerance = 0;
        (void)ParseNumber(f, &tolerance);
        return tolerance < 10 ? absl::OkStatus()
                              : absl::InvalidArgumentError(
                                    absl::StrCat("--tolerance must be in [0, 10), not ", f.value));
      });
  DeclareMigrateFlags(flags, &o.migrate, "print the plan only");
}

absl::StatusOr<Runner> FinishRebalance(const Args& args, const RebalanceOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  v1::PlanRebalanceRequest request;
  request.set_by(o.by);
  if (o.tolerance.has_value()) request.set_tolerance(*o.tolerance);
  return Runner([request, migrate = o.migrate](Session& s) {
    const std::string reason =
        absl::StrCat("rebalance by ", LowerName(v1::PlanRebalanceRequest::By_Name(request.by())));
    return PlanAndRun(s, request, reason, migrate, nullptr);
  });
}

}  // namespace

std::vector<CommandSpec> SlotCommands() {
  return {
      Command("slots", "show", "",
              "Slot count and ranges per shard (\"0-4095,8192-9000\"), and unowned slots.\n",
              DeclareShow, FinishShow),
      Command("slots", "move", "",
              "Moves slots online to shard N: one move per current owner (slots already on N are\n"
              "skipped), then follows the migration to the end.\n",
              DeclareMove, FinishMove),
      Command(nullptr, "rebalance", "",
              "Plans moves that even out rows, load or slots over the alive shards, prints the\n"
              "plan (moves; per shard slots and weight before/after, % of the mean; max/mean)\n"
              "and runs it.\n",
              DeclareRebalance, FinishRebalance),
  };
}

}  // namespace ember::ctl
