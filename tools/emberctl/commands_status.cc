// Copyright 2026 The Ember Authors.
//
// `status` and `shards list|add|drain|remove`.

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tools/emberctl/cli.h"
#include "tools/emberctl/migrate.h"

namespace ember::ctl {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(250);

// One shard as `status` shows it.
struct ShardStats {
  v1::ShardInfo shard;  // the coordinator's view (ListShards)
  absl::Status error;   // of GetShardInfo
  std::optional<v1::GetShardInfoResponse> info;
  std::optional<double> qps;
  std::optional<double> p99_ms;
  bool p99_above = false;  // p99 is above the largest histogram bound
};

// p99 of the calls between two cumulative histograms; nullopt without calls or when
// the histograms do not match.
std::optional<double> P99(const v1::GetShardInfoResponse& a, const v1::GetShardInfoResponse& b,
                          bool* above) {
  const int n = b.latency_counts_size();
  const int bounds = b.latency_bounds_ms_size();
  if (n == 0 || bounds == 0 || a.latency_counts_size() != n ||
      a.latency_bounds_ms_size() != bounds || (n != bounds && n != bounds + 1)) {
    return std::nullopt;
  }
  for (int i = 0; i < bounds; ++i) {
    if (a.latency_bounds_ms(i) != b.latency_bounds_ms(i)) return std::nullopt;
  }
  const uint64_t total = b.latency_counts(n - 1) - a.latency_counts(n - 1);
  if (b.latency_counts(n - 1) < a.latency_counts(n - 1) || total == 0) return std::nullopt;
  const uint64_t target = static_cast<uint64_t>(std::ceil(0.99 * static_cast<double>(total)));
  for (int i = 0; i < n; ++i) {
    if (b.latency_counts(i) - a.latency_counts(i) >= target) {
      if (i < bounds) return b.latency_bounds_ms(i);
      break;
    }
  }
  *above = true;
  return b.latency_bounds_ms(bounds - 1);
}

// GetShardInfo of every shard, twice `sample` apart when sample > 0 (for QPS and p99).
std::vector<ShardStats> SampleShards(Session& s, const v1::ListShardsResponse& list,
                                     absl::Duration sample) {
  std::vector<ShardStats> stats(list.shards_size());
  std::vector<absl::Time> first_time(stats.size());
  for (int i = 0; i < list.shards_size(); ++i) {
    stats[i].shard = list.shards(i);
    absl::StatusOr<v1::GetShardInfoResponse> info =
        s.client->GetShardInfo(list.shards(i).address());
    first_time[i] = absl::Now();
    if (info.ok()) {
      stats[i].info = *info;
    } else {
      stats[i].error = info.status();
    }
  }
  if (sample <= absl::ZeroDuration()) return stats;
  absl::SleepFor(sample);
  for (size_t i = 0; i < stats.size(); ++i) {
    if (!stats[i].info.has_value()) continue;
    absl::StatusOr<v1::GetShardInfoResponse> second =
        s.client->GetShardInfo(stats[i].shard.address());
    const double seconds = absl::ToDoubleSeconds(absl::Now() - first_time[i]);
    if (!second.ok()) {
      stats[i].info.reset();
      stats[i].error = second.status();
      continue;
    }
    const v1::GetShardInfoResponse first = *stats[i].info;
    stats[i].info = *second;
    // A restarted shard counts from zero again: no rate for this interval.
    if (first.incarnation() != second->incarnation() || second->requests() < first.requests() ||
        seconds <= 0) {
      continue;
    }
    stats[i].qps = static_cast<double>(second->requests() - first.requests()) / seconds;
    stats[i].p99_ms = P99(first, *second, &stats[i].p99_above);
  }
  return stats;
}

std::string ShardTableText(const std::vector<ShardStats>& stats) {
  TextTable t(
      {"SHARD", "ADDRESS", "STATE", "SLOTS", "ROWS", "MEMORY", "DISK", "QPS", "P99_MS", "FENCED"});
  std::string notes;
  for (const ShardStats& st : stats) {
    const v1::ShardInfo& sh = st.shard;
    std::vector<std::string> row = {absl::StrCat(sh.shard_id()), sh.address(),
                                    StateName(sh.state()), absl::StrCat(sh.owned_slots())};
    if (st.info.has_value()) {
      const v1::GetShardInfoResponse& in = *st.info;
      row.push_back(absl::StrCat(in.stored_rows()));
      row.push_back(HumanBytes(in.memory_bytes()));
      row.push_back(HumanBytes(in.disk_bytes()));
      row.push_back(st.qps.has_value() ? Fixed(*st.qps, 1) : "-");
      row.push_back(st.p99_ms.has_value()
                        ? absl::StrCat(st.p99_above ? ">" : "", DoubleText(*st.p99_ms))
                        : "-");
      row.push_back(absl::StrCat(in.fenced_slots_size()));
    } else {
      for (int k = 0; k < 6; ++k) row.push_back("-");
      absl::StrAppend(&notes, "shard ", sh.shard_id(), ": ", st.error.ToString(), "\n");
    }
    t.AddRow(std::move(row));
  }
  return t.Render() + notes;
}

void ShardJson(JsonWriter& j, const ShardStats& st) {
  const v1::ShardInfo& sh = st.shard;
  j.BeginObject()
      .Key("shard_id")
      .Uint(sh.shard_id())
      .Key("address")
      .String(sh.address())
      .Key("state")
      .String(StateName(sh.state()))
      .Key("slots")
      .Uint(sh.owned_slots())
      .Key("millis_since_heartbeat")
      .Int(sh.millis_since_heartbeat());
  const v1::GetShardInfoResponse* in = st.info.has_value() ? &*st.info : nullptr;
  auto num = [&](const char* key, uint64_t v) {
    j.Key(key);
    in != nullptr ? j.Uint(v) : j.Null();
  };
  num("epoch", in ? in->epoch() : 0);
  num("version", in ? in->version() : 0);
  num("rows", in ? in->stored_rows() : 0);
  num("rows_in_memory", in ? in->rows_in_memory() : 0);
  num("memory_bytes", in ? in->memory_bytes() : 0);
  num("disk_bytes", in ? in->disk_bytes() : 0);
  num("requests", in ? in->requests() : 0);
  num("fenced_slots", in ? in->fenced_slots_size() : 0);
  j.Key("qps");
  st.qps.has_value() ? j.Double(*st.qps) : j.Null();
  j.Key("p99_ms");
  st.p99_ms.has_value() ? j.Double(*st.p99_ms) : j.Null();
  j.Key("p99_above_max_bound").Bool(st.p99_above);
  j.Key("error");
  st.error.ok() ? j.Null() : j.String(st.error.ToString());
  j.EndObject();
}

std::string JobsText(const v1::ListJobsResponse& jobs) {
  if (jobs.jobs_size() == 0) return "jobs: none\n";
  TextTable t({"JOB", "PHASE", "ATTEMPT", "WORLD", "LATEST_CHECKPOINT", "RECOVERIES"});
  std::string notes;
  for (const v1::GetJobResponse& job : jobs.jobs()) {
    t.AddRow({job.job(), v1::GetJobResponse::Phase_Name(job.phase()), absl::StrCat(job.attempt()),
              absl::StrCat(job.world_size()),
              job.latest_checkpoint().empty() ? "-" : job.latest_checkpoint(),
              absl::StrCat(job.recoveries())});
    if (!job.failure().empty())
      absl::StrAppend(&notes, "job ", job.job(), ": ", job.failure(), "\n");
  }
  return t.Render() + notes;
}

absl::Status RunStatus(Session& s, absl::Duration sample) {
  EMBER_ASSIGN_OR_RETURN(v1::ListShardsResponse list, s.client->ListShards());
  const std::vector<ShardStats> stats = SampleShards(s, list, sample);
  // Jobs and migrations are part of the picture, not a reason to fail it.
  absl::StatusOr<v1::ListJobsResponse> jobs = s.client->ListJobs();
  absl::StatusOr<v1::Migration> migration = s.client->GetMigration("");
  absl::Status migration_error;
  std::optional<v1::Migration> running;
  if (migration.ok()) {
    if (migration->phase() != v1::Migration::DONE) running = *migration;
  } else if (migration.status().code() != absl::StatusCode::kNotFound) {
    migration_error = migration.status();
  }
  int alive = 0;
  for (const v1::ShardInfo& sh : list.shards()) alive += sh.state() == v1::ShardInfo::ALIVE;

  if (s.options.json) {
    JsonWriter j;
    j.BeginObject()
        .Key("coordinator")
        .String(s.options.coordinator)
        .Key("epoch")
        .Uint(list.epoch())
        .Key("sample_ms")
        .Int(absl::ToInt64Milliseconds(sample))
        .Key("shards")
        .BeginArray();
    for (const ShardStats& st : stats) ShardJson(j, st);
    j.EndArray().Key("jobs");
    if (jobs.ok()) {
      j.BeginArray();
      for (const v1::GetJobResponse& job : jobs->jobs()) j.Proto(job);
      j.EndArray().Key("jobs_error").Null();
    } else {
      j.Null().Key("jobs_error").String(jobs.status().ToString());
    }
    j.Key("migration");
    running.has_value() ? j.Proto(*running) : j.Null();
    j.Key("migration_error");
    migration_error.ok() ? j.Null() : j.String(migration_error.ToString());
    j.EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  std::string out = absl::StrCat("coordinator ", s.options.coordinator, "  epoch ", list.epoch(),
                                 "  shards ", list.shards_size(), " (", alive, " alive)\n\n");
  out += ShardTableText(stats);
  out += "\n";
  out += jobs.ok() ? JobsText(*jobs) : absl::StrCat("jobs: ", jobs.status().ToString(), "\n");
  out += "\n";
  if (!migration_error.ok()) {
    absl::StrAppend(&out, "migration: ", migration_error.ToString(), "\n");
  } else if (running.has_value()) {
    out += SummaryText(*running);
  } else {
    out += "migration: none running\n";
  }
  *s.out << out;
  return absl::OkStatus();
}

absl::StatusOr<Runner> ParseStatus(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  int64_t sample_ms = 1000;
  for (const Flag& f : args.flags) {
    if (f.name == "sample_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(f, &sample_ms));
      if (sample_ms < 0 || sample_ms > 600000) {
        return absl::InvalidArgumentError("--sample_ms must be in [0, 600000]");
      }
    } else {
      return UnknownFlag(args, f);
    }
  }
  return Runner([sample_ms](Session& s) { return RunStatus(s, absl::Milliseconds(sample_ms)); });
}

absl::StatusOr<Runner> ParseShardsList(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  EMBER_RETURN_IF_ERROR(CheckNoFlags(args));
  return Runner([](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::ListShardsResponse list, s.client->ListShards());
    const std::vector<ShardStats> stats = SampleShards(s, list, absl::ZeroDuration());
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("epoch").Uint(list.epoch()).Key("shards").BeginArray();
      for (const ShardStats& st : stats) ShardJson(j, st);
      j.EndArray().EndObject();
      PrintJson(s, j);
    } else {
      *s.out << "epoch " << list.epoch() << "\n" << ShardTableText(stats);
    }
    return absl::OkStatus();
  });
}

