// Copyright 2026 The Ember Authors.
//
// `ember-bench elastic`: how long an elastic run (docs/ARCHITECTURE.md "Elastic runs")
// takes from a scale request to training at the new size, and its examples/s before
// and after.
//
// Scenario (every figure from this one run): ember-datagen data (--train_examples), a
// coordinator with checkpoints and 2 PS shards (SkewCluster), and the quickstart model,
// BSP, batch 512, no evaluation, progress reported every 5 steps.
//  1. Workers w1 and w2 start with --workers=1:4; the run trains at 2 workers until the
//     coordinator's progress (GetJob, polled every 20 ms) passes step 60: the rate of
//     that attempt is examples_per_sec_2_workers.
//  2. Scale up: worker w3 starts (the request). scale_up_seconds runs from its start to
//     the first progress report of the new 3-worker attempt past the resize step (the
//     run training at the new size); scale_up_cut_seconds to the resize being recorded
//     (the checkpoint cut). Then 60 more steps: examples_per_sec_3_workers.
//  3. Scale down: w3 gets SIGTERM. scale_down_seconds runs from the signal to the first
//     report of the 2-worker attempt past its resize step; then 60 more steps:
//     examples_per_sec_after. The workers are then stopped by the run's own end
//     (--max_steps) and must all exit 0; w3 exits 0 at its leave.
// On one 2-core machine 3 workers and 2 shards share the cores: more workers do not
// train faster here; the figures show the cost of a resize, not a speed-up.

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "tools/bench/cluster_fixtures.h"
#include "tools/bench/skew_cluster.h"
#include "tools/bench/suite.h"
#include "tools/harness/process.h"

namespace ember::bench {
namespace {

constexpr absl::Duration kTimeout = absl::Minutes(5);
constexpr uint64_t kStepsPerPhase = 60;

void Say(const std::string& line) { std::fprintf(stderr, "elastic: %s\n", line.c_str()); }

class ElasticRun {
 public:
  ElasticRun(std::string bin, std::string dir, std::string coordinator)
      : bin_(std::move(bin)),
        dir_(std::move(dir)),
        coordinator_(std::move(coordinator)),
        stub_(v1::CoordinatorService::NewStub(
            grpc::CreateChannel(coordinator_, grpc::InsecureChannelCredentials()))) {}

  // Starts worker `member` with the run's flags.
  absl::StatusOr<std::unique_ptr<Process>> StartWorker(const std::string& member,
                                                       const std::vector<std::string>& job) {
    std::vector<std::string> args = job;
    args.push_back(absl::StrCat("--coordinator=", coordinator_));
    args.push_back(absl::StrCat("--member=", member));
    return Process::Start(bin_ + "/ember-worker", args, "worker ", absl::Seconds(60));
  }

  absl::StatusOr<v1::GetJobResponse> GetJob() {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::GetJobRequest request;
    request.set_job("quickstart");
    v1::GetJobResponse job;
    EMBER_RETURN_IF_ERROR(FromGrpcStatus(stub_->GetJob(&context, request, &job), &context));
    return job;
  }

  // Polls GetJob until `done(job)`; NOT_FOUND before the job exists is waited out.
  absl::StatusOr<v1::GetJobResponse> Await(
      const std::string& what, const std::function<bool(const v1::GetJobResponse&)>& done) {
    const absl::Time deadline = absl::Now() + kTimeout;
    while (absl::Now() < deadline) {
      absl::StatusOr<v1::GetJobResponse> job = GetJob();
      if (job.ok() && done(*job)) return job;
      if (job.ok() && job->phase() == v1::GetJobResponse::FAILED) {
        return absl::InternalError(absl::StrCat("the job failed: ", job->failure()));
      }
      absl::SleepFor(absl::Milliseconds(20));  // polling pace
    }
    return absl::DeadlineExceededError(absl::StrCat("waiting for ", what));
  }

  // The first report of a running attempt of `workers` workers at least `steps` past
  // the attempt's first report.
  absl::StatusOr<v1::GetJobResponse> AwaitTrainingAt(uint32_t workers, uint64_t resizes,
                                                     uint64_t past_step) {
    return Await(absl::StrCat(workers, " workers training"), [&](const v1::GetJobResponse& j) {
      return j.phase() == v1::GetJobResponse::RUNNING && j.world_size() == workers &&
             j.resizes() == resizes && j.has_progress() && j.progress().attempt() == j.attempt() &&
             j.progress().step() > past_step;
    });
  }

