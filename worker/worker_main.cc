// Copyright 2026 The Ember Authors.
//
// ember-worker: one stateless training worker (worker/training/trainer.h).
//
//   ember-worker --config=configs/quickstart.pbtxt --coordinator=127.0.0.1:6000
//       --rank=0 --world_size=2 --run_dir=run/job1
//
// Rank, world size and the coordinator come from flags, or else from the environment
// (EMBER_RANK, then JOB_COMPLETION_INDEX as set by a Kubernetes Indexed Job;
// EMBER_WORLD_SIZE; EMBER_COORDINATOR), read here and nowhere else. Rank 0 prints
// progress to stdout and writes the run directory. Exit codes: 0 done, 1 the job
// failed (the message says which stage), 2 bad flags or a bad config, 75 the CUDA
// context is lost (worker/cuda/context_lost.h: restart the process).
//
// Elastic runs (docs/ARCHITECTURE.md "Elastic runs"): --workers=MIN:MAX instead of
// --rank and --world_size; the coordinator gives each attempt's ranks. SIGTERM then
// asks the worker to leave: it finishes its step, the run takes a checkpoint without
// it, and it exits 0 (a second SIGTERM ends it at once).

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/cluster_token.h"
#include "common/flags.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "worker/cuda/context_lost.h"
#include "worker/training/trainer.h"