// Parses --id=N into *id.
absl::Status ParseId(const Flag& f, std::optional<uint32_t>* id) {
  uint32_t v = 0;
  EMBER_RETURN_IF_ERROR(ParseNumber(f, &v));
  *id = v;
  return absl::OkStatus();
}

struct AddOptions {
  uint32_t id = 0;
  int64_t wait_ms = 30000;
  bool rebalance = false;
  v1::PlanRebalanceRequest plan;
  MigrateFlags migrate;
};

// Polls ListShards until shard `id` is registered and ALIVE.
absl::StatusOr<v1::ShardInfo> WaitAlive(Session& s, uint32_t id, absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  std::string last = "not registered";
  while (true) {
    absl::StatusOr<v1::ListShardsResponse> list = s.client->ListShards();
    if (!list.ok() && list.status().code() != absl::StatusCode::kUnavailable) {
      return list.status();
    }
    if (list.ok()) {
      for (const v1::ShardInfo& sh : list->shards()) {
        if (sh.shard_id() != id) continue;
        if (sh.state() == v1::ShardInfo::ALIVE) return sh;
        last = absl::StrCat("registered at ", sh.address(), " but ", StateName(sh.state()));
      }
    } else {
      last = list.status().ToString();
    }
    if (absl::Now() + kPollInterval > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "shard ", id, " is not ALIVE after ", absl::ToInt64Milliseconds(wait), " ms (", last,
          "); start ember-ps with --shard_id=", id, " --coordinator=", s.options.coordinator));
    }
    absl::SleepFor(kPollInterval);
  }
}

