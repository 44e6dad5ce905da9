// Copyright 2026 The Ember Authors.
//
// emberctl `jobs list|describe|stop`: every training job the coordinator knows, with
// the progress its rank 0 reports (coordinator.proto JobProgress): step, share of the
// run done, examples/s, training loss, last test AUC and the time left; and ending a
// run whose workers are gone (admin.proto StopJob).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "tools/emberctl/admin_client.h"
#include "tools/emberctl/cli.h"
#include "tools/emberctl/output.h"

namespace ember::ctl {
namespace {

// "1h02m", "3m05s", "42s"; "-" unknown.
std::string Eta(const v1::JobProgress& p) {
  if (p.eta_seconds() < 0) return "-";
  const int64_t s = static_cast<int64_t>(p.eta_seconds() + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrCat(s, "s");
}

std::string Ratio(const v1::JobProgress& p) {
  return p.progress_ratio() > 0 || p.estimated_steps() > 0
             ? absl::StrFormat("%.1f%%", 100 * p.progress_ratio())
             : "-";
}

std::string Auc(const v1::JobProgress& p) {
  return p.has_test_auc() ? absl::StrFormat("%.4f", p.test_auc()) : "-";
}

absl::Status RunList(Session& s) {
  EMBER_ASSIGN_OR_RETURN(v1::ListJobsResponse jobs, s.client->ListJobs());
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("jobs").BeginArray();
    for (const v1::GetJobResponse& job : jobs.jobs()) j.Proto(job);
    j.EndArray().EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  *s.out << JobsText(jobs);
  return absl::OkStatus();
}

// The size of job store `tables_job` summed over the alive shards (GetShardInfo naming
// the job): "N rows (estimate), M in memory (BYTES), BYTES on disk, on K of S shards".
std::string StoreSize(Session& s, const std::string& tables_job) {
  absl::StatusOr<v1::ListShardsResponse> shards = s.client->ListShards();
  if (!shards.ok()) return absl::StrCat("- (", shards.status().message(), ")");
  uint64_t rows = 0, in_memory = 0, memory = 0, disk = 0;
  int alive = 0, holding = 0;
  for (const v1::ShardInfo& shard : shards->shards()) {
    if (shard.state() != v1::ShardInfo::ALIVE) continue;
    ++alive;
    absl::StatusOr<v1::GetShardInfoResponse> info =
        s.client->GetShardInfo(shard.address(), tables_job);
    if (absl::IsNotFound(info.status())) continue;  // no store of the job there yet
    if (!info.ok()) return absl::StrCat("- (", info.status().message(), ")");
    ++holding;
    rows += info->stored_rows();
    in_memory += info->rows_in_memory();
    memory += info->memory_bytes();
    disk += info->disk_bytes();
  }
  return absl::StrCat(rows, " rows (estimate), ", in_memory, " in memory (", HumanBytes(memory),
                      "), ", HumanBytes(disk), " on disk, on ", holding, " of ", alive,
                      " alive shards");
}

absl::Status RunDescribe(Session& s, const std::string& name) {
  EMBER_ASSIGN_OR_RETURN(v1::GetJobResponse job, s.client->GetJob(name));
  if (s.options.json) {
    JsonWriter j;
    j.Proto(job);
    PrintJson(s, j);
    return absl::OkStatus();
  }
  std::string out;
  auto line = [&out](absl::string_view key, absl::string_view value) {
    absl::StrAppend(&out, absl::StrFormat("%-18s %s\n", absl::StrCat(key, ":"), value));
  };
  line("job", job.job());
  line("phase", v1::GetJobResponse::Phase_Name(job.phase()));
  line("generation", absl::StrCat(job.generation()));
  line("attempt", absl::StrCat(job.attempt()));
  line("workers", absl::StrCat(job.world_size()));
  // Where the run's tables live on the shards (docs/OPERATIONS.md "Several jobs on one
  // cluster").
  line("tables", job.tables_job().empty()
                     ? std::string("shared")
                     : absl::StrCat("its own (store '", job.tables_job(), "' on every shard)"));
  if (!job.tables_job().empty()) line("store size", StoreSize(s, job.tables_job()));
  if (job.max_workers() > 0) {
    // Elastic runs: the range, the members by rank and the workers waiting for a place.
    line("worker range", absl::StrCat(job.min_workers(), " to ", job.max_workers(), " (elastic)"));
    line("members", job.members().empty() ? "- (forming)" : absl::StrJoin(job.members(), ", "));
    std::vector<std::string> pending;
    for (const v1::PendingWorker& w : job.pending()) {
      pending.push_back(w.join_at_step() > 0
                            ? absl::StrCat(w.member(), " (from step ", w.join_at_step(), ")")
                            : w.member());
    }
    line("waiting", pending.empty() ? "-" : absl::StrJoin(pending, ", "));
    line("resizes", absl::StrCat(job.resizes()));
  }
  line("recoveries", absl::StrCat(job.recoveries()));
  line("latest checkpoint", job.latest_checkpoint().empty() ? "-" : job.latest_checkpoint());
  line("restored from", job.restored_from().empty() ? "-" : job.restored_from());
  if (job.checkpoint_requested()) line("checkpoint", "requested, at the next step barrier");
  if (!job.failure().empty()) line("failure", job.failure());
  if (!job.has_progress()) {
    line("progress", "no report yet in this run");
  } else {
    const v1::JobProgress& p = job.progress();
    line("step", p.estimated_steps() > 0 ? absl::StrCat(p.step(), " of about ", p.estimated_steps())
                                         : absl::StrCat(p.step()));
    line("progress", Ratio(p));
    line("examples", absl::StrCat(p.examples()));
    line("examples/s", absl::StrFormat("%.0f", p.examples_per_sec()));
    line("train loss", absl::StrFormat("%.5f", p.train_loss()));
    line("test AUC", Auc(p));
    line("ETA", Eta(p));
    line("reported", absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                                                   absl::FromUnixMillis(p.reported_unix_ms()),
                                                   absl::UTCTimeZone()),
                                  " (attempt ", p.attempt(), ")"));
  }
  *s.out << out;
  return absl::OkStatus();
}

struct StopOptions {
  std::string reason;
};

void DeclareStop(FlagSet& flags, StopOptions& o) {
  flags.String("reason", &o.reason, "TEXT", "recorded as the job's failure (at most 256 bytes)");
}

absl::StatusOr<Runner> FinishStop(const Args& args, const StopOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 1, 1, "JOB"));
  return Runner([name = std::string(args.positionals[0]), reason = o.reason](Session& s) {
    EMBER_ASSIGN_OR_RETURN(v1::GetJobResponse job, s.client->StopJob(name, reason));
    if (s.options.json) {
      JsonWriter j;
      j.Proto(job);
      PrintJson(s, j);
    } else {
      *s.out << "job " << job.job() << " (generation " << job.generation() << ", attempt "
             << job.attempt() << "): " << v1::GetJobResponse::Phase_Name(job.phase()) << ", "
             << job.failure() << "\n";
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<Runner> FinishList(const Args& args, const NoFlags&) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner(RunList);
}

absl::StatusOr<Runner> FinishDescribe(const Args& args, const NoFlags&) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 1, 1, "JOB"));
  return Runner(
      [name = std::string(args.positionals[0])](Session& s) { return RunDescribe(s, name); });
}

}  // namespace

