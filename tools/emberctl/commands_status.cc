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

// GetShardInfo of every shard's default store, twice `sample` apart when sample > 0.
std::vector<ShardStats> SampleDefaultStores(Session& s, const v1::ListShardsResponse& list,
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

// Adds the rows, memory and disk of every job's own store on the shard (GetShardInfo
// of each job it lists) to the default store's in `st.info`: the shard's size is all
// its stores'. A job store that cannot be read is the shard's error.
void AddJobStores(Session& s, ShardStats& st) {
  if (!st.info.has_value()) return;
  v1::GetShardInfoResponse& total = *st.info;
  for (const std::string& job : st.info->jobs()) {
    absl::StatusOr<v1::GetShardInfoResponse> of_job =
        s.client->GetShardInfo(st.shard.address(), job);
    if (!of_job.ok()) {
      st.error = of_job.status();
      st.info.reset();
      return;
    }
    total.set_stored_rows(total.stored_rows() + of_job->stored_rows());
    total.set_rows_in_memory(total.rows_in_memory() + of_job->rows_in_memory());
    total.set_memory_bytes(total.memory_bytes() + of_job->memory_bytes());
    total.set_disk_bytes(total.disk_bytes() + of_job->disk_bytes());
  }
}

// GetShardInfo of every shard, twice `sample` apart when sample > 0 (for QPS and p99),
// its size summed over its stores (AddJobStores).
std::vector<ShardStats> SampleShards(Session& s, const v1::ListShardsResponse& list,
                                     absl::Duration sample) {
  std::vector<ShardStats> stats = SampleDefaultStores(s, list, sample);
  for (ShardStats& st : stats) AddJobStores(s, st);
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

void DeclareStatus(FlagSet& flags, int64_t& sample_ms) {
  sample_ms = 1000;
  flags.Number("sample_ms", &sample_ms, "N", "interval between the two samples; 0: no QPS/p99")
      .Range(0, 600000);
}

absl::StatusOr<Runner> FinishStatus(const Args& args, const int64_t& sample_ms) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([sample_ms](Session& s) { return RunStatus(s, absl::Milliseconds(sample_ms)); });
}

absl::StatusOr<Runner> FinishShardsList(const Args& args, const NoFlags&) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
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

// --id=N, required.
void DeclareId(FlagSet& flags, uint32_t* id) {
  flags.Number("id", id, "N", "the shard").Required();
}

struct AddOptions {
  uint32_t id = 0;
  int64_t wait_ms = 30000;
  bool rebalance = false;
  v1::PlanRebalanceRequest::By by = v1::PlanRebalanceRequest::ROWS;
  std::optional<double> tolerance;
  MigrateFlags migrate;
  v1::PlanRebalanceRequest plan;  // --by (when given) and --tolerance, in FinishShardsAdd
};

void DeclareShardsAdd(FlagSet& flags, AddOptions& o) {
  DeclareId(flags, &o.id);
  flags.Number("wait_ms", &o.wait_ms, "N", "how long to wait").Min(0);
  flags.Bool("rebalance", &o.rebalance, "plan and run a rebalance afterwards");
  flags.Section("With --rebalance:");
  DeclareBy(flags, &o.by, "what the rebalance evens out");
  flags.Number("tolerance", &o.tolerance, "F", "stop within this fraction of the mean")
      .Min(0.0)
      .DefaultText("0.05");
  DeclareMigrateFlags(flags, &o.migrate, "print the plan only");
}

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

absl::StatusOr<Runner> FinishShardsAdd(const Args& args, const AddOptions& options) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  bool plan_flags = false;
  for (const char* name : {"by", "tolerance", "bytes_per_sec", "dry_run", "detach"}) {
    plan_flags |= args.parsed->Given(name);
  }
  if (plan_flags && !options.rebalance) {
    return absl::InvalidArgumentError(
        "--by, --tolerance, --bytes_per_sec, --dry_run and --detach need --rebalance");
  }
  AddOptions o = options;
  if (args.parsed->Given("by")) o.plan.set_by(o.by);
  if (o.tolerance.has_value()) o.plan.set_tolerance(*o.tolerance);
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

struct DrainOptions {
  uint32_t id = 0;
  MigrateFlags migrate;
};

void DeclareShardsDrain(FlagSet& flags, DrainOptions& o) {
  DeclareId(flags, &o.id);
  DeclareMigrateFlags(flags, &o.migrate, "print the plan only");
}

absl::StatusOr<Runner> FinishShardsDrain(const Args& args, const DrainOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([id = o.id, migrate = o.migrate](Session& s) {
    v1::PlanRebalanceRequest request;
    request.set_by(v1::PlanRebalanceRequest::SLOTS);
    request.add_drain(id);
    return PlanAndRun(s, request, absl::StrCat("drain shard ", id), migrate, nullptr);
  });
}

void DeclareShardsRemove(FlagSet& flags, uint32_t& id) { DeclareId(flags, &id); }

absl::StatusOr<Runner> FinishShardsRemove(const Args& args, const uint32_t& id) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([id](Session& s) -> absl::Status {
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
      Command(nullptr, "status", "",
              "Cluster overview: coordinator and epoch; per shard its address, state, slots,\n"
              "rows, memory and disk, QPS and p99 latency (two samples --sample_ms apart),\n"
              "fenced slots; jobs; the newest migration unless DONE.\n",
              DeclareStatus, FinishStatus),
      Command("shards", "list", "", "The shard table of `status`, without sampling.\n",
              DeclareNoFlags, FinishShardsList),
      Command("shards", "add", "",
              "Waits until shard N (an ember-ps started with --shard_id=N) has registered and is\n"
              "ALIVE; with --rebalance then moves slots to even out the cluster.\n",
              DeclareShardsAdd, FinishShardsAdd),
      Command("shards", "drain", "",
              "Moves every slot of shard N to the other alive shards (evenly by slot count).\n",
              DeclareShardsDrain, FinishShardsDrain),
      Command("shards", "remove", "",
              "Forgets shard N. Fails (FAILED_PRECONDITION) while it owns slots: drain it first.\n",
              DeclareShardsRemove, FinishShardsRemove),
  };
}

}  // namespace ember::ctl