absl::StatusOr<Runner> ParseShardsAdd(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  AddOptions o;
  std::optional<uint32_t> id;
  bool plan_flags = false;
  for (const Flag& f : args.flags) {
    absl::Status st;
    if (f.name == "id") {
      EMBER_RETURN_IF_ERROR(ParseId(f, &id));
    } else if (f.name == "wait_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(f, &o.wait_ms));
      if (o.wait_ms < 0) return absl::InvalidArgumentError("--wait_ms must be >= 0");
    } else if (f.name == "rebalance") {
      EMBER_RETURN_IF_ERROR(ParseBool(f, &o.rebalance));
    } else if (f.name == "by") {
      v1::PlanRebalanceRequest::By by = v1::PlanRebalanceRequest::ROWS;
      EMBER_RETURN_IF_ERROR(ParseBy(f, &by));
      o.plan.set_by(by);
      plan_flags = true;
    } else if (f.name == "tolerance") {
      double tolerance = 0;
      EMBER_RETURN_IF_ERROR(ParseDouble(f, &tolerance));
      if (!(tolerance >= 0)) return absl::InvalidArgumentError("--tolerance must be >= 0");
      o.plan.set_tolerance(tolerance);
      plan_flags = true;
    } else if (ParseMigrateFlag(f, &o.migrate, &st)) {
      EMBER_RETURN_IF_ERROR(st);
      plan_flags = true;
    } else {
      return UnknownFlag(args, f);
    }
  }
  if (!id.has_value()) return MissingFlag(args, "id");
  if (plan_flags && !o.rebalance) {
    return absl::InvalidArgumentError(
        "--by, --tolerance, --bytes_per_sec, --dry_run and --detach need --rebalance");
  }
  o.id = *id;
  return Runner([o](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::ShardInfo shard, WaitAlive(s, o.id, absl::Milliseconds(o.wait_ms)));
    if (!o.rebalance) {
      if (s.options.json) {
        JsonWriter j;
        j.BeginObject().Key("shard").Proto(shard).EndObject();
        PrintJson(s, j);
      } else {
        *s.out << "shard " << shard.shard_id() << " is ALIVE at " << shard.address() << " ("
               << shard.owned_slots() << " slots)\n";
      }
      return absl::OkStatus();
    }
    if (!s.options.json) {
      *s.out << "shard " << shard.shard_id() << " is ALIVE at " << shard.address()
             << "; rebalancing\n";
    }
    const v1::PlanRebalanceRequest::By by = o.plan.by() == v1::PlanRebalanceRequest::BY_UNSPECIFIED
                                                ? v1::PlanRebalanceRequest::ROWS
                                                : o.plan.by();
    const std::string reason =
        absl::StrCat("rebalance by ", LowerName(v1::PlanRebalanceRequest::By_Name(by)), " (shard ",
                     o.id, " added)");
    return PlanAndRun(s, o.plan, reason, o.migrate,
                      [&](JsonWriter& j) { j.Key("shard").Proto(shard); });
  });
}

