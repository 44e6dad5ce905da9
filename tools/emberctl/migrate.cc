// Copyright 2026 The Ember Authors.

#include "tools/emberctl/migrate.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/slot_ranges.h"
#include "common/status_macros.h"

namespace ember::ctl {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(250);
// How long the follower keeps retrying an unreachable coordinator (it resumes
// migrations after a restart, so a short outage should not end the follow).
constexpr absl::Duration kUnreachableBound = absl::Seconds(30);
// Progress lines that only update counters come at most this often.
constexpr absl::Duration kCounterLineInterval = absl::Seconds(1);
constexpr size_t kPlanRangeChars = 40;

struct Balance {
  std::optional<double> max_mean_before;
  std::optional<double> max_mean_after;
  double mean_before = 0;
  double mean_after = 0;
};

struct PlanRow {
  uint32_t shard = 0;
  std::optional<v1::ShardWeight> before;
  std::optional<v1::ShardWeight> after;
};

std::map<uint32_t, PlanRow> JoinWeights(const v1::PlanRebalanceResponse& plan) {
  std::map<uint32_t, PlanRow> rows;
  for (const v1::ShardWeight& w : plan.before()) {
    rows[w.shard_id()].shard = w.shard_id();
    rows[w.shard_id()].before = w;
  }
  for (const v1::ShardWeight& w : plan.after()) {
    rows[w.shard_id()].shard = w.shard_id();
    rows[w.shard_id()].after = w;
  }
  return rows;
}

// Mean weight over the shards that keep slots, and max/mean (unknown when the mean is 0).
void MeanAndRatio(const std::map<uint32_t, PlanRow>& rows, const std::set<uint32_t>& drain,
                  bool after, double* mean, std::optional<double>* ratio) {
  double sum = 0, max = 0;
  int n = 0;
  for (const auto& [id, row] : rows) {
    if (drain.count(id) > 0) continue;
    const std::optional<v1::ShardWeight>& w = after ? row.after : row.before;
    const double weight = w.has_value() ? static_cast<double>(w->weight()) : 0.0;
    sum += weight;
    max = std::max(max, weight);
    ++n;
  }
  *mean = n > 0 ? sum / n : 0;
  if (*mean > 0) *ratio = max / *mean;
}

Balance ComputeBalance(const std::map<uint32_t, PlanRow>& rows, const std::set<uint32_t>& drain) {
  Balance b;
  MeanAndRatio(rows, drain, false, &b.mean_before, &b.max_mean_before);
  MeanAndRatio(rows, drain, true, &b.mean_after, &b.max_mean_after);
  return b;
}

std::string Percent(const std::optional<v1::ShardWeight>& w, double mean) {
  if (!w.has_value() || mean <= 0) return "-";
  return Fixed(100.0 * static_cast<double>(w->weight()) / mean, 1);
}

std::string Ratio(const std::optional<double>& r) { return r.has_value() ? Fixed(*r, 2) : "-"; }

void RangesJson(JsonWriter& j, const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges) {
  j.BeginArray();
  for (const v1::SlotRange& r : ranges) j.BeginArray().Uint(r.first()).Uint(r.last()).EndArray();
  j.EndArray();
}

// A progress line when the phase or move changed, or counters changed (at most once a
// second). `last` is the state of the previous line.
struct Progress {
  std::optional<v1::Migration> last;
  absl::Time last_time;
};

void MaybePrintProgress(Session& s, const v1::Migration& m, Progress* p) {
  const absl::Time now = absl::Now();
  bool print = !p->last.has_value() || p->last->phase() != m.phase() ||
               p->last->move() != m.move() || p->last->restarts() != m.restarts() ||
               p->last->error() != m.error();
  const bool counters = p->last.has_value() && (p->last->rows_copied() != m.rows_copied() ||
                                                p->last->bytes_copied() != m.bytes_copied());
  if (!print && counters && now - p->last_time >= kCounterLineInterval) print = true;
  if (!print) return;
  std::string line = absl::StrCat(
      "[", m.op_id(), "] move ", std::min<uint32_t>(m.move() + 1, m.spec().moves_size()), "/",
      m.spec().moves_size(), " ", PhaseName(m.phase()), " ", m.rows_copied(), " rows ",
      Megabytes(static_cast<double>(m.bytes_copied())));
  if (p->last.has_value() && m.bytes_copied() >= p->last->bytes_copied()) {
    const double secs = absl::ToDoubleSeconds(now - p->last_time);
    if (secs > 0) {
      absl::StrAppend(
          &line, " ",
          Megabytes(static_cast<double>(m.bytes_copied() - p->last->bytes_copied()) / secs), "/s");
    }
  }
  if (m.restarts() > 0) absl::StrAppend(&line, " restarts=", m.restarts());
  if (!m.error().empty()) absl::StrAppend(&line, " error: ", m.error());
  *s.err << line << std::endl;
  p->last = m;
  p->last_time = now;
}

void WriteJsonAndExtra(JsonWriter& j, const JsonExtra& extra) {
  j.BeginObject();
  if (extra) extra(j);
}

}  // namespace

