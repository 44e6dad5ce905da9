// Copyright 2026 The Ember Authors.

#include "worker/trainer.h"

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/hash.h"
#include "common/ps_client.h"
#include "common/status_macros.h"
#include "worker/batch_pipeline.h"
#include "worker/collective/collective.h"
#include "worker/data/reader.h"
#include "worker/dense/dense_tower.h"
#include "worker/job_client.h"
#include "worker/model_config.h"
#include "worker/run_report.h"
#include "worker/sparse_exchange.h"
#include "worker/sparse_features.h"
#include "worker/worker_metrics.h"

namespace ember::worker {
namespace {

using v1::TrainingConfig;

// Adds the stage to an error's message, keeping its code.
absl::Status InStage(const absl::Status& s, absl::string_view stage) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(stage, ": ", s.message()));
}

// Training lines in the plain (non-gzip) files of a partition: a quick pre-pass for
// the progress ETA. 0 when unknown (a gzip file).
uint64_t CountLines(const std::vector<std::string>& files, bool header) {
  uint64_t total = 0;
  std::vector<char> buffer(1 << 20);
  for (const std::string& path : files) {
    if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) return 0;
    std::ifstream in(path, std::ios::binary);
    if (!in) return 0;
    uint64_t lines = 0;
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      const std::streamsize n = in.gcount();
      for (std::streamsize i = 0; i < n; ++i) lines += buffer[i] == '\n';
    }
    total += lines - (header && lines > 0 ? 1 : 0);
  }
  return total;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s / 60 % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

// A push in flight (SSP/ASP): the batch stays alive until its pushes complete.
struct InFlight {
  uint64_t step = 0;
  std::unique_ptr<PreparedBatch> batch;
  std::vector<PsHandle> handles;
};

class Trainer {
 public:
  // `recoveries`: attempts this worker rejoined before this one.
  Trainer(const TrainerOptions& options, JobClient* jobs, const v1::JoinJobResponse& join,
          uint64_t recoveries)
      : options_(options),
        jobs_(jobs),
        join_(join),
        config_(options.config),
        training_(options.config.training()),
        log_(options.log != nullptr ? *options.log : std::cout),
        layout_(SparseLayout::FromConfig(options.config)) {
    result_.attempt = join.attempt();
    result_.recoveries = recoveries;
    result_.resumed_from = join.checkpoint();
  }

  absl::StatusOr<TrainResult> Run();

 private:
  absl::Status Setup();
  absl::Status Loop();
  // One training step on `batch`; `global_examples` is the step's batch size summed
  // over workers. Takes ownership of the batch (kept alive by in-flight pushes).
  absl::Status Step(std::unique_ptr<PreparedBatch> batch, double global_examples);
  absl::Status PushSparse(std::unique_ptr<PreparedBatch> batch);
  absl::Status DrainPushes(size_t keep);
  absl::Status Finish();
  // Loads the dense model, step and counters of the checkpoint the attempt restored.
  absl::Status Restore(const v1::WorkerState& state);
  // A checkpoint at the current step barrier (every worker calls it at the same step).
  absl::Status TakeCheckpoint();
  // Rank 0: whether a checkpoint is due by time or was requested by an operator.
  bool CheckpointWanted();
  void MaybeLog(bool force);
  absl::Status MaybeEvaluate(bool final);
  bool rank0() const { return options_.rank == 0; }

  const TrainerOptions& options_;
  JobClient* const jobs_;
  const v1::JoinJobResponse& join_;
  const v1::ModelConfig& config_;
  const TrainingConfig& training_;
  std::ostream& log_;
  SparseLayout layout_;

  std::unique_ptr<PsClient> client_;
  std::unique_ptr<DenseTower> tower_;
  std::unique_ptr<DenseOptimizer> optimizer_;
  std::unique_ptr<Collective> collective_;
  std::unique_ptr<BatchPipeline> pipeline_;
  std::unique_ptr<WorkerMetrics> metrics_;

  std::vector<float> pooled_, d_pooled_, logits_, dlogits_, reduce_;
  std::vector<PsHandle> prefetch_;       // pulls of the batch at the pipeline's head
  PreparedBatch* prefetched_ = nullptr;  // that batch
  std::deque<InFlight> in_flight_;
  std::vector<OwnedGradients> owned_;

