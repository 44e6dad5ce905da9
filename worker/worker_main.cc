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
// failed (the message says which stage), 2 bad flags or a bad config.

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "worker/model/model_config.h"
#include "worker/training/trainer.h"

namespace ember::worker {
namespace {

constexpr char kUsage[] =
    R"(usage: ember-worker --config=FILE --coordinator=HOST:PORT [--flag=value ...]

  --config=FILE              model config (text proto, or JSON if FILE ends in .json).
                             Required.
  --coordinator=HOST:PORT    the coordinator (cluster map, tables, rendezvous).
                             Default: $EMBER_COORDINATOR. Required.
  --rank=N                   this worker's rank. Default: $EMBER_RANK, else
                             $JOB_COMPLETION_INDEX, else 0
  --world_size=N             number of workers. Default: $EMBER_WORLD_SIZE, else 1
  --generation=N             rendezvous generation (bump it to restart a job). Default: 0
  --collective_host=ADDR     the address other workers reach this one at for the
                             all-reduce (Gloo TCP; a pod's IP). Default:
                             $EMBER_COLLECTIVE_HOST, else 127.0.0.1
  --run_dir=DIR              where rank 0 writes result.json, metrics.tsv and
                             training.svg. Default: none
  --metrics_port=N           Prometheus metrics port; 0 picks one, -1 none. Default: -1
  --metrics_host=ADDR        metrics bind address. Default: 127.0.0.1
  --device=cpu|cuda          where the dense tower runs. cuda: cuBLAS + Ember's kernels
                             on one GPU, dense gradients all-reduced with NCCL.
                             Default: cpu
  --dense_precision=P        fp32, tf32 or bf16 (bf16 operands, fp32 master weights);
                             tf32 and bf16 need --device=cuda. Default: fp32
  --cuda_device=N            the GPU's ordinal. Default: $EMBER_CUDA_DEVICE, else 0
  --ps_deadline_ms=N         budget of one pull/push, retries included. Default: 30000
  --collective_timeout_ms=N  rendezvous and all-reduce deadline: a dead peer fails the
                             job within about this long. Default: 60000
  --skip_eval                no test-set evaluation
  --resume_from=NAME         a new run starts from checkpoint NAME of the job, or
                             "latest"; empty: from the PS shards' rows. Default: ""
  --max_recoveries=N         failed attempts this worker rejoins before giving up.
                             Default: 100
  --recovery_timeout_ms=N    longest wait for a recovery or a checkpoint.
                             Default: 600000
Overrides of the config's training section (for experiments and benchmarks):
  --train=PATH --test=PATH   data paths
  --batch_size=N --epochs=N --max_steps=N --eval_every_steps=N --log_every_steps=N
  --consistency=bsp|ssp|asp --staleness=N
  --checkpoint_every_steps=N --checkpoint_every_seconds=N
Overrides of the config's skew section (model.proto SkewConfig; all off by default):
  --cold_features=F1,F2      features whose ID counts decide which examples are cold
  --cold_max_count=N         an ID is cold below this estimated cluster-wide count
  --cold_loss_weight=W       loss weight of cold examples (1 = off)
  --cold_resample_fraction=F replay buffered cold examples, up to F x batch_size per
                             batch (0 = off)
  --hot_cache_steps=N        reuse pulled hot rows for up to N steps (SSP/ASP; 0 = off)
  --help                     this text
)";

// Reads an integer from the environment, or keeps *out.
absl::Status FromEnv(const char* name, int* out) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return absl::OkStatus();
  Flag flag{name, value, true};
  return ParseNumber(flag, out);
}

absl::StatusOr<TrainerOptions> ParseFlags(const std::vector<Flag>& flags) {
  TrainerOptions o;
  std::string config_path, train, test, consistency;
  int64_t ps_deadline_ms = 30000, collective_timeout_ms = 60000;
  int rank = -1, world_size = -1, cuda_device = -1;
  int64_t batch_size = -1, epochs = -1, max_steps = -1, eval_every = -1, log_every = -1;
  int64_t staleness = -1, checkpoint_steps = -1, checkpoint_seconds = -1;
  int64_t recovery_timeout_ms = 600000;
  // Skew overrides; unset unless given.
  std::optional<std::string> cold_features;
  std::optional<uint64_t> cold_max_count;
  std::optional<float> cold_loss_weight, cold_resample_fraction;
  std::optional<uint32_t> hot_cache_steps;
  auto number = [](const Flag& flag, auto* out) -> absl::Status {
    out->emplace();
    return ParseNumber(flag, &**out);
  };
  TlsOptions tls;
  bool collective_host_given = false;
  for (const Flag& flag : flags) {
    const absl::string_view name = flag.name;
    if (name == "config") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &config_path));
    } else if (name == "coordinator") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.coordinator_address));
    } else if (name == "collective_host") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.collective_host));
      collective_host_given = true;
    } else if (absl::Status s; ParseTlsFlag(flag, &tls, &s)) {
      EMBER_RETURN_IF_ERROR(s);
    } else if (name == "rank") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &rank));
    } else if (name == "world_size") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &world_size));
    } else if (name == "generation") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.generation));
    } else if (name == "run_dir") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.run_dir));
    } else if (name == "metrics_port") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.metrics_port));
    } else if (name == "metrics_host") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.metrics_host));
    } else if (name == "ps_deadline_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &ps_deadline_ms));
    } else if (name == "collective_timeout_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &collective_timeout_ms));
    } else if (name == "skip_eval") {
      EMBER_RETURN_IF_ERROR(ParseBool(flag, &o.skip_eval));
    } else if (name == "train") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &train));
    } else if (name == "test") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &test));
    } else if (name == "batch_size") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &batch_size));
    } else if (name == "epochs") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &epochs));
    } else if (name == "max_steps") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &max_steps));
    } else if (name == "eval_every_steps") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &eval_every));
    } else if (name == "log_every_steps") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &log_every));
    } else if (name == "consistency") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &consistency));
    } else if (name == "staleness") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &staleness));
    } else if (name == "checkpoint_every_steps") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &checkpoint_steps));
    } else if (name == "checkpoint_every_seconds") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &checkpoint_seconds));
    } else if (name == "resume_from") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.resume_from));
    } else if (name == "max_recoveries") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.max_recoveries));
    } else if (name == "recovery_timeout_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &recovery_timeout_ms));
    } else if (name == "cold_features") {
      cold_features.emplace();
      EMBER_RETURN_IF_ERROR(ParseString(flag, &*cold_features));
    } else if (name == "cold_max_count") {
      EMBER_RETURN_IF_ERROR(number(flag, &cold_max_count));
    } else if (name == "cold_loss_weight") {
      EMBER_RETURN_IF_ERROR(number(flag, &cold_loss_weight));
    } else if (name == "cold_resample_fraction") {
      EMBER_RETURN_IF_ERROR(number(flag, &cold_resample_fraction));
    } else if (name == "hot_cache_steps") {
      EMBER_RETURN_IF_ERROR(number(flag, &hot_cache_steps));
    } else if (name == "device") {
      std::string device;
      EMBER_RETURN_IF_ERROR(ParseString(flag, &device));
      EMBER_ASSIGN_OR_RETURN(o.dense_device.device, ParseDenseDevice(device));
    } else if (name == "dense_precision") {
      std::string precision;
      EMBER_RETURN_IF_ERROR(ParseString(flag, &precision));
      EMBER_ASSIGN_OR_RETURN(o.dense_device.precision, ParseDensePrecision(precision));
    } else if (name == "cuda_device") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &cuda_device));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  if (config_path.empty()) return absl::InvalidArgumentError("--config is required");
  if (const char* env = std::getenv("EMBER_COLLECTIVE_HOST");
      !collective_host_given && env != nullptr && *env != '\0') {
    o.collective_host = env;
  }
  if (o.collective_host.empty()) return absl::InvalidArgumentError("--collective_host is empty");
  if (o.coordinator_address.empty()) {
    if (const char* env = std::getenv("EMBER_COORDINATOR"); env != nullptr) {
      o.coordinator_address = env;
    }
  }
  if (o.coordinator_address.empty()) {
    return absl::InvalidArgumentError("--coordinator (or $EMBER_COORDINATOR) is required");
  }
  if (rank < 0) {
    rank = 0;
    EMBER_RETURN_IF_ERROR(FromEnv("JOB_COMPLETION_INDEX", &rank));
    EMBER_RETURN_IF_ERROR(FromEnv("EMBER_RANK", &rank));
  }
  if (world_size < 0) {
    world_size = 1;
    EMBER_RETURN_IF_ERROR(FromEnv("EMBER_WORLD_SIZE", &world_size));
  }
  if (world_size < 1) return absl::InvalidArgumentError("--world_size must be >= 1");
  if (cuda_device < 0) {
    cuda_device = 0;
    EMBER_RETURN_IF_ERROR(FromEnv("EMBER_CUDA_DEVICE", &cuda_device));
  }
  o.dense_device.cuda_device = cuda_device;
  if (o.dense_device.device == DenseDevice::kCpu &&
      o.dense_device.precision != DensePrecision::kFp32) {
    return CheckDenseDevice(o.dense_device);  // explains that the CPU computes in fp32
  }
  if (rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank=", rank, " must be below --world_size=", world_size));
  }
  o.rank = rank;
  o.world_size = world_size;
  if (ps_deadline_ms <= 0 || collective_timeout_ms <= 0) {
    return absl::InvalidArgumentError("--ps_deadline_ms and --collective_timeout_ms must be > 0");
  }
  if (o.max_recoveries < 0) return absl::InvalidArgumentError("--max_recoveries must be >= 0");
  if (recovery_timeout_ms <= 0) return absl::InvalidArgumentError("--recovery_timeout_ms must be > 0");
  o.recovery_timeout = absl::Milliseconds(recovery_timeout_ms);
  o.ps_deadline = absl::Milliseconds(ps_deadline_ms);
  o.collective_timeout = absl::Milliseconds(collective_timeout_ms);
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return absl::InvalidArgumentError("--metrics_port must be -1..65535");
  }

  EMBER_ASSIGN_OR_RETURN(const TlsCredentials credentials, TlsCredentials::Load(tls));
  if (credentials.enabled()) o.channel_credentials = credentials.Channel();
  EMBER_ASSIGN_OR_RETURN(v1::ModelConfig config, LoadModelConfig(config_path));
  v1::TrainingConfig* t = config.mutable_training();
  if (!train.empty()) config.mutable_data()->set_train_path(train);
  if (!test.empty()) config.mutable_data()->set_test_path(test);
  if (batch_size >= 0) t->set_batch_size(static_cast<uint32_t>(batch_size));
  if (epochs >= 0) t->set_epochs(static_cast<uint32_t>(epochs));
  if (max_steps >= 0) t->set_max_steps(static_cast<uint64_t>(max_steps));
  if (eval_every >= 0) t->set_eval_every_steps(static_cast<uint32_t>(eval_every));
  if (log_every >= 0) t->set_log_every_steps(static_cast<uint32_t>(log_every));
  if (staleness >= 0) t->set_staleness(static_cast<uint32_t>(staleness));
  if (checkpoint_steps >= 0) {
    config.mutable_checkpoint()->set_every_steps(static_cast<uint32_t>(checkpoint_steps));
  }
  if (checkpoint_seconds >= 0) {
    config.mutable_checkpoint()->set_every_seconds(static_cast<uint32_t>(checkpoint_seconds));
  }
  if (!consistency.empty()) {
    if (consistency == "bsp") {
      t->set_consistency(v1::TrainingConfig::BSP);
    } else if (consistency == "ssp") {
      t->set_consistency(v1::TrainingConfig::SSP);
    } else if (consistency == "asp") {
      t->set_consistency(v1::TrainingConfig::ASP);
    } else {
      return absl::InvalidArgumentError("--consistency must be bsp, ssp or asp");
    }
  }
  if (cold_features.has_value()) {
    v1::SkewConfig* skew = config.mutable_skew();
    skew->clear_cold_features();
    for (absl::string_view f : absl::StrSplit(*cold_features, ',', absl::SkipEmpty())) {
      skew->add_cold_features(std::string(f));
    }
  }
  if (cold_max_count.has_value()) config.mutable_skew()->set_cold_max_count(*cold_max_count);
  if (cold_loss_weight.has_value()) config.mutable_skew()->set_cold_loss_weight(*cold_loss_weight);
  if (cold_resample_fraction.has_value()) {
    config.mutable_skew()->set_cold_resample_fraction(*cold_resample_fraction);
  }
  if (hot_cache_steps.has_value()) config.mutable_skew()->set_hot_cache_steps(*hot_cache_steps);
  // The overrides are checked like the file itself.
  EMBER_ASSIGN_OR_RETURN(o.config, NormalizeModelConfig(std::move(config), config_path));
  return o;
}