namespace ember::worker {
namespace {

// The worker's flags: the trainer's options, and what main turns into them.
struct WorkerFlags {
  TrainerOptions trainer;
  std::string config_path;
  TlsOptions tls;
  std::string token_file;  // --cluster_token_file, else $EMBER_CLUSTER_TOKEN_FILE
  // Overrides of the config's training and skew sections; unset (or empty): the config's.
  std::string train, test;
  std::optional<uint32_t> batch_size, epochs, eval_every_steps, log_every_steps, staleness;
  std::optional<uint64_t> max_steps;
  std::optional<v1::TrainingConfig::Consistency> consistency;
  std::optional<uint32_t> checkpoint_every_steps, checkpoint_every_seconds;
  std::optional<std::string> cold_features;
  std::optional<uint64_t> cold_max_count;
  std::optional<float> cold_loss_weight, cold_resample_fraction;
  std::optional<uint32_t> hot_cache_steps;
  // Given or not: a fixed world (--rank, --world_size) or an elastic one (--workers).
  std::optional<int> rank, world_size;
  std::optional<std::string> workers;
};

// Set by SIGTERM in an elastic run: leave at the next step's checkpoint.
std::atomic<bool> leave_requested{false};

void OnSigterm(int) {
  if (leave_requested.exchange(true)) _exit(128 + SIGTERM);  // the second one: now
  static constexpr char kLine[] =
      "ember-worker: SIGTERM: leaving the run at the next step's checkpoint\n";
  [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, kLine, sizeof(kLine) - 1);
}

void DeclareFlags(FlagSet& flags, WorkerFlags& w) {
  TrainerOptions& o = w.trainer;
  flags.Synopsis("--config=FILE --coordinator=HOST:PORT [--flag=value ...]");
  flags.Description("One stateless training worker (worker/training/trainer.h).");
  flags
      .String("config", &w.config_path, "FILE",
              "model config (text proto, or JSON if FILE ends in .json)")
      .Required();
  flags
      .String("coordinator", &o.coordinator_address, "HOST:PORT",
              "the coordinator (cluster map, tables, rendezvous)")
      .Required()
      .Env({"EMBER_COORDINATOR"});
  flags.Number("rank", &w.rank, "N", "this worker's rank, below --world_size (default 0)")
      .Min(0)
      .Env({"EMBER_RANK", "JOB_COMPLETION_INDEX"});
  flags.Number("world_size", &w.world_size, "N", "number of workers (default 1)")
      .Min(1)
      .Env({"EMBER_WORLD_SIZE"});
  flags
      .String("workers", &w.workers, "MIN:MAX",
              "instead of --rank and --world_size: an elastic run of MIN to MAX workers that "
              "grows and shrinks at checkpoints as workers join and leave (SIGTERM: leave)")
      .Env({"EMBER_WORKERS"});
  flags
      .String("member", &o.member, "ID",
              "elastic: this worker's id in the run, unique per process (default: "
              "HOSTNAME-PID); new workers take ranks in the order of their ids")
      .Env({"EMBER_MEMBER"});
  flags.Number("join_at_step", &o.join_at_step, "N",
               "elastic: join the running attempt at a checkpoint at or after step N (0: the "
               "next one)");
  flags.Number("leave_at_step", &o.leave_at_step, "N",
               "elastic: leave the run at the checkpoint after step N, as SIGTERM does (0: "
               "never)");
  flags.Number("generation", &o.generation, "N",
               "the run's generation: a new run of a job needs a larger one (or use --run_id)");
  flags
      .String("run_id", &o.run_id, "ID",
              "instead of --generation: the run's id, shared by its workers and new for a new "
              "run (a Kubernetes Job's UID); the coordinator gives it a generation")
      .NonEmpty()
      .Env({"EMBER_RUN_ID"});
  flags
      .String("collective_host", &o.collective_host, "ADDR",
              "the address other workers reach this one at for the all-reduce (Gloo TCP; a "
              "pod's IP)")
      .NonEmpty()
      .Env({"EMBER_COLLECTIVE_HOST"});
  flags.String("run_dir", &o.run_dir, "DIR",
               "where rank 0 writes result.json, metrics.tsv and training.svg");
  flags
      .Number("metrics_port", &o.metrics_port, "N", "Prometheus metrics port; 0 picks one, -1 none")
      .Range(-1, 65535);
  flags.String("metrics_host", &o.metrics_host, "ADDR", "metrics bind address");
  flags.Choice<model::DenseDevice>(
      "device", &o.dense_device.device,
      {{"cpu", model::DenseDevice::kCpu}, {"cuda", model::DenseDevice::kCuda}},
      "where the dense tower runs. cuda: cuBLAS + Ember's kernels on one "
      "GPU, dense gradients all-reduced with NCCL");
  flags.Choice<DensePrecision>("dense_precision", &o.dense_device.precision,
                               {{"fp32", DensePrecision::kFp32},
                                {"tf32", DensePrecision::kTf32},
                                {"bf16", DensePrecision::kBf16}},
                               "the precision of the dense tower's products (bf16: bf16 "
                               "operands, fp32 master weights); tf32 and bf16 need "
                               "--device=cuda");
  flags.Number("cuda_device", &o.dense_device.cuda_device, "N", "the GPU's ordinal")
      .Min(0)
      .Env({"EMBER_CUDA_DEVICE"});
  flags.Millis("ps_deadline_ms", &o.ps_deadline, "budget of one pull/push, retries included")
      .Above(0);
  flags
      .Millis("collective_timeout_ms", &o.collective_timeout,
              "rendezvous and all-reduce deadline: a dead peer fails the job within about "
              "this long")
      .Above(0);
  flags.Bool("skip_eval", &o.skip_eval,
             "no test-set evaluation (rank 0's flag decides for every worker)");
  flags.String("eval_scores_file", &o.eval_scores_file, "PATH",
               "rank 0 writes the final evaluation's click probability of every test example "
               "there, one per line in test-file order (%.9g: float32 exactly)");
  flags.String("resume_from", &o.resume_from, "NAME",
               "a new run starts from checkpoint NAME of the job, or \"latest\"; empty: from "
               "the PS shards' rows");
  flags.Choice<v1::JoinJobRequest::StartRows>(
      "rows", &o.start_rows,
      {{"continue", v1::JoinJobRequest::START_ROWS_CONTINUE},
       {"fresh", v1::JoinJobRequest::START_ROWS_FRESH}},
      "a new run without --resume_from: continue trains on from the rows the PS tables "
      "hold, fresh empties every table first; required once any run trained on the "
      "cluster");
  flags.Bool("own_tables", &o.own_tables,
             "the job's tables are its own: a store of the job's on every PS shard, with its "
             "own attempts, restores and checkpoints, so that it trains beside other jobs on "
             "the cluster (every worker of a run says the same)");
  flags
      .Number("max_recoveries", &o.max_recoveries, "N",
              "failed attempts this worker rejoins before giving up")
      .Min(0);
  flags
      .Millis("recovery_timeout_ms", &o.recovery_timeout,
              "longest wait for a recovery or a checkpoint")
      .Above(0);

  flags.Section("Overrides of the config's training section (for experiments and benchmarks):");
  flags.String("train", &w.train, "PATH", "training data path");
  flags.String("test", &w.test, "PATH", "test data path");
  flags.Number("batch_size", &w.batch_size, "N", "examples per batch");
  flags.Number("epochs", &w.epochs, "N", "passes over the training data");
  flags.Number("max_steps", &w.max_steps, "N", "stop after this many steps");
  flags.Number("eval_every_steps", &w.eval_every_steps, "N", "evaluate every N steps");
  flags.Number("log_every_steps", &w.log_every_steps, "N", "log every N steps");
  flags.Choice<v1::TrainingConfig::Consistency>("consistency", &w.consistency,
                                                {{"bsp", v1::TrainingConfig::BSP},
                                                 {"ssp", v1::TrainingConfig::SSP},
                                                 {"asp", v1::TrainingConfig::ASP}},
                                                "the consistency model");
  flags.Number("staleness", &w.staleness, "N", "SSP's staleness bound");
  flags.Number("checkpoint_every_steps", &w.checkpoint_every_steps, "N",
               "a checkpoint every N steps");
  flags.Number("checkpoint_every_seconds", &w.checkpoint_every_seconds, "N",
               "a checkpoint every N seconds");

  flags.Section(
      "Overrides of the config's skew section (model.proto SkewConfig; all off by "
      "default):");
  flags.String("cold_features", &w.cold_features, "F1,F2",
               "features whose ID counts decide which examples are cold");
  flags.Number("cold_max_count", &w.cold_max_count, "N",
               "an ID is cold below this estimated cluster-wide count");
  flags.Number("cold_loss_weight", &w.cold_loss_weight, "W",
               "loss weight of cold examples (1 = off)");
  flags.Number("cold_resample_fraction", &w.cold_resample_fraction, "F",
               "replay buffered cold examples, up to F x batch_size per batch (0 = off)");
  flags.Number("hot_cache_steps", &w.hot_cache_steps, "N",
               "reuse pulled hot rows for up to N steps (SSP/ASP; 0 = off)");
  DeclareTlsFlags(flags, &w.tls);
  flags.String("cluster_token_file", &w.token_file, "FILE",
               "the cluster token, sent with every call (default: $EMBER_CLUSTER_TOKEN_FILE): a "
               "plaintext coordinator or shard started with one requires it of CreateTable and "
               "the rendezvous KvPut (docs/SECURITY.md)");
}

// --workers=MIN:MAX (elastic), exclusive with --rank and --world_size.
absl::Status ParseWorkerRange(WorkerFlags& w) {
  TrainerOptions& o = w.trainer;
  if (w.rank.has_value() || w.world_size.has_value()) {
    return absl::InvalidArgumentError(
        "--workers (an elastic run: the coordinator assigns ranks) and --rank/--world_size "
        "(a fixed world) exclude each other; with --workers, unset EMBER_RANK, "
        "JOB_COMPLETION_INDEX and EMBER_WORLD_SIZE too");
  }
  const std::vector<std::string> parts = absl::StrSplit(*w.workers, ':');
  uint32_t min = 0, max = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &min) || !absl::SimpleAtoi(parts[1], &max) ||
      min < 1 || min > max || max > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers=", *w.workers, ": expected MIN:MAX with 1 <= MIN <= MAX <= 4096 (e.g. 2:8)"));
  }
  o.min_workers = min;
  o.max_workers = max;
  if (o.member.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    o.member = absl::StrCat(host[0] != '\0' ? host : "worker", "-", getpid());
  }
  if (o.member.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("--member has ", o.member.size(), " bytes; at most 128"));
  }
  o.rank = 0;
  o.world_size = 1;
  o.leave_requested = &leave_requested;
  return absl::OkStatus();
}