absl::StatusOr<Runner> ParseShardsDrain(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  std::optional<uint32_t> id;
  MigrateFlags migrate;
  for (const Flag& f : args.flags) {
    absl::Status st;
    if (f.name == "id") {
      EMBER_RETURN_IF_ERROR(ParseId(f, &id));
    } else if (ParseMigrateFlag(f, &migrate, &st)) {
      EMBER_RETURN_IF_ERROR(st);
    } else {
      return UnknownFlag(args, f);
    }
  }
  if (!id.has_value()) return MissingFlag(args, "id");
  return Runner([id = *id, migrate](Session& s) {
    v1::PlanRebalanceRequest request;
    request.set_by(v1::PlanRebalanceRequest::SLOTS);
    request.add_drain(id);
    return PlanAndRun(s, request, absl::StrCat("drain shard ", id), migrate, nullptr);
  });
}

absl::StatusOr<Runner> ParseShardsRemove(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  std::optional<uint32_t> id;
  for (const Flag& f : args.flags) {
    if (f.name == "id") {
      EMBER_RETURN_IF_ERROR(ParseId(f, &id));
    } else {
      return UnknownFlag(args, f);
    }
  }
  if (!id.has_value()) return MissingFlag(args, "id");
  return Runner([id = *id](Session& s) -> absl::Status {
    EMBER_RETURN_IF_ERROR(s.client->RemoveShard(id).status());
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("removed_shard").Uint(id).EndObject();
      PrintJson(s, j);
    } else {
      *s.out << "removed shard " << id << "\n";
    }
    return absl::OkStatus();
  });
}

}  // namespace