  uint64_t step_ = 0;
  int epoch_ = 0;
  absl::Time last_checkpoint_ = absl::Now();
  absl::Time next_poll_ = absl::Now() + absl::Seconds(1);
  bool checkpoint_next_ = false;  // agreed by the last step's all-reduce
  std::optional<uint64_t> checkpoint_step_;  // step of the last checkpoint taken
  uint64_t examples_ = 0;
  // The agreement on the next step (workers with a batch, their examples), carried by
  // the previous step's all-reduce; empty at the start of an epoch.
  std::optional<std::array<float, 2>> next_agreement_;
  uint64_t estimated_steps_ = 0;
  absl::Time start_;
  // Progress since the last line.
  double interval_loss_ = 0;
  double interval_examples_ = 0;
  std::vector<CurvePoint> curve_;
  // This worker's seconds in pull, compute, all-reduce and push (incl. BSP barrier).
  double stage_seconds_[4] = {0, 0, 0, 0};
  TrainResult result_;
};

absl::Status Trainer::Setup() {
  const int world = options_.world_size;
  if (world < 1 || options_.rank < 0 || options_.rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options_.rank, " is not in [0, world_size ", world, ")"));
  }
  if (options_.coordinator_address.empty()) {
    return absl::InvalidArgumentError("a coordinator address is required");
  }
  log_ << "worker " << options_.rank << "/" << world << " starting (pid " << getpid() << ")"
       << std::endl;
  if (options_.metrics_port >= 0) {
    EMBER_ASSIGN_OR_RETURN(metrics_,
                           WorkerMetrics::Start(options_.metrics_host, options_.metrics_port));
    if (rank0()) log_ << "worker metrics on " << metrics_->address() << std::endl;
  }

  // The PS cluster: wait (bounded) until the coordinator has a slot map.
  PsClientOptions ps;
  ps.coordinator_address = options_.coordinator_address;
  ps.worker_id = Mix64(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) ^
                       (static_cast<uint64_t>(getpid()) << 20) ^ options_.rank);
  ps.deadline = options_.ps_deadline;
  ps.attempt = join_.attempt();
  // A shard that just started may lag the coordinator's map by a heartbeat (it answers
  // UNAVAILABLE); keep retrying for a few seconds, always within the call's deadline.
  ps.max_retries = 12;
  const absl::Time cluster_deadline = absl::Now() + options_.collective_timeout;
  while (true) {
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(ps);
    if (client.ok()) {
      client_ = std::move(*client);
      break;
    }
    if (client.status().code() != absl::StatusCode::kUnavailable ||
        absl::Now() > cluster_deadline) {
      return InStage(client.status(), "connecting to the PS cluster");
    }
    absl::SleepFor(absl::Milliseconds(200));  // retry pacing, not event ordering
  }
  for (const v1::TableConfig& table : config_.tables()) {
    EMBER_RETURN_IF_ERROR(InStage(client_->CreateTableEverywhere(table),
                                  absl::StrCat("creating table ", table.name())));
  }

  const int num_dense = static_cast<int>(DenseColumns(config_).size());
  absl::StatusOr<std::unique_ptr<DenseTower>> tower =
      DenseTower::Create(config_.dense(), num_dense, layout_.FeatureDims());
  if (!tower.ok()) return InStage(tower.status(), "dense tower");
  tower_ = std::move(*tower);
  optimizer_ = DenseOptimizer::Create(config_.dense_optimizer(), tower_->parameters().size());

  CollectiveOptions collective;
  collective.coordinator_address = options_.coordinator_address;
  // Every attempt meets under its own name: attempts are unique across runs.
  collective.job = absl::StrCat(config_.name(), ".a", join_.attempt());
  collective.generation = options_.generation;
  collective.rank = options_.rank;
  collective.world_size = world;
  collective.timeout = options_.collective_timeout;
  absl::StatusOr<std::unique_ptr<Collective>> c = Collective::Connect(collective);
  if (!c.ok()) {
    return InStage(c.status(), absl::StrCat("worker rendezvous (job '", config_.name(),
                                            "', generation ", options_.generation,
                                            "; every run of a job on one coordinator needs its own "
                                            "--generation)"));
  }
  collective_ = std::move(*c);

  ReaderOptions reader_options;
  reader_options.rank = options_.rank;
  reader_options.world_size = world;
  absl::StatusOr<std::unique_ptr<DatasetReader>> reader =
      DatasetReader::Open(config_, config_.data().train_path(), reader_options);
  if (!reader.ok()) return InStage(reader.status(), "training data");
  const uint64_t lines =
      CountLines((*reader)->files(), config_.data().format() == v1::DataConfig::SCHEMA_TSV);
  const uint64_t per_rank =
      config_.data().partition_by() == "file" ? lines : lines / static_cast<uint64_t>(world);
  estimated_steps_ =
      (per_rank + training_.batch_size() - 1) / training_.batch_size() * training_.epochs();
  if (training_.max_steps() > 0 &&
      (estimated_steps_ == 0 || training_.max_steps() < estimated_steps_)) {
    estimated_steps_ = training_.max_steps();
  }
  std::optional<std::pair<int, ReaderPosition>> resume;
  if (!join_.checkpoint().empty()) {
    EMBER_RETURN_IF_ERROR(Restore(join_.state()));
    const v1::WorkerCursor& cursor = join_.state().cursors(options_.rank);
    resume.emplace(static_cast<int>(cursor.epoch()),
                   ReaderPosition{cursor.file_index(), cursor.line()});
  }
  pipeline_ = std::make_unique<BatchPipeline>(std::move(*reader), layout_, training_.batch_size(),
                                              training_.epochs(), /*depth=*/3, resume);
  log_ << "worker " << options_.rank << "/" << world << " ready" << std::endl;
  if (rank0()) {
    log_ << "training " << config_.name() << ": " << world << " worker(s), "
         << client_->slot_map().Shards().size() << " PS shard(s), "
         << TrainingConfig::Consistency_Name(training_.consistency()) << ", batch "
         << training_.batch_size() << " per worker, " << tower_->parameters().size()
         << " dense parameters"
         << (estimated_steps_ > 0 ? absl::StrCat(", about ", estimated_steps_, " steps") : "")
         << std::endl;
  }
  return absl::OkStatus();
}