 private:
  std::string bin_, dir_, coordinator_;
  std::unique_ptr<v1::CoordinatorService::Stub> stub_;
};

absl::StatusOr<Figures> RunElasticSuite(const BenchOptions& options) {
  const std::string bin = cluster::ExecutableDir();
  if (bin.empty()) return absl::InternalError("cannot read /proc/self/exe");
  const std::string scratch = options.dir.empty() ? "/tmp/ember-bench-elastic" : options.dir;
  std::filesystem::create_directories(scratch);
  const std::string data =
      absl::StrFormat("%s/data-%d-s%d", scratch, options.train_examples, options.seed);
  if (!std::filesystem::exists(data + "/oracle.json")) {
    Say("generating " + data);
    const std::string command =
        absl::StrCat(bin, "/ember-datagen --out=", data, " --train_examples=",
                     options.train_examples, " --seed=", options.seed, " > /dev/null");
    if (std::system(command.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("`", command, "` failed"));
    }
  }
  SkewCluster cluster(bin, scratch + "/cluster");
  EMBER_RETURN_IF_ERROR(cluster.Start(2, {"--elastic_settle_ms=3000"}));
  ElasticRun run(bin, scratch, cluster.coordinator_address());
  const std::vector<std::string> job = {
      absl::StrCat("--config=", EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt"),
      absl::StrCat("--train=", data, "/train"),
      absl::StrCat("--run_dir=", scratch, "/run"),
      "--workers=1:4",
      "--generation=1",
      "--batch_size=512",
      "--epochs=100",
      "--max_steps=100000",
      "--skip_eval",
      "--log_every_steps=5"};

  Say("2 workers");
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Process> w1, run.StartWorker("w1", job));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Process> w2, run.StartWorker("w2", job));
  EMBER_ASSIGN_OR_RETURN(v1::GetJobResponse two, run.AwaitTrainingAt(2, 0, kStepsPerPhase));
  const double before = two.progress().examples_per_sec();

  Say("scale up: a third worker");
  const absl::Time up = absl::Now();
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Process> w3, run.StartWorker("w3", job));
  EMBER_ASSIGN_OR_RETURN(v1::GetJobResponse cut,
                         run.Await("the resize", [](const v1::GetJobResponse& j) {
                           return j.resizes() >= 1;
                         }));
  const absl::Duration up_cut = absl::Now() - up;
  const uint64_t resize_step = cut.progress().step();
  EMBER_ASSIGN_OR_RETURN(v1::GetJobResponse three, run.AwaitTrainingAt(3, 1, resize_step));
  const absl::Duration up_total = absl::Now() - up;
  const uint64_t three_start = three.progress().step();
  EMBER_ASSIGN_OR_RETURN(three, run.AwaitTrainingAt(3, 1, three_start + kStepsPerPhase));
  const double at_three = three.progress().examples_per_sec();

  Say("scale down: SIGTERM to the third worker");
  const absl::Time down = absl::Now();
  if (kill(w3->pid(), SIGTERM) != 0) return absl::InternalError("kill(SIGTERM) failed");
  EMBER_ASSIGN_OR_RETURN(v1::GetJobResponse again,
                         run.AwaitTrainingAt(2, 2, three.progress().step()));
  const absl::Duration down_total = absl::Now() - down;
  EMBER_ASSIGN_OR_RETURN(int w3_code, w3->Wait(absl::Seconds(60)));
  if (w3_code != 0) return absl::InternalError(absl::StrCat("w3 exited ", w3_code));
  EMBER_ASSIGN_OR_RETURN(again, run.AwaitTrainingAt(2, 2, again.progress().step() + kStepsPerPhase));
  const double after = again.progress().examples_per_sec();
  // The run is not taken to its end: the suite ends by killing its two workers (a
  // SIGTERM would ask them to leave).
  w1->Kill().IgnoreError();
  w2->Kill().IgnoreError();

  Figures f;
  f.AddInt("train_examples", options.train_examples);
  f.AddInt("batch_size", 512);
  f.AddInt("shards", 2);
  f.AddInt("hardware_threads", std::thread::hardware_concurrency());
  f.AddNumber("examples_per_sec_2_workers", before);
  f.AddNumber("scale_up_cut_seconds", absl::ToDoubleSeconds(up_cut));
  f.AddNumber("scale_up_seconds", absl::ToDoubleSeconds(up_total));
  f.AddNumber("examples_per_sec_3_workers", at_three);
  f.AddNumber("scale_down_seconds", absl::ToDoubleSeconds(down_total));
  f.AddNumber("examples_per_sec_after", after);
  f.AddNumber("after_vs_before", before > 0 ? after / before : 0);
  f.AddInt("resizes", static_cast<int64_t>(again.resizes()));
  f.AddInt("recoveries", static_cast<int64_t>(again.recoveries()));
  return f;
}

}  // namespace

EMBER_BENCH_SUITE(elastic, "an elastic run scaled 2 -> 3 -> 2 workers: time to the new size",
                  RunElasticSuite);

}  // namespace ember::bench