std::string JobsText(const v1::ListJobsResponse& jobs) {
  if (jobs.jobs_size() == 0) return "jobs: none\n";
  TextTable t({"JOB", "PHASE", "ATTEMPT", "WORKERS", "STEP", "PROGRESS", "EX/S", "LOSS", "AUC",
               "ETA", "LATEST_CHECKPOINT", "RECOVERIES"});
  std::string notes;
  for (const v1::GetJobResponse& job : jobs.jobs()) {
    const v1::JobProgress& p = job.progress();  // zeros without a report
    const bool reported = job.has_progress();
    t.AddRow(
        {job.job(), v1::GetJobResponse::Phase_Name(job.phase()), absl::StrCat(job.attempt()),
         absl::StrCat(job.world_size()), reported ? absl::StrCat(p.step()) : "-",
         reported ? Ratio(p) : "-", reported ? absl::StrFormat("%.0f", p.examples_per_sec()) : "-",
         reported ? absl::StrFormat("%.4f", p.train_loss()) : "-", Auc(p), reported ? Eta(p) : "-",
         job.latest_checkpoint().empty() ? "-" : job.latest_checkpoint(),
         absl::StrCat(job.recoveries())});
    if (!job.failure().empty())
      absl::StrAppend(&notes, "job ", job.job(), ": ", job.failure(), "\n");
  }
  return t.Render() + notes;
}

std::vector<CommandSpec> JobCommands() {
  return {
      Command("jobs", "list", "",
              "Every training job: phase, attempt, workers, and the progress its rank 0\n"
              "reports: step, share of the run done, examples/s, training loss, last test\n"
              "AUC and the time left at the current speed.\n",
              DeclareNoFlags, FinishList),
      Command("jobs", "describe", "JOB",
              "One job: its run, attempt, checkpoints, failure and progress; for an elastic\n"
              "run also its worker range, members by rank, waiting workers and resizes.\n",
              DeclareNoFlags, FinishDescribe),
      Command("jobs", "stop", "JOB",
              "Ends a running or recovering run of a job whose workers are gone or no\n"
              "longer wanted: it becomes FAILED, its workers' next join fails, and another\n"
              "job may start on the cluster (one training job at a time: the shards'\n"
              "attempt fence is cluster-wide). The shards keep their rows. Audited.\n",
              DeclareStop, FinishStop),
  };
}

}  // namespace ember::ctl