absl::Status Trainer::DrainPushes(size_t keep) {
  while (in_flight_.size() > keep) {
    InFlight& oldest = in_flight_.front();
    absl::Status s = WaitAll(&oldest.handles);
    pipeline_->Recycle(std::move(oldest.batch));
    in_flight_.pop_front();
    EMBER_RETURN_IF_ERROR(InStage(s, "push"));
  }
  return absl::OkStatus();
}

absl::Status Trainer::PushSparse(std::unique_ptr<PreparedBatch> batch) {
  const int64_t step = static_cast<int64_t>(step_);
  const auto consistency = training_.consistency();
  if (consistency == TrainingConfig::BSP) {
    std::vector<PsHandle> handles;
    if (collective_->world_size() == 1) {
      for (int t = 0; t < batch->sparse.num_tables(); ++t) {
        const SparseBatch::TableData& table = batch->sparse.table(t);
        if (table.ids.empty()) continue;
        handles.push_back(client_->PushAsync(layout_.tables[t].name, table.ids, table.grads, step));
      }
    } else {
      EMBER_RETURN_IF_ERROR(
          InStage(ReduceSparseGradients(*collective_, batch->sparse, &owned_), "sparse exchange"));
      for (size_t t = 0; t < owned_.size(); ++t) {
        if (owned_[t].ids.empty()) continue;
        handles.push_back(
            client_->PushAsync(layout_.tables[t].name, owned_[t].ids, owned_[t].grads, step));
      }
    }
    absl::Status pushed = WaitAll(&handles);
    pipeline_->Recycle(std::move(batch));
    // Nobody pulls for the next step before every worker's push is applied: the next
    // step's agreement all-reduce (Loop) is the barrier.
    return InStage(pushed, "push");
  }
  InFlight flight;
  flight.step = step_;
  for (int t = 0; t < batch->sparse.num_tables(); ++t) {
    const SparseBatch::TableData& table = batch->sparse.table(t);
    if (table.ids.empty()) continue;
    flight.handles.push_back(
        client_->PushAsync(layout_.tables[t].name, table.ids, table.grads, step));
  }
  flight.batch = std::move(batch);
  in_flight_.push_back(std::move(flight));
  // SSP: pushes older than `staleness` steps must be applied before the next step;
  // every worker is within one step of the others (the dense all-reduce), so a pull
  // misses at most `staleness` steps of anyone's updates. ASP: bound memory only.
  return DrainPushes(consistency == TrainingConfig::SSP ? training_.staleness() - 1 : 4);
}