void DeclareMigrateFlags(FlagSet& flags, MigrateFlags* migrate, absl::string_view dry_run_help) {
  flags.Number("bytes_per_sec", &migrate->bytes_per_sec, "N", "copy throttle; 0: unthrottled");
  flags.Bool("dry_run", &migrate->dry_run, dry_run_help);
  flags.Bool("detach", &migrate->detach, "start the migration and return with its op id");
}

std::string PhaseName(v1::Migration::Phase phase) {
  const std::string& name = v1::Migration::Phase_Name(phase);
  return name.empty() ? absl::StrCat("PHASE_", static_cast<int>(phase)) : name;
}

bool Finished(v1::Migration::Phase phase) {
  return phase == v1::Migration::DONE || phase == v1::Migration::CANCELLED ||
         phase == v1::Migration::FAILED;
}

absl::Status Outcome(const v1::Migration& m) {
  if (m.phase() == v1::Migration::FAILED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "migration ", m.op_id(), " FAILED: ", m.error(), " (`emberctl migrations resume ",
        m.op_id(), "` resumes it, `emberctl migrations cancel ", m.op_id(), "` rolls it back)"));
  }
  if (m.phase() == v1::Migration::CANCELLED) {
    return absl::CancelledError(absl::StrCat("migration ", m.op_id(), " was CANCELLED after ",
                                             m.moves_done(), " of ", m.spec().moves_size(),
                                             " moves"));
  }
  return absl::OkStatus();
}

std::string SummaryText(const v1::Migration& m) {
  std::string out = absl::StrCat("migration ", m.op_id(), " ", PhaseName(m.phase()));
  if (!m.spec().reason().empty()) absl::StrAppend(&out, ": ", m.spec().reason());
  out += "\n";
  auto line = [&](absl::string_view key, const std::string& value) {
    absl::StrAppend(&out, absl::StrFormat("  %-14s%s\n", key, value));
  };
  line("moves", absl::StrCat(m.moves_done(), "/", m.spec().moves_size()));
  line("rows copied", absl::StrCat(m.rows_copied()));
  line("bytes copied", m.bytes_copied() < 1000000
                           ? absl::StrCat(m.bytes_copied())
                           : absl::StrCat(m.bytes_copied(), " (",
                                          Megabytes(static_cast<double>(m.bytes_copied())), ")"));
  line("seconds", Fixed(m.seconds(), 1));
  line("epoch",
       absl::StrCat(m.epoch_before(), " -> ",
                    m.epoch_after() == 0 ? std::string("-") : absl::StrCat(m.epoch_after())));
  line("max fence ms", Fixed(m.max_fence_ms(), 1));
  if (m.spec().bytes_per_sec() > 0) {
    line("throttle", Megabytes(static_cast<double>(m.spec().bytes_per_sec())) + "/s");
  }
  if (m.restarts() > 0) line("restarts", absl::StrCat(m.restarts()));
  if (m.cancel_requested()) line("cancel", "requested");
  if (!m.who().empty()) line("who", m.who());
  if (!m.error().empty()) line("error", m.error());
  return out;
}