std::vector<CommandSpec> StatusCommands() {
  return {
      {nullptr, "status", "status [--sample_ms=1000]",
       "Cluster overview: coordinator and epoch; per shard its address, state, slots,\n"
       "rows, memory and disk, QPS and p99 latency (two samples --sample_ms apart),\n"
       "fenced slots; jobs; the newest migration unless DONE.\n\n"
       "  --sample_ms=N   interval between the two samples; 0: no QPS/p99. Default: 1000\n",
       ParseStatus},
      {"shards", "list", "shards list", "The shard table of `status`, without sampling.\n",
       ParseShardsList},
      {"shards", "add", "shards add --id=N [--wait_ms=30000] [--rebalance [--by=...] ...]",
       "Waits until shard N (an ember-ps started with --shard_id=N) has registered and is\n"
       "ALIVE; with --rebalance then moves slots to even out the cluster.\n\n"
       "  --id=N               the shard. Required\n"
       "  --wait_ms=N          how long to wait. Default: 30000\n"
       "  --rebalance          plan and run a rebalance afterwards\n"
       "  --by=rows|load|slots what the rebalance evens out. Default: rows\n"
       "  --tolerance=F        stop within this fraction of the mean. Default: 0.05\n"
       "  --bytes_per_sec=N    copy throttle. Default: 0 (unthrottled)\n"
       "  --dry_run            print the plan only\n"
       "  --detach             start the migration and return with its op id\n",
       ParseShardsAdd},
      {"shards", "drain", "shards drain --id=N [--bytes_per_sec=N] [--dry_run] [--detach]",
       "Moves every slot of shard N to the other alive shards (evenly by slot count).\n\n"
       "  --id=N               the shard. Required\n"
       "  --bytes_per_sec=N    copy throttle. Default: 0 (unthrottled)\n"
       "  --dry_run            print the plan only\n"
       "  --detach             start the migration and return with its op id\n",
       ParseShardsDrain},
      {"shards", "remove", "shards remove --id=N",
       "Forgets shard N. Fails (FAILED_PRECONDITION) while it owns slots: drain it first.\n\n"
       "  --id=N   the shard. Required\n",
       ParseShardsRemove},
  };
}

}  // namespace ember::ctl