absl::Status Trainer::Step(std::unique_ptr<PreparedBatch> batch, double global_examples) {
  const absl::Time t0 = absl::Now();
  SparseBatch& sparse = batch->sparse;
  const ExampleBatch& ex = batch->examples;
  // Pull (or collect the prefetched pull) of this batch.
  if (prefetched_ == batch.get()) {
    EMBER_RETURN_IF_ERROR(InStage(WaitAll(&prefetch_), "pull"));
    prefetched_ = nullptr;
  } else {
    std::vector<PsHandle> handles;
    StartPulls(*client_, sparse, &handles);
    EMBER_RETURN_IF_ERROR(InStage(WaitAll(&handles), "pull"));
  }
  const absl::Time t1 = absl::Now();
  // SSP/ASP: the next batch's pull overlaps this step's compute and push.
  if (training_.consistency() != TrainingConfig::BSP) {
    absl::StatusOr<PreparedBatch*> next = pipeline_->Peek();
    if (next.ok() && *next != nullptr) {
      prefetched_ = *next;
      StartPulls(*client_, prefetched_->sparse, &prefetch_);
    }
  }

  const int b = ex.size;
  const int width = layout_.pooled_width;
  pooled_.resize(static_cast<size_t>(b) * width);
  d_pooled_.resize(pooled_.size());
  logits_.resize(b);
  dlogits_.resize(b);
  sparse.Pool(absl::MakeSpan(pooled_));
  tower_->Forward(b, ex.dense, pooled_, absl::MakeSpan(logits_));
  const float loss_sum =
      BceWithLogits(logits_, ex.labels, ex.weights, static_cast<float>(1.0 / global_examples),
                    absl::MakeSpan(dlogits_)) *
      static_cast<float>(global_examples);
  tower_->Backward(dlogits_, absl::MakeSpan(d_pooled_));
  sparse.Backward(d_pooled_);
  const absl::Time t2 = absl::Now();

  // Sparse gradients first: in BSP every worker's push is applied before the dense
  // all-reduce below returns anywhere, so that all-reduce is also the step barrier.
  EMBER_RETURN_IF_ERROR(PushSparse(std::move(batch)));
  const absl::Time t3 = absl::Now();

  // Dense gradients, all-reduced together with the step's loss sum and the agreement
  // on the next step (does every worker have a batch of this epoch, and how many
  // examples in all).
  absl::StatusOr<PreparedBatch*> next = pipeline_->Peek();
  if (!next.ok()) return InStage(next.status(), "training data");
  const bool has_next = *next != nullptr && (*next)->epoch == epoch_;
  absl::Span<float> grads = tower_->gradients();
  reduce_.resize(grads.size() + 4);
  std::memcpy(reduce_.data(), grads.data(), grads.size() * sizeof(float));
  const size_t extra = grads.size();
  reduce_[extra] = loss_sum;
  reduce_[extra + 1] = has_next ? 1.0f : 0.0f;
  reduce_[extra + 2] = has_next ? static_cast<float>((*next)->examples.size) : 0.0f;
  // Rank 0 decides time-based and requested checkpoints; the sum tells every worker.
  reduce_[extra + 3] = rank0() && CheckpointWanted() ? 1.0f : 0.0f;
  EMBER_RETURN_IF_ERROR(
      InStage(collective_->AllReduceSum(absl::MakeSpan(reduce_)), "dense gradient all-reduce"));
  optimizer_->Step(tower_->parameters(), absl::MakeConstSpan(reduce_.data(), grads.size()));
  next_agreement_ = {reduce_[extra + 1], reduce_[extra + 2]};
  checkpoint_next_ = reduce_[extra + 3] > 0.5f;
  const absl::Time t4 = absl::Now();

  interval_loss_ += reduce_[extra];
  interval_examples_ += global_examples;
  examples_ += static_cast<uint64_t>(global_examples);
  ++step_;
  stage_seconds_[0] += absl::ToDoubleSeconds(t1 - t0);
  stage_seconds_[1] += absl::ToDoubleSeconds(t2 - t1);
  stage_seconds_[2] += absl::ToDoubleSeconds(t4 - t3);
  stage_seconds_[3] += absl::ToDoubleSeconds(t3 - t2);
  if (metrics_ != nullptr) {
    metrics_->RecordStep(b, reduce_[extra] / global_examples, absl::ToDoubleSeconds(t1 - t0),
                         absl::ToDoubleSeconds(t2 - t1), absl::ToDoubleSeconds(t4 - t3),
                         absl::ToDoubleSeconds(t3 - t2));
  }
  return absl::OkStatus();
}

