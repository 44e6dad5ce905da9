// Copyright 2026 The Ember Authors.
//
// `hotkeys`: the coordinator's published hot set (hotkeys.proto) and the load it puts
// on the shards. Reads only (CoordinatorService and PsService.GetShardInfo): no admin
// token needed.
//
// Per table, the hottest keys with their rate (keys/s summed over shards), share of
// the cluster's load and owner shard (the slot map's owner of SlotOf(table seed, id)).
// Per shard, the keys it served since it started: pulled (owned), replica_pulled
// (answered from its replicas), pushed; its current rate; and the load skew index,
// max / mean over the answering shards of served keys (1.0 is perfectly even).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ps_client_cluster.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "tools/emberctl/cli.h"

namespace ember::ctl {
namespace {

struct HotKeysOptions {
  std::string table;  // empty: every table
  uint32_t top = 10;
};

struct KeyRow {
  uint64_t id = 0;
  double rate = 0;
  std::optional<double> share;  // none without a cluster rate
  std::optional<uint32_t> owner;
};

struct TableRows {
  std::string table;
  int hot_keys = 0;  // in the hot set; rows holds the top ones
  std::vector<KeyRow> rows;
};

struct ShardLoad {
  v1::ShardInfo shard;
  absl::Status error;  // of GetShardInfo
  std::optional<v1::GetShardInfoResponse> info;
  uint64_t served() const {
    return info ? info->pulled_keys() + info->replica_pulled_keys() + info->pushed_keys() : 0;
  }
};

// What the command shows, gathered before anything is printed.
struct Report {
  v1::HotSet hot_set;
  std::vector<TableRows> tables;
  std::vector<ShardLoad> shards;
  std::optional<double> skew;  // none without an answering shard that served keys
};

// The coordinator's error, with a hint when it is not reachable at all.
absl::Status CoordinatorError(const Session& s, const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable &&
      status.code() != absl::StatusCode::kDeadlineExceeded) {
    return status;
  }
  return absl::Status(
      status.code(),
      absl::StrCat(status.message(), " (is ember-coordinator running at ", s.options.coordinator,
                   "? pass --coordinator=HOST:PORT or set EMBER_COORDINATOR)"));
}

absl::StatusOr<Report> Gather(Session& s, const HotKeysOptions& o) {
  absl::StatusOr<v1::GetHotSetResponse> hot = s.client->GetHotSet();
  if (!hot.ok()) return CoordinatorError(s, hot.status());
  absl::StatusOr<v1::GetClusterMapResponse> cluster = s.client->GetClusterMap();
  if (!cluster.ok()) return CoordinatorError(s, cluster.status());

  Report report;
  report.hot_set = hot->hot_set();
  std::optional<SlotMap> map;
  if (cluster->epoch() > 0) {
    absl::StatusOr<SlotMap> decoded = DecodeSlotOwners(cluster->slot_owners(), cluster->epoch());
    if (decoded.ok()) map = *std::move(decoded);
  }
  absl::flat_hash_map<std::string, uint64_t> seeds;
  for (const v1::TableConfig& table : cluster->tables()) seeds[table.name()] = table.seed();

  bool table_found = o.table.empty();
  const double total = report.hot_set.total_rate();
  for (const v1::HotKeyTable& table : report.hot_set.tables()) {
    if (!o.table.empty() && table.table() != o.table) continue;
    table_found = true;
    TableRows rows;
    rows.table = table.table();
    rows.hot_keys = table.keys_size();
    auto seed = seeds.find(table.table());
    for (int i = 0; i < table.keys_size() && i < static_cast<int>(o.top); ++i) {
      KeyRow row;
      row.id = table.keys(i).id();
      row.rate = table.keys(i).rate();
      if (total > 0) row.share = row.rate / total;
      if (map.has_value() && seed != seeds.end()) {
        const uint32_t owner = map->OwnerOf(SlotOf(seed->second, row.id));
        if (owner != kNoShard) row.owner = owner;
      }
      rows.rows.push_back(row);
    }
    report.tables.push_back(std::move(rows));
  }
  if (!table_found) {
    if (seeds.find(o.table) == seeds.end()) {
      return absl::NotFoundError(absl::StrCat("no table '", o.table, "' in the cluster"));
    }
    report.tables.push_back(TableRows{o.table, 0, {}});  // a table without hot keys
  }

  uint64_t max_served = 0;
  uint64_t sum_served = 0;
  int answered = 0;
  for (const v1::ShardInfo& shard : cluster->shards()) {
    ShardLoad load;
    load.shard = shard;
    absl::StatusOr<v1::GetShardInfoResponse> info = s.client->GetShardInfo(shard.address());
    if (info.ok()) {
      load.info = *std::move(info);
      max_served = std::max(max_served, load.served());
      sum_served += load.served();
      ++answered;
    } else {
      load.error = info.status();
    }
    report.shards.push_back(std::move(load));
  }
  if (answered > 0 && sum_served > 0) {
    report.skew = static_cast<double>(max_served) /
                  (static_cast<double>(sum_served) / static_cast<double>(answered));
  }
  return report;
}

std::string RefreshText(const v1::HotSet& h) {
  if (h.refresh_interval_ms() == 0) return "synchronous";
  return absl::StrCat(
      "every ", h.refresh_interval_ms(), " ms, max staleness ",
      h.max_staleness_ms() == 0 ? absl::StrCat(4 * h.refresh_interval_ms(), " ms (default)")
                                : absl::StrCat(h.max_staleness_ms(), " ms"),
      h.max_staleness_steps() == 0 ? std::string()
                                   : absl::StrCat(" / ", h.max_staleness_steps(), " steps"));
}

void PrintText(Session& s, const Report& r) {
  const v1::HotSet& h = r.hot_set;
  std::string out;
  if (h.version() == 0) {
    out =
        "hot set: none published yet (published once shards are alive; the coordinator's "
        "--hot_keys_per_table=0 disables hot keys)\n";
  } else {
    absl::StrAppend(&out, "hot set version ", h.version(), "  replicas ", h.replicas(),
                    h.replicas() == 0 ? " (replication off)" : "", "  refresh ", RefreshText(h),
                    "\n");
    std::vector<std::string> holders;
    for (const v1::HotSetHolder& holder : h.holders()) {
      holders.push_back(absl::StrCat(holder.shard_id(), " (", holder.address(), ")"));
    }
    absl::StrAppend(&out, "holders: ", holders.empty() ? "none" : absl::StrJoin(holders, ", "),
                    "\n");
    absl::StrAppend(&out, "cluster load: ", Fixed(h.total_rate(), 1), " keys/s\n");
    if (h.tables_size() == 0) {
      out +=
          "no hot keys: no key reached the coordinator's --hot_min_share of the cluster's "
          "load\n";
    }
  }
  for (const TableRows& t : r.tables) {
    absl::StrAppend(&out, "\ntable ", t.table, ": ", t.hot_keys,
                    t.hot_keys == 1 ? " hot key" : " hot keys");
    if (t.rows.size() < static_cast<size_t>(t.hot_keys)) {
      absl::StrAppend(&out, " (top ", t.rows.size(), " shown)");
    }
    out += "\n";
    if (t.rows.empty()) continue;
    TextTable table({"ID", "RATE", "SHARE", "OWNER"});
    for (const KeyRow& k : t.rows) {
      table.AddRow({absl::StrCat(k.id), Fixed(k.rate, 1),
                    k.share ? absl::StrCat(Fixed(*k.share * 100, 2), "%") : "-",
                    k.owner ? absl::StrCat(*k.owner) : "-"});
    }
    out += table.Render(2);
  }
  out += "\n";
  TextTable shards(
      {"SHARD", "ADDRESS", "STATE", "PULLED", "REPLICA_PULLED", "PUSHED", "SERVED", "RATE"});
  std::string notes;
  for (const ShardLoad& l : r.shards) {
    std::vector<std::string> row = {absl::StrCat(l.shard.shard_id()), l.shard.address(),
                                    StateName(l.shard.state())};
    if (l.info) {
      row.push_back(absl::StrCat(l.info->pulled_keys()));
      row.push_back(absl::StrCat(l.info->replica_pulled_keys()));
      row.push_back(absl::StrCat(l.info->pushed_keys()));
      row.push_back(absl::StrCat(l.served()));
      row.push_back(Fixed(l.info->hot_keys().total_rate(), 1));
    } else {
      for (int k = 0; k < 5; ++k) row.push_back("-");
      absl::StrAppend(&notes, "shard ", l.shard.shard_id(), ": ", l.error.ToString(), "\n");
    }
    shards.AddRow(std::move(row));
  }
  out += shards.Render() + notes;
  absl::StrAppend(&out, "load skew index (max/mean served keys): ",
                  r.skew ? Fixed(*r.skew, 3) : std::string("- (no load yet)"), "\n");
  *s.out << out;
}

void PrintJsonReport(Session& s, const Report& r) {
  const v1::HotSet& h = r.hot_set;
  JsonWriter j;
  j.BeginObject()
      .Key("version")
      .Uint(h.version())
      .Key("replicas")
      .Uint(h.replicas())
      .Key("refresh_interval_ms")
      .Uint(h.refresh_interval_ms())
      .Key("max_staleness_ms")
      .Uint(h.max_staleness_ms())
      .Key("max_staleness_steps")
      .Uint(h.max_staleness_steps())
      .Key("total_rate")
      .Double(h.total_rate())
      .Key("holders")
      .BeginArray();
  for (const v1::HotSetHolder& holder : h.holders()) {
    j.BeginObject()
        .Key("shard_id")
        .Uint(holder.shard_id())
        .Key("address")
        .String(holder.address())
        .Key("incarnation")
        .Uint(holder.incarnation())
        .EndObject();
  }
  j.EndArray().Key("tables").BeginArray();
  for (const TableRows& t : r.tables) {
    j.BeginObject().Key("table").String(t.table).Key("hot_keys").Int(t.hot_keys);
    j.Key("keys").BeginArray();
    for (const KeyRow& k : t.rows) {
      j.BeginObject().Key("id").Uint(k.id).Key("rate").Double(k.rate).Key("share");
      k.share ? j.Double(*k.share) : j.Null();
      j.Key("owner");
      k.owner ? j.Uint(*k.owner) : j.Null();
      j.EndObject();
    }
    j.EndArray().EndObject();
  }
  j.EndArray().Key("shards").BeginArray();
  for (const ShardLoad& l : r.shards) {
    j.BeginObject()
        .Key("shard_id")
        .Uint(l.shard.shard_id())
        .Key("address")
        .String(l.shard.address())
        .Key("state")
        .String(StateName(l.shard.state()));
    const v1::GetShardInfoResponse* in = l.info ? &*l.info : nullptr;
    auto num = [&](const char* key, uint64_t v) {
      j.Key(key);
      in != nullptr ? j.Uint(v) : j.Null();
    };
    num("pulled_keys", in ? in->pulled_keys() : 0);
    num("replica_pulled_keys", in ? in->replica_pulled_keys() : 0);
    num("pushed_keys", in ? in->pushed_keys() : 0);
    num("served_keys", l.served());
    num("replica_rows", in ? in->replica_rows() : 0);
    num("hot_set_version", in ? in->hot_set_version() : 0);
    j.Key("rate");
    in != nullptr ? j.Double(in->hot_keys().total_rate()) : j.Null();
    j.Key("error");
    l.error.ok() ? j.Null() : j.String(l.error.ToString());
    j.EndObject();
  }
  j.EndArray().Key("load_skew_index");
  r.skew ? j.Double(*r.skew) : j.Null();
  j.EndObject();
  PrintJson(s, j);
}

void DeclareHotKeys(FlagSet& flags, HotKeysOptions& o) {
  flags.String("table", &o.table, "NAME", "only this table").NonEmpty();
  flags.Number("top", &o.top, "N", "keys shown per table").Range(1, 100000);
}

absl::StatusOr<Runner> FinishHotKeys(const Args& args, const HotKeysOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([o](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(Report report, Gather(s, o));
    if (s.options.json) {
      PrintJsonReport(s, report);
    } else {
      PrintText(s, report);
    }
    return absl::OkStatus();
  });
}

}  // namespace

std::vector<CommandSpec> HotKeyCommands() {
  return {
      Command(nullptr, "hotkeys", "",
              "The coordinator's published hot set: version, replication settings, holders; per\n"
              "table the hottest keys with their rate (keys/s over all shards), share of the\n"
              "cluster's load and owner shard. Then per shard the keys it served since it\n"
              "started (pulled as owner, pulled from replicas, pushed) and its current rate,\n"
              "and the load skew index: max / mean over shards of served keys (1 = even).\n"
              "Needs no admin token.\n",
              DeclareHotKeys, FinishHotKeys),
  };
}

}  // namespace ember::ctl