std::string PlanText(const v1::PlanRebalanceResponse& plan, const std::set<uint32_t>& drain) {
  uint64_t slots = 0;
  for (const v1::SlotMove& m : plan.spec().moves()) slots += CountSlots(m.ranges());
  std::string out = absl::StrCat("plan for epoch ", plan.epoch(), ": ");
  if (plan.spec().moves_size() == 0) {
    out += "balanced, no moves\n";
  } else {
    absl::StrAppend(&out, plan.spec().moves_size(), " moves, ", slots, " slots\n");
    TextTable moves({"MOVE", "SOURCE", "TARGET", "SLOTS", "RANGES", "WEIGHT"});
    int i = 0;
    for (const v1::SlotMove& m : plan.spec().moves()) {
      moves.AddRow({absl::StrCat(++i), absl::StrCat(m.source()), absl::StrCat(m.target()),
                    absl::StrCat(CountSlots(m.ranges())), FormatRanges(m.ranges(), kPlanRangeChars),
                    absl::StrCat(m.weight())});
    }
    out += moves.Render();
  }
  const std::map<uint32_t, PlanRow> rows = JoinWeights(plan);
  const Balance b = ComputeBalance(rows, drain);
  TextTable shards({"SHARD", "SLOTS_BEFORE", "WEIGHT_BEFORE", "%MEAN_BEFORE", "SLOTS_AFTER",
                    "WEIGHT_AFTER", "%MEAN_AFTER"});
  auto cell = [](const std::optional<v1::ShardWeight>& w, bool weight) {
    if (!w.has_value()) return std::string("-");
    return absl::StrCat(weight ? w->weight() : w->slots());
  };
  for (const auto& [id, row] : rows) {
    const bool drained = drain.count(id) > 0;
    shards.AddRow({absl::StrCat(id, drained ? " (drain)" : ""), cell(row.before, false),
                   cell(row.before, true), drained ? "-" : Percent(row.before, b.mean_before),
                   cell(row.after, false), cell(row.after, true),
                   drained ? "-" : Percent(row.after, b.mean_after)});
  }
  out += "\n";
  out += shards.Render();
  absl::StrAppend(&out, "max/mean: before ", Ratio(b.max_mean_before), ", after ",
                  Ratio(b.max_mean_after), "\n");
  return out;
}

void PlanJson(JsonWriter& j, const v1::PlanRebalanceResponse& plan,
              const std::set<uint32_t>& drain) {
  j.BeginObject().Key("epoch").Uint(plan.epoch()).Key("moves").BeginArray();
  for (const v1::SlotMove& m : plan.spec().moves()) {
    j.BeginObject()
        .Key("source")
        .Uint(m.source())
        .Key("target")
        .Uint(m.target())
        .Key("slots")
        .Uint(CountSlots(m.ranges()))
        .Key("ranges");
    RangesJson(j, m.ranges());
    j.Key("weight").Uint(m.weight()).EndObject();
  }
  j.EndArray().Key("shards").BeginArray();
  const std::map<uint32_t, PlanRow> rows = JoinWeights(plan);
  for (const auto& [id, row] : rows) {
    j.BeginObject().Key("shard_id").Uint(id).Key("drain").Bool(drain.count(id) > 0);
    auto weights = [&](const char* slots_key, const char* weight_key,
                       const std::optional<v1::ShardWeight>& w) {
      j.Key(slots_key);
      w.has_value() ? j.Uint(w->slots()) : j.Null();
      j.Key(weight_key);
      w.has_value() ? j.Uint(w->weight()) : j.Null();
    };
    weights("slots_before", "weight_before", row.before);
    weights("slots_after", "weight_after", row.after);
    j.EndObject();
  }
  const Balance b = ComputeBalance(rows, drain);
  j.EndArray().Key("max_mean_before");
  b.max_mean_before.has_value() ? j.Double(*b.max_mean_before) : j.Null();
  j.Key("max_mean_after");
  b.max_mean_after.has_value() ? j.Double(*b.max_mean_after) : j.Null();
  j.EndObject();
}