// A digest of what the model's state depends on: not the schedule (max_steps,
// checkpoint, logging and evaluation settings), which a resumed run may change.
uint64_t ConfigDigest(const v1::ModelConfig& config) {
  v1::ModelConfig model = config;
  model.clear_checkpoint();
  model.clear_eval();
  model.mutable_data()->clear_test_path();
  v1::TrainingConfig* t = model.mutable_training();
  t->clear_max_steps();
  t->clear_log_every_steps();
  t->clear_eval_every_steps();
  t->clear_eval_max_examples();
  std::string bytes;
  model.SerializeToString(&bytes);
  return HashBytes(bytes);
}

absl::Status Trainer::Restore(const v1::WorkerState& state) {
  const auto fail = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", join_.checkpoint(), " does not fit this job: ", why));
  };
  if (state.world_size() != static_cast<uint32_t>(options_.world_size) ||
      state.cursors_size() != options_.world_size) {
    return fail(absl::StrCat("it has ", state.world_size(), " workers, the job ",
                             options_.world_size));
  }
  if (state.config_digest() != ConfigDigest(config_)) return fail("another model config");
  absl::Span<float> params = tower_->parameters();
  if (state.dense_parameters().size() != params.size() * sizeof(float)) {
    return fail(absl::StrCat(state.dense_parameters().size() / sizeof(float),
                             " dense parameters, the tower has ", params.size()));
  }
  std::memcpy(params.data(), state.dense_parameters().data(), state.dense_parameters().size());
  std::vector<float> opt(state.dense_optimizer_state().size() / sizeof(float));
  std::memcpy(opt.data(), state.dense_optimizer_state().data(), opt.size() * sizeof(float));
  EMBER_RETURN_IF_ERROR(InStage(optimizer_->LoadState(opt), "dense optimizer state"));
  step_ = state.step();
  examples_ = state.examples();
  epoch_ = static_cast<int>(state.epoch());
  checkpoint_step_ = step_;
  if (rank0()) {
    log_ << "resuming from checkpoint " << join_.checkpoint() << " at step " << step_
         << " (attempt " << join_.attempt() << ")" << std::endl;
  }
  return absl::OkStatus();
}

bool Trainer::CheckpointWanted() {
  if (!join_.checkpoints()) return false;
  const absl::Time now = absl::Now();
  const uint32_t every_seconds = config_.checkpoint().every_seconds();
  if (every_seconds > 0 && now - last_checkpoint_ >= absl::Seconds(every_seconds)) return true;
  // The poll runs inside a step: at most once a second, and an unreachable coordinator
  // (a restart) is asked again only after 10 s, so it costs the step loop little.
  if (now < next_poll_) return false;
  absl::StatusOr<v1::GetJobResponse> job = jobs_->GetJob(config_.name(), absl::Milliseconds(200));
  next_poll_ = now + (job.ok() ? absl::Seconds(1) : absl::Seconds(10));
  return job.ok() && job->checkpoint_requested();
}