absl::Status Run(const TrainerOptions& options) {
  // Before any rendezvous: a worker that cannot run its tower must not make its peers
  // wait for the collective's timeout.
  if (absl::Status s = CheckDenseDevice(options.dense_device); !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat("--device=", DenseDeviceName(options.dense_device.device), ": ", s.message()));
  }
  if (options.dense_device.device == DenseDevice::kCuda) {
    std::cout << "dense tower on "
              << DescribeCudaDevice(options.dense_device.cuda_device).value_or("?") << " ("
              << DensePrecisionName(options.dense_device.precision) << ")" << std::endl;
  }
  absl::StatusOr<TrainResult> result = Train(options);
  if (!result.ok()) return result.status();
  if (options.rank == 0 && !options.run_dir.empty()) {
    std::cout << "result: " << options.run_dir << "/result.json, plot: " << options.run_dir
              << "/training.svg" << std::endl;
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ember::worker

int main(int argc, char** argv) {
  static const std::string* const usage =
      new std::string(absl::StrCat(ember::worker::kUsage, ember::SecurityUsage(/*server=*/false)));
  return ember::RunMain<ember::worker::TrainerOptions>(
      "ember-worker", usage->c_str(), argc, argv, ember::worker::ParseFlags, ember::worker::Run);
}