// The checks of flags together, then the config with its overrides.
absl::Status FinishFlags(WorkerFlags& w) {
  TrainerOptions& o = w.trainer;
  if (o.dense_device.device == model::DenseDevice::kCpu &&
      o.dense_device.precision != DensePrecision::kFp32) {
    return CheckDenseDevice(o.dense_device);  // explains that the CPU computes in fp32
  }
  if (o.start_rows == v1::JoinJobRequest::START_ROWS_FRESH && !o.resume_from.empty()) {
    return absl::InvalidArgumentError(
        "--rows=fresh with --resume_from: the checkpoint's rows replace the PS rows anyway; "
        "give one of them");
  }
  if (!o.run_id.empty() && o.generation != 0) {
    return absl::InvalidArgumentError(
        "--run_id and --generation both name the run: give one of them");
  }
  if (o.run_id.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("--run_id has ", o.run_id.size(), " bytes; at most 128"));
  }
  if (w.workers.has_value()) {
    EMBER_RETURN_IF_ERROR(ParseWorkerRange(w));
  } else {
    if (!o.member.empty() || o.join_at_step != 0 || o.leave_at_step != 0) {
      return absl::InvalidArgumentError(
          "--member, --join_at_step and --leave_at_step are for elastic runs: give --workers");
    }
    o.rank = w.rank.value_or(0);
    o.world_size = w.world_size.value_or(1);
    if (o.rank >= o.world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rank=", o.rank, " must be below --world_size=", o.world_size));
    }
  }
  if (!o.eval_scores_file.empty()) {
    // Written at the very end: a directory that is not there must not cost a training run.
    const std::filesystem::path dir =
        std::filesystem::path(o.eval_scores_file).parent_path().empty()
            ? std::filesystem::path(".")
            : std::filesystem::path(o.eval_scores_file).parent_path();
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      return absl::InvalidArgumentError(absl::StrCat("--eval_scores_file=", o.eval_scores_file,
                                                     ": directory ", dir.string(),
                                                     " does not exist"));
    }
  }
  EMBER_ASSIGN_OR_RETURN(const TlsCredentials credentials, TlsCredentials::Load(w.tls));
  if (credentials.enabled()) o.channel_credentials = credentials.Channel();
  if (w.token_file.empty()) {
    if (const char* env = std::getenv("EMBER_CLUSTER_TOKEN_FILE")) w.token_file = env;
  }
  EMBER_ASSIGN_OR_RETURN(
      o.cluster_token,
      LoadClusterToken({.token = "", .token_file = w.token_file}, credentials.enabled()));
  EMBER_ASSIGN_OR_RETURN(v1::ModelConfig config, model::LoadModelConfig(w.config_path));
  v1::TrainingConfig* t = config.mutable_training();
  if (!w.train.empty()) config.mutable_data()->set_train_path(w.train);
  if (!w.test.empty()) config.mutable_data()->set_test_path(w.test);
  if (w.batch_size) t->set_batch_size(*w.batch_size);
  if (w.epochs) t->set_epochs(*w.epochs);
  if (w.max_steps) t->set_max_steps(*w.max_steps);
  if (w.eval_every_steps) t->set_eval_every_steps(*w.eval_every_steps);
  if (w.log_every_steps) t->set_log_every_steps(*w.log_every_steps);
  if (w.staleness) t->set_staleness(*w.staleness);
  if (w.consistency) t->set_consistency(*w.consistency);
  if (w.checkpoint_every_steps) {
    config.mutable_checkpoint()->set_every_steps(*w.checkpoint_every_steps);
  }
  if (w.checkpoint_every_seconds) {
    config.mutable_checkpoint()->set_every_seconds(*w.checkpoint_every_seconds);
  }
  v1::SkewConfig* skew = config.mutable_skew();
  if (w.cold_features) {
    skew->clear_cold_features();
    for (absl::string_view f : absl::StrSplit(*w.cold_features, ',', absl::SkipEmpty())) {
      skew->add_cold_features(std::string(f));
    }
  }
  if (w.cold_max_count) skew->set_cold_max_count(*w.cold_max_count);
  if (w.cold_loss_weight) skew->set_cold_loss_weight(*w.cold_loss_weight);
  if (w.cold_resample_fraction) skew->set_cold_resample_fraction(*w.cold_resample_fraction);
  if (w.hot_cache_steps) skew->set_hot_cache_steps(*w.hot_cache_steps);
  // The overrides are checked like the file itself.
  EMBER_ASSIGN_OR_RETURN(o.config, model::NormalizeModelConfig(std::move(config), w.config_path));
  if (o.max_workers > 0) {
    const v1::SkewConfig& skew = o.config.skew();
    if ((skew.has_cold_loss_weight() && skew.cold_loss_weight() != 1.0f) ||
        skew.cold_resample_fraction() > 0) {
      return absl::InvalidArgumentError(
          "--workers: an elastic run cannot use skew.cold_loss_weight or "
          "skew.cold_resample_fraction (per-worker state that does not carry over to another "
          "world size)");
    }
  }
  // A tower the device cannot run is a usage error (exit 2), found before any rendezvous.
  if (absl::Status s = CheckDenseTowerOnDevice(o.config.dense(), o.dense_device); !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat(w.config_path,
                     o.config.dense().tasks().empty() ? ": dense.interaction" : ": dense.tasks",
                     " with --device=", DenseDeviceName(o.dense_device.device), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status Run(const WorkerFlags& flags) {
  const TrainerOptions& options = flags.trainer;
  // Before any rendezvous: a worker that cannot run its tower must not make its peers
  // wait for the collective's timeout.
  if (absl::Status s = CheckDenseDevice(options.dense_device); !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat("--device=", DenseDeviceName(options.dense_device.device), ": ", s.message()));
  }
  if (options.dense_device.device == model::DenseDevice::kCuda) {
    std::cout << "dense tower on "
              << DescribeCudaDevice(options.dense_device.cuda_device).value_or("?") << " ("
              << DensePrecisionName(options.dense_device.precision) << ")" << std::endl;
  }
  if (options.max_workers > 0) {
    struct sigaction action = {};
    action.sa_handler = OnSigterm;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
  }
  absl::StatusOr<TrainResult> result = Train(options);
  if (!result.ok() && CudaContextLost()) {
    // Exit here, not through RunMain's exit 1: the supervisor restarts a worker that
    // exits 75, and the new process gets a new CUDA context. _exit: no static
    // destructors in a process whose CUDA context and NCCL threads are in a bad state.
    std::cerr << "ember-worker: " << result.status() << "; exiting " << kExitCudaContextLost
              << " (restart me)" << std::endl;
    std::cout.flush();
    _exit(kExitCudaContextLost);
  }
  if (!result.ok()) return result.status();
  if (result->left) return absl::OkStatus();
  if (result->rank == 0 && !options.run_dir.empty()) {
    std::cout << "result: " << options.run_dir << "/result.json, plot: " << options.run_dir
              << "/training.svg" << std::endl;
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ember::worker

int main(int argc, char** argv) {
  return ember::RunMain<ember::worker::WorkerFlags>(
      {"ember-worker", "worker", ember::worker::DeclareFlags, ember::worker::FinishFlags,
       ember::worker::Run},
      argc, argv);
}