absl::Status Trainer::TakeCheckpoint() {
  // Every push is applied before the cut: in BSP the step's all-reduce already waited
  // for every worker's pushes; otherwise drain them and meet.
  EMBER_RETURN_IF_ERROR(DrainPushes(0));
  if (training_.consistency() != TrainingConfig::BSP) {
    EMBER_RETURN_IF_ERROR(InStage(collective_->Barrier(), "checkpoint barrier"));
  }
  // This worker's cursor: the next batch it will train on.
  v1::WorkerCursor cursor;
  cursor.set_rank(static_cast<uint32_t>(options_.rank));
  absl::StatusOr<PreparedBatch*> head = pipeline_->Peek();
  if (!head.ok()) return InStage(head.status(), "training data");
  if (*head == nullptr) {
    cursor.set_epoch(training_.epochs());
  } else {
    cursor.set_epoch(static_cast<uint32_t>((*head)->epoch));
    cursor.set_file_index((*head)->start.file_index);
    cursor.set_line((*head)->start.line);
  }
  std::vector<std::string> send(static_cast<size_t>(options_.world_size));
  send[0] = cursor.SerializeAsString();
  absl::StatusOr<std::vector<std::string>> cursors = collective_->AllToAll(send);
  if (!cursors.ok()) return InStage(cursors.status(), "checkpoint cursors");

  absl::Status failed;
  if (rank0()) {
    v1::CheckpointRequest request;
    request.set_job(config_.name());
    request.set_generation(options_.generation);
    request.set_attempt(join_.attempt());
    request.set_allow_incremental(true);
    v1::WorkerState* state = request.mutable_state();
    state->set_step(step_);
    state->set_examples(examples_);
    state->set_world_size(static_cast<uint32_t>(options_.world_size));
    state->set_epoch(static_cast<uint32_t>(epoch_));
    state->set_config_digest(ConfigDigest(config_));
    const absl::Span<const float> params = tower_->parameters();
    state->set_dense_parameters(params.data(), params.size() * sizeof(float));
    const std::vector<float> opt = optimizer_->SaveState();
    state->set_dense_optimizer_state(opt.data(), opt.size() * sizeof(float));
    for (const std::string& bytes : *cursors) {
      if (!state->add_cursors()->ParseFromString(bytes)) {
        return absl::InternalError("a worker's checkpoint cursor does not parse");
      }
    }
    absl::StatusOr<v1::CheckpointManifest> manifest =
        jobs_->Checkpoint(request, options_.recovery_timeout);
    if (manifest.ok()) {
      uint64_t bytes = 0;
      for (const v1::ShardSnapshot& shard : manifest->shards()) bytes += shard.bytes();
      log_ << absl::StrFormat("checkpoint %s at step %d (%s, %.1f MB, %.2fs)", manifest->name(),
                              step_, manifest->incremental() ? "delta" : "full", bytes / 1e6,
                              manifest->seconds())
           << std::endl;
    } else {
      failed = manifest.status();
    }
  }
  // Every worker learns whether it worked: a failed checkpoint ends the attempt.
  std::array<float, 1> flag = {failed.ok() ? 0.0f : 1.0f};
  EMBER_RETURN_IF_ERROR(InStage(collective_->AllReduceSum(absl::MakeSpan(flag)), "checkpoint"));
  if (!failed.ok()) return InStage(failed, absl::StrCat("checkpoint at step ", step_));
  if (flag[0] > 0.5f) {
    return absl::AbortedError(absl::StrCat("checkpoint at step ", step_, " failed on rank 0"));
  }
  last_checkpoint_ = absl::Now();
  checkpoint_step_ = step_;
  ++result_.checkpoints;
  return absl::OkStatus();
}

void Trainer::MaybeLog(bool force) {
  if (interval_examples_ == 0 || (!force && step_ % training_.log_every_steps() != 0)) return;
  CurvePoint point;
  point.step = step_;
  point.examples = examples_;
  point.loss = interval_loss_ / interval_examples_;
  curve_.push_back(point);
  result_.final_loss = point.loss;
  interval_loss_ = 0;
  interval_examples_ = 0;
  if (!rank0()) return;
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start_);
  const double rate = examples_ / std::max(elapsed, 1e-9);
  const std::string eta =
      estimated_steps_ > step_
          ? FormatDuration(elapsed / step_ * static_cast<double>(estimated_steps_ - step_))
          : std::string(estimated_steps_ > 0 ? "0s" : "?");
  log_ << absl::StrFormat("step %6d  examples %9d  %8.0f ex/s  loss %.5f  ETA %s", step_, examples_,
                          rate, point.loss, eta)
       << std::endl;
}