absl::StatusOr<v1::Migration> Follow(Session& s, const std::string& op_id) {
  Progress progress;
  absl::Time unreachable_since = absl::InfiniteFuture();
  while (true) {
    absl::StatusOr<v1::Migration> m = s.client->GetMigration(op_id);
    if (m.ok()) {
      unreachable_since = absl::InfiniteFuture();
      MaybePrintProgress(s, *m, &progress);
      if (Finished(m->phase())) return *m;
    } else if (m.status().code() == absl::StatusCode::kUnavailable ||
               m.status().code() == absl::StatusCode::kDeadlineExceeded) {
      if (unreachable_since == absl::InfiniteFuture()) {
        unreachable_since = absl::Now();
        *s.err << "[" << op_id << "] coordinator unreachable, retrying: " << m.status()
               << std::endl;
      } else if (absl::Now() - unreachable_since > kUnreachableBound) {
        return absl::Status(m.status().code(),
                            absl::StrCat(m.status().message(), " (migration ", op_id,
                                         " may still be running on the coordinator)"));
      }
    } else {
      return m.status();
    }
    if (!SleepUnlessInterrupted(kPollInterval)) {
      return absl::CancelledError(absl::StrCat(
          "interrupted: migration ", op_id,
          " keeps running on the coordinator; follow it with `emberctl migrations wait ", op_id,
          "` or stop it with `emberctl migrations cancel ", op_id, "`"));
    }
  }
}

absl::Status StartAndReport(Session& s, const v1::MigrationSpec& spec, const MigrateFlags& flags,
                            const JsonExtra& extra) {
  // From before the start: a Ctrl-C during StartMigration also leaves it running.
  std::optional<InterruptScope> scope;
  if (!flags.detach) scope.emplace();
  EMBER_ASSIGN_OR_RETURN(v1::Migration started, s.client->StartMigration(spec));
  v1::Migration m = started;
  if (!flags.detach) {
    *s.err << "[" << started.op_id() << "] started (" << spec.moves_size()
           << " moves); Ctrl-C stops following, not the migration" << std::endl;
    EMBER_ASSIGN_OR_RETURN(m, Follow(s, started.op_id()));
  }
  if (s.options.json) {
    JsonWriter j;
    WriteJsonAndExtra(j, extra);
    j.Key("detached").Bool(flags.detach).Key("migration").Proto(m).EndObject();
    PrintJson(s, j);
  } else if (flags.detach) {
    *s.out << "started migration " << m.op_id() << " (" << PhaseName(m.phase())
           << "); follow it with `emberctl migrations wait " << m.op_id() << "`\n";
  } else {
    *s.out << SummaryText(m);
  }
  return flags.detach ? absl::OkStatus() : Outcome(m);
}

absl::Status PlanAndRun(Session& s, const v1::PlanRebalanceRequest& request,
                        const std::string& reason, const MigrateFlags& flags,
                        const JsonExtra& extra) {
  // The same command re-run (after a crash or Ctrl-C of the CLI, or after the
  // operation stopped FAILED): resume the unfinished operation it started instead of
  // planning anew over a half-moved cluster.
  if (!flags.dry_run) {
    absl::StatusOr<v1::Migration> last = s.client->GetMigration("");
    if (last.ok() && last->spec().reason() == reason && last->phase() != v1::Migration::DONE &&
        last->phase() != v1::Migration::CANCELLED) {
      *s.err << "[" << last->op_id() << "] resuming the unfinished " << reason << " ("
             << PhaseName(last->phase()) << ")" << std::endl;
      return StartAndReport(s, last->spec(), flags, extra);
    }
  }
  EMBER_ASSIGN_OR_RETURN(v1::PlanRebalanceResponse plan, s.client->PlanRebalance(request));
  const std::set<uint32_t> drain(request.drain().begin(), request.drain().end());
  const bool run = !flags.dry_run && plan.spec().moves_size() > 0;
  if (!run) {
    if (s.options.json) {
      JsonWriter j;
      WriteJsonAndExtra(j, extra);
      j.Key("plan");
      PlanJson(j, plan, drain);
      j.Key("dry_run").Bool(flags.dry_run).Key("migration").Null().EndObject();
      PrintJson(s, j);
    } else {
      *s.out << PlanText(plan, drain);
      if (plan.spec().moves_size() > 0) *s.out << "dry run: nothing started\n";
    }
    return absl::OkStatus();
  }
  if (!s.options.json) *s.out << PlanText(plan, drain) << "\n" << std::flush;
  v1::MigrationSpec spec = plan.spec();
  spec.set_reason(reason);
  spec.set_bytes_per_sec(flags.bytes_per_sec);
  return StartAndReport(s, spec, flags, [&](JsonWriter& j) {
    if (extra) extra(j);
    j.Key("plan");
    PlanJson(j, plan, drain);
  });
}

}  // namespace ember::ctl
