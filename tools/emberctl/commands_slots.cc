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

absl::StatusOr<Runner> ParseShow(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  std::optional<uint32_t> shard;
  for (const Flag& f : args.flags) {
    if (f.name == "shard") {
      uint32_t id = 0;
      EMBER_RETURN_IF_ERROR(ParseNumber(f, &id));
      shard = id;
    } else {
      return UnknownFlag(args, f);
    }
  }
  return Runner([shard](Session& s) { return RunShow(s, shard); });
}

struct MoveOptions {
  std::vector<uint32_t> slots;
  uint32_t to = 0;
  MigrateFlags migrate;
};

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

absl::StatusOr<Runner> ParseMove(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  MoveOptions o;
  bool have_slots = false;
  std::optional<uint32_t> to;
  for (const Flag& f : args.flags) {
    absl::Status st;
    if (f.name == "slots") {
      EMBER_RETURN_IF_ERROR(RequireValue(f));
      absl::StatusOr<std::vector<uint32_t>> slots = ParseSlotList(f.value);
      if (!slots.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--slots: ", slots.status().message()));
      }
      o.slots = *std::move(slots);
      have_slots = true;
    } else if (f.name == "to") {
      uint32_t id = 0;
      EMBER_RETURN_IF_ERROR(ParseNumber(f, &id));
      to = id;
    } else if (ParseMigrateFlag(f, &o.migrate, &st)) {
      EMBER_RETURN_IF_ERROR(st);
    } else {
      return UnknownFlag(args, f);
    }
  }
  if (!have_slots) return MissingFlag(args, "slots");
  if (!to.has_value()) return MissingFlag(args, "to");
  o.to = *to;
  return Runner([o](Session& s) { return RunMove(s, o); });
}

absl::StatusOr<Runner> ParseRebalance(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  v1::PlanRebalanceRequest request;
  request.set_by(v1::PlanRebalanceRequest::ROWS);
  MigrateFlags migrate;
  for (const Flag& f : args.flags) {
    absl::Status st;
    if (f.name == "by") {
      v1::PlanRebalanceRequest::By by = v1::PlanRebalanceRequest::ROWS;
      EMBER_RETURN_IF_ERROR(ParseBy(f, &by));
      request.set_by(by);
    } else if (f.name == "tolerance") {
      double tolerance = 0;
      EMBER_RETURN_IF_ERROR(ParseDouble(f, &tolerance));
      if (!(tolerance >= 0 && tolerance < 10)) {
        return absl::InvalidArgumentError("--tolerance must be in [0, 10)");
      }
      request.set_tolerance(tolerance);
    } else if (ParseMigrateFlag(f, &migrate, &st)) {
      EMBER_RETURN_IF_ERROR(st);
    } else {
      return UnknownFlag(args, f);
    }
  }
  return Runner([request, migrate](Session& s) {
    const std::string reason =
        absl::StrCat("rebalance by ", LowerName(v1::PlanRebalanceRequest::By_Name(request.by())));
    return PlanAndRun(s, request, reason, migrate, nullptr);
  });
}

}  // namespace

std::vector<CommandSpec> SlotCommands() {
  return {
      {"slots", "show", "slots show [--shard=N]",
       "Slot count and ranges per shard (\"0-4095,8192-9000\"), and unowned slots.\n\n"
       "  --shard=N   only this shard\n",
       ParseShow},
      {"slots", "move", "slots move --slots=LIST --to=N [--bytes_per_sec=N] [--dry_run] [--detach]",
       "Moves slots online to shard N: one move per current owner (slots already on N are\n"
       "skipped), then follows the migration to the end.\n\n"
       "  --slots=LIST         e.g. 0-99,200,300-310 (slots 0-16383). Required\n"
       "  --to=N               target shard. Required\n"
       "  --bytes_per_sec=N    copy throttle. Default: 0 (unthrottled)\n"
       "  --dry_run            print the moves only\n"
       "  --detach             start the migration and return with its op id\n",
       ParseMove},
      {nullptr, "rebalance",
       "rebalance [--by=rows|load|slots] [--tolerance=F] [--bytes_per_sec=N] [--dry_run] "
       "[--detach]",
       "Plans moves that even out rows, load or slots over the alive shards, prints the\n"
       "plan (moves; per shard slots and weight before/after, % of the mean; max/mean)\n"
       "and runs it.\n\n"
       "  --by=rows|load|slots what to even out. Default: rows\n"
       "  --tolerance=F        stop when every shard is within F of the mean. Default: 0.05\n"
       "  --bytes_per_sec=N    copy throttle. Default: 0 (unthrottled)\n"
       "  --dry_run            print the plan only\n"
       "  --detach             start the migration and return with its op id\n",
       ParseRebalance},
  };
}

}  // namespace ember::ctl