absl::Status Trainer::MaybeEvaluate(bool final) {
  if (options_.skip_eval || config_.data().test_path().empty()) return absl::OkStatus();
  const uint32_t every = training_.eval_every_steps();
  if (!final && (every == 0 || step_ % every != 0)) return absl::OkStatus();
  // Every worker's pushes so far are applied before rank 0 evaluates (the final
  // evaluation follows the final barrier).
  EMBER_RETURN_IF_ERROR(DrainPushes(0));
  if (!final) EMBER_RETURN_IF_ERROR(InStage(collective_->Barrier(), "evaluation barrier"));
  if (!rank0()) return absl::OkStatus();
  absl::StatusOr<TestSetResult> eval = Evaluate(config_, layout_, *client_, *tower_);
  if (!eval.ok()) return InStage(eval.status(), "evaluation");
  if (curve_.empty() || curve_.back().step != step_) {
    CurvePoint point;
    point.step = step_;
    point.examples = examples_;
    point.loss = 0;  // an evaluation between progress points: no training loss here
    curve_.push_back(point);
  }
  curve_.back().test_auc = eval->auc;
  curve_.back().test_logloss = eval->logloss;
  log_ << absl::StrFormat("eval at step %d: test AUC %.4f  logloss %.4f", step_, eval->auc,
                          eval->logloss);
  if (eval->oracle_auc.has_value())
    log_ << absl::StrFormat("  (oracle AUC %.4f)", *eval->oracle_auc);
  log_ << absl::StrFormat("  [%d examples, %.1fs]", eval->examples, eval->seconds) << std::endl;
  if (final) result_.eval = *eval;
  return absl::OkStatus();
}

absl::Status Trainer::Loop() {
  const int world = collective_->world_size();
  start_ = absl::Now();
  const uint32_t checkpoint_every = config_.checkpoint().every_steps();
  // A fresh run checkpoints before its first push: a failure rolls back to it.
  if (join_.checkpoints() && join_.checkpoint().empty()) EMBER_RETURN_IF_ERROR(TakeCheckpoint());
  while (true) {
    if (training_.max_steps() > 0 && step_ >= training_.max_steps()) break;
    // Every worker must agree to run this step: an epoch ends for all when the first
    // worker runs out of data in it. The previous step's all-reduce carried the
    // agreement; the first step of an epoch asks for it.
    absl::StatusOr<PreparedBatch*> head = pipeline_->Peek();
    if (!head.ok()) return InStage(head.status(), "training data");
    const bool has = *head != nullptr && (*head)->epoch == epoch_;
    std::array<float, 2> agree = {has ? 1.0f : 0.0f,
                                  has ? static_cast<float>((*head)->examples.size) : 0.0f};
    if (next_agreement_.has_value()) {
      agree = *next_agreement_;
      next_agreement_.reset();
    } else {
      EMBER_RETURN_IF_ERROR(
          InStage(collective_->AllReduceSum(absl::MakeSpan(agree)), "step agreement"));
    }
    if (agree[0] < static_cast<float>(world) - 0.5f) {
      if (!prefetch_.empty()) {
        absl::Status s = WaitAll(&prefetch_);  // the prefetched batch is being dropped
        prefetched_ = nullptr;
        EMBER_RETURN_IF_ERROR(InStage(s, "pull"));
      }
      if (has) EMBER_RETURN_IF_ERROR(InStage(pipeline_->SkipEpoch(epoch_), "training data"));
      if (++epoch_ >= static_cast<int>(training_.epochs())) break;
      continue;
    }
    EMBER_RETURN_IF_ERROR(Step(pipeline_->Pop(), agree[1]));
    MaybeLog(/*force=*/false);
    if (join_.checkpoints() &&
        (checkpoint_next_ || (checkpoint_every > 0 && step_ % checkpoint_every == 0))) {
      EMBER_RETURN_IF_ERROR(TakeCheckpoint());
    }
    EMBER_RETURN_IF_ERROR(MaybeEvaluate(/*final=*/false));
  }
  if (!prefetch_.empty()) {
    absl::Status s = WaitAll(&prefetch_);
    prefetched_ = nullptr;
    EMBER_RETURN_IF_ERROR(InStage(s, "pull"));
  }
  EMBER_RETURN_IF_ERROR(DrainPushes(0));
  // Every worker's updates are applied before anyone evaluates or checksums.
  EMBER_RETURN_IF_ERROR(InStage(collective_->Barrier(), "final barrier"));
  result_.train_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  const bool periodic = checkpoint_every > 0 || config_.checkpoint().every_seconds() > 0;
  if (join_.checkpoints() && periodic && checkpoint_step_ != step_) {
    EMBER_RETURN_IF_ERROR(TakeCheckpoint());
  }
  MaybeLog(/*force=*/true);
  return absl::OkStatus();
}

absl::Status Trainer::Finish() {
  result_.steps = step_;
  result_.examples = examples_;
  result_.examples_per_sec = examples_ / std::max(result_.train_seconds, 1e-9);
  result_.malformed_lines = pipeline_->stats().malformed;
  const absl::Span<const float> dense = tower_->parameters();
  result_.dense_checksum = HashBytes(
      absl::string_view(reinterpret_cast<const char*>(dense.data()), dense.size() * sizeof(float)));
  if (!rank0()) return absl::OkStatus();
  EMBER_RETURN_IF_ERROR(MaybeEvaluate(/*final=*/true));
  absl::StatusOr<std::map<std::string, PsClient::TableDigest>> sums = client_->Checksum();
  if (!sums.ok()) return InStage(sums.status(), "model checksum");
  for (const v1::TableConfig& table : config_.tables()) {
    auto it = sums->find(table.name());
    if (it == sums->end()) continue;
    result_.sparse_rows += it->second.rows;
    result_.sparse_checksum = Mix64(result_.sparse_checksum ^ it->second.digest);
  }
  result_.model_checksum = Mix64(result_.sparse_checksum ^ Mix64Alt(result_.dense_checksum));
  log_ << absl::StrFormat("done: %d steps, %d examples in %.1fs (%.0f ex/s), model checksum %016x",
                          step_, examples_, result_.train_seconds, result_.examples_per_sec,
                          result_.model_checksum)
       << std::endl;
  const double staged =
      std::max(stage_seconds_[0] + stage_seconds_[1] + stage_seconds_[2] + stage_seconds_[3], 1e-9);
  log_ << absl::StrFormat(
              "rank 0 step time: pull %.0f%%, compute %.0f%%, all-reduce %.0f%%, push %.0f%%",
              100 * stage_seconds_[0] / staged, 100 * stage_seconds_[1] / staged,
              100 * stage_seconds_[2] / staged, 100 * stage_seconds_[3] / staged)
       << std::endl;
  if (!options_.run_dir.empty()) {
    EMBER_RETURN_IF_ERROR(InStage(
        WriteRunDirectory(options_.run_dir, config_, options_, result_, curve_), "run directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Trainer::Run() {
  EMBER_RETURN_IF_ERROR(Setup());
  absl::Status s = Loop();
  if (!s.ok()) {
    // Leave nothing in flight referencing batches about to be destroyed.
    WaitAll(&prefetch_).IgnoreError();
    for (InFlight& f : in_flight_) WaitAll(&f.handles).IgnoreError();
    return absl::Status(
        s.code(), absl::StrCat("worker ", options_.rank, " at step ", step_, ": ", s.message()));
  }
  EMBER_RETURN_IF_ERROR(Finish());
  return result_;
}

}  // namespace

static bool Recoverable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<TrainResult> Train(const TrainerOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " is not in [0, world_size ",
                                                   options.world_size, ")"));
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<JobClient> jobs,
                         JobClient::Create(options.coordinator_address));
  std::ostream& log = options.log != nullptr ? *options.log : std::cout;
  v1::JoinJobRequest join;
  join.set_job(options.config.name());
  join.set_generation(options.generation);
  join.set_rank(static_cast<uint32_t>(options.rank));
  join.set_world_size(static_cast<uint32_t>(options.world_size));
  join.set_resume_from(options.resume_from);
  join.set_config_digest(ConfigDigest(options.config));
  for (int recoveries = 0;; ++recoveries) {
    absl::StatusOr<v1::JoinJobResponse> attempt = jobs->Join(join, options.recovery_timeout);
    if (!attempt.ok()) return InStage(attempt.status(), "joining the job");
    absl::StatusOr<TrainResult> result;
    {
      Trainer trainer(options, jobs.get(), *attempt, static_cast<uint64_t>(recoveries));
      result = trainer.Run();
    }
    if (result.ok()) {
      if (options.rank == 0) {
        v1::FinishJobRequest finish;
        finish.set_job(options.config.name());
        finish.set_generation(options.generation);
        finish.set_attempt(attempt->attempt());
        jobs->Finish(finish, absl::Seconds(30)).IgnoreError();  // the model is done either way
      }
      return result;
    }
    if (!Recoverable(result.status()) || recoveries >= options.max_recoveries) {
      return result.status();
    }
    log << "worker " << options.rank << ": attempt " << attempt->attempt()
        << " failed, rejoining: " << result.status().message() << std::endl;
    join.set_after_attempt(attempt->attempt());
    join.set_reason(std::string(result.status().message()));
  }
}

}  // namespace ember::worker
