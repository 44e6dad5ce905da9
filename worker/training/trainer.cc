// Copyright 2026 The Ember Authors.
//
// Train and the Trainer's setup, step loop, evaluation and result (trainer_internal.h);
// checkpoints are in trainer_checkpoint.cc.

#include "worker/training/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/hash.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"
#include "worker/data/reader.h"
#include "worker/training/trainer_internal.h"

namespace ember::worker {
namespace trainer_internal {
namespace {

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

}  // namespace

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
  EMBER_RETURN_IF_ERROR(StartMetrics());
  EMBER_RETURN_IF_ERROR(ConnectPs());
  EMBER_RETURN_IF_ERROR(CreateDense());
  EMBER_RETURN_IF_ERROR(ConnectWorkers());
  EMBER_RETURN_IF_ERROR(CheckSameConfig());
  EMBER_RETURN_IF_ERROR(OpenTrainingData());
  if (elastic() && rank0()) {
    // Workers already waiting to join at a given step are known before the first step.
    absl::StatusOr<v1::GetJobResponse> job = jobs_->GetJob(config_.name(), absl::Seconds(5));
    if (job.ok()) NotePending(*job);
  }
  log_ << "worker " << options_.rank << "/" << world << " ready" << std::endl;
  if (rank0()) {
    log_ << "training " << config_.name() << ": " << world << " worker(s), "
         << client_->slot_map().Shards().size() << " PS shard(s), "
         << TrainingConfig::Consistency_Name(training_.consistency()) << ", batch "
         << training_.batch_size() << " per worker, " << tower_->parameters().size()
         << " dense parameters"
         << (estimated_steps_ > 0 ? absl::StrCat(", about ", estimated_steps_, " steps") : "")
         // Where the rows come from (coordinator.proto JoinJobRequest.rows).
         << (!join_.checkpoint().empty() ? absl::StrCat(", from checkpoint ", join_.checkpoint())
             : options_.start_rows == v1::JoinJobRequest::START_ROWS_FRESH
                 ? ", from empty tables (--rows=fresh) and a fresh dense tower"
             : options_.start_rows == v1::JoinJobRequest::START_ROWS_CONTINUE
                 ? ", from the rows the PS tables hold (--rows=continue) and a fresh dense "
                   "tower"
             : result_.recoveries == 0
                 ? ", from the empty tables of a new cluster and a fresh dense tower"
                 : ", from the rows the PS tables hold now (no checkpoint to restore)")
         << std::endl;
  }
  return absl::OkStatus();
}

absl::Status Trainer::StartMetrics() {
  if (options_.metrics_port < 0) return absl::OkStatus();
  // Not retried: a metrics address that cannot be served is a flag mistake, and an
  // attempt per failure only churned the job through recoveries.
  absl::StatusOr<std::unique_ptr<WorkerMetrics>> metrics =
      WorkerMetrics::Start(options_.metrics_host, options_.metrics_port);
  if (!metrics.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(metrics.status().message(), " (--metrics_host / --metrics_port)"));
  }
  metrics_ = std::move(*metrics);
  if (rank0()) log_ << "worker metrics on " << metrics_->address() << std::endl;
  return absl::OkStatus();
}

absl::Status Trainer::ConnectPs() {
  // The PS cluster: wait (bounded) until the coordinator has a slot map.
  PsClientOptions ps;
  ps.coordinator_address = options_.coordinator_address;
  ps.channel_credentials = options_.channel_credentials;
  ps.cluster_token = options_.cluster_token;
  ps.worker_id = Mix64(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) ^
                       (static_cast<uint64_t>(getpid()) << 20) ^ options_.rank);
  ps.deadline = options_.ps_deadline;
  ps.attempt = join_.attempt();
  ps.job = join_.tables_job();  // the run's own tables, or the shared ones ("")
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
  return absl::OkStatus();
}

absl::Status Trainer::CreateDense() {
  const int num_dense = static_cast<int>(model::DenseColumns(config_).size());
  absl::StatusOr<std::unique_ptr<model::DenseTower>> tower =
      CreateDenseTower(config_.dense(), num_dense, layout_.FeatureDims(), options_.dense_device);
  if (!tower.ok()) return InStage(tower.status(), "dense tower");
  tower_ = std::move(*tower);
  optimizer_ = CreateDenseOptimizer(config_.dense_optimizer(), *tower_);
  EMBER_RETURN_IF_ERROR(InStage(optimizer_->status(), "dense optimizer"));
  return absl::OkStatus();
}

absl::Status Trainer::ConnectWorkers() {
  const int world = options_.world_size;
  CollectiveOptions collective;
  collective.coordinator_address = options_.coordinator_address;
  collective.channel_credentials = options_.channel_credentials;
  collective.cluster_token = options_.cluster_token;
  collective.host = options_.collective_host;
  // Every attempt meets under its own name: attempts are unique across runs.
  collective.job = absl::StrCat(config_.name(), ".a", join_.attempt());
  collective.generation = options_.generation;
  collective.rank = options_.rank;
  collective.world_size = world;
  collective.timeout = options_.collective_timeout;
  if (world > 1) {
    log_ << "worker " << options_.rank << "/" << world << ": waiting for the other " << world - 1
         << " worker(s) of attempt " << join_.attempt() << " (up to "
         << absl::FormatDuration(options_.collective_timeout) << ", --collective_timeout_ms)"
         << std::endl;
  }
  absl::StatusOr<std::unique_ptr<Collective>> c = Collective::Connect(collective);
  if (!c.ok()) {
    rendezvous_failed_ = true;
    absl::Status s = c.status();
    // The first attempt of a fresh run, for this worker: the missing peers never
    // started (or cannot reach this one), which waiting longer does not change. A
    // recovery (restored from a checkpoint) or a rejoin after a failure waits for
    // restarted peers as long as --max_recoveries allows.
    if (s.code() == absl::StatusCode::kDeadlineExceeded && result_.recoveries == 0 &&
        join_.checkpoint().empty()) {
      s = absl::FailedPreconditionError(absl::StrCat(
          s.message(), "; start every rank 0..", world - 1, " with --world_size=", world,
          " against the same coordinator, each able to reach the others "
          "at its --collective_host"));
    }
    return InStage(s, absl::StrCat("worker rendezvous (job '", config_.name(), "', generation ",
                                   options_.generation,
                                   "; every run of a job on one coordinator needs its own "
                                   "--generation)"));
  }
  collective_ = std::move(*c);
  if (tower_->device() == model::DenseDevice::kCuda) {
    absl::StatusOr<std::unique_ptr<DeviceCollective>> nccl =
        DeviceCollective::Connect(collective, options_.dense_device.cuda_device);
    if (!nccl.ok()) return InStage(nccl.status(), "NCCL rendezvous");
    device_collective_ = std::move(*nccl);
  }
  return absl::OkStatus();
}

absl::Status Trainer::CheckSameConfig() {
  const int world = options_.world_size;
  if (world == 1) return absl::OkStatus();
  const std::string digest = absl::StrCat(model::ConfigDigest(config_));
  absl::StatusOr<std::vector<std::string>> digests =
      collective_->AllToAll(std::vector<std::string>(static_cast<size_t>(world), digest));
  if (!digests.ok()) return InStage(digests.status(), "comparing the workers' configs");
  for (int r = 0; r < world; ++r) {
    if ((*digests)[r] == digest) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", r, " trains with another model config than worker ", options_.rank,
        " although both joined with the same one: their feature statistics differ "
        "(each worker computes them from the training files it sees, over "
        "statistics_max_examples examples: every worker needs the same files and cap)"));
  }
  return absl::OkStatus();
}

absl::Status Trainer::OpenTrainingData() {
  const int world = options_.world_size;
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
  skew_ = std::make_unique<SkewHandler>(config_, layout_, world);
  EMBER_RETURN_IF_ERROR(ListTrainingFiles());
  std::optional<ResumePoint> resume;
  if (!join_.checkpoint().empty()) {
    EMBER_RETURN_IF_ERROR(Restore(join_.state()));
    EMBER_ASSIGN_OR_RETURN(resume, DataResumePoint(join_.state()));
  }
  pipeline_ = std::make_unique<BatchPipeline>(std::move(*reader), layout_, training_.batch_size(),
                                              training_.epochs(), /*depth=*/3, resume);
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
      const absl::Time exchange_start = absl::Now();
      EMBER_RETURN_IF_ERROR(
          InStage(ReduceSparseGradients(*collective_, batch->sparse, &owned_), "sparse exchange"));
      stage_seconds_[4] += absl::ToDoubleSeconds(absl::Now() - exchange_start);
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
  EMBER_RETURN_IF_ERROR(PullStep(batch.get()));
  const absl::Time t1 = absl::Now();
  const int b = batch->examples.size;
  EMBER_ASSIGN_OR_RETURN(const float loss_sum, ComputeStep(batch.get(), global_examples));
  const absl::Time t2 = absl::Now();

  // Sparse gradients first: in BSP every worker's push is applied before the dense
  // all-reduce below returns anywhere, so that all-reduce is also the step barrier.
  EMBER_RETURN_IF_ERROR(PushSparse(std::move(batch)));
  const absl::Time t3 = absl::Now();

  const uint64_t resampled_before = skew_->totals().resampled_examples;
  EMBER_ASSIGN_OR_RETURN(const float global_loss_sum, ReduceDense(loss_sum));
  const absl::Time t4 = absl::Now();
  CountEpochExamples(global_examples, resampled_before);

  interval_loss_ += global_loss_sum;
  interval_examples_ += global_examples;
  examples_ += static_cast<uint64_t>(global_examples);
  ++step_;
  stage_seconds_[0] += absl::ToDoubleSeconds(t1 - t0);
  stage_seconds_[1] += absl::ToDoubleSeconds(t2 - t1);
  stage_seconds_[2] += absl::ToDoubleSeconds(t4 - t3);
  stage_seconds_[3] += absl::ToDoubleSeconds(t3 - t2);
  if (metrics_ != nullptr) {
    metrics_->RecordStep(b, global_loss_sum / global_examples, absl::ToDoubleSeconds(t1 - t0),
                         absl::ToDoubleSeconds(t2 - t1), absl::ToDoubleSeconds(t4 - t3),
                         absl::ToDoubleSeconds(t3 - t2));
  }
  return absl::OkStatus();
}

absl::Status Trainer::PullStep(PreparedBatch* batch) {
  // Pull (or collect the prefetched pull) of this batch; the skew handler prepares
  // it first (cold examples, replays) and serves hot rows from its cache, given the
  // hot keys (refreshed every step; fetched only for the cache).
  std::shared_ptr<const HotSetView> hot =
      skew_->cache_active() ? client_->hot_set() : std::shared_ptr<const HotSetView>();
  if (prefetched_ == batch) {
    EMBER_RETURN_IF_ERROR(InStage(WaitAll(&prefetch_), "pull"));
    prefetched_ = nullptr;
  } else {
    std::vector<PsHandle> handles;
    skew_->StartPulls(*client_, step_, hot.get(), batch, &handles);
    EMBER_RETURN_IF_ERROR(InStage(WaitAll(&handles), "pull"));
  }
  skew_->FinishPulls(batch);
  // The batch's effect on the skew state precedes the next batch's preparation.
  skew_->Commit(*batch);
  // SSP/ASP: the next batch's pull overlaps this step's compute and push.
  if (training_.consistency() != TrainingConfig::BSP) {
    absl::StatusOr<PreparedBatch*> next = pipeline_->Peek();
    // (An empty step's next batch may be prefetched already.)
    if (next.ok() && *next != nullptr && prefetched_ == nullptr) {
      prefetched_ = *next;
      skew_->StartPulls(*client_, step_ + 1, hot.get(), prefetched_, &prefetch_);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<float> Trainer::ComputeStep(PreparedBatch* batch, double global_examples) {
  SparseBatch& sparse = batch->sparse;
  const model::ExampleBatch& ex = batch->examples;
  const int b = ex.size;
  const int width = layout_.pooled_width;
  pooled_.resize(static_cast<size_t>(b) * width);
  d_pooled_.resize(pooled_.size());
  sparse.Pool(absl::MakeSpan(pooled_));
  float loss_sum = 0;
  const int tasks = tower_->num_tasks();
  if (tasks == 1) {
    logits_.resize(b);
    tower_->Forward(b, ex.dense, pooled_, absl::MakeSpan(logits_));
    loss_sum = tower_->BackwardWithBce(logits_, ex.labels, ex.weights,
                                       static_cast<float>(1.0 / global_examples),
                                       absl::MakeSpan(d_pooled_)) *
               static_cast<float>(global_examples);
  } else {
    // Multi-task: every task's labels task-major, the loss the sum over the tasks.
    logits_.resize(static_cast<size_t>(b) * tasks);
    task_labels_.assign(ex.labels.begin(), ex.labels.begin() + b);
    for (int t = 1; t < tasks; ++t) {
      if (b > 0 && ex.task_labels.size() < static_cast<size_t>(t)) {
        return absl::InternalError("training: a batch lacks the extra tasks' labels");
      }
      if (b > 0)
        task_labels_.insert(task_labels_.end(), ex.task_labels[t - 1].begin(),
                            ex.task_labels[t - 1].begin() + b);
    }
    task_labels_.resize(logits_.size());
    tower_->ForwardTasks(b, ex.dense, pooled_, absl::MakeSpan(logits_));
    loss_sum = tower_->BackwardWithTaskLoss(logits_, task_labels_, ex.weights,
                                            static_cast<float>(1.0 / global_examples),
                                            absl::MakeSpan(d_pooled_)) *
               static_cast<float>(global_examples);
  }
  EMBER_RETURN_IF_ERROR(InStage(tower_->status(), "dense tower"));
  sparse.Backward(d_pooled_);
  return loss_sum;
}

absl::StatusOr<float> Trainer::ReduceDense(float loss_sum) {
  // Dense gradients, all-reduced together with the step's loss sum and the agreement
  // on the next step (does every worker have a batch of this epoch, and how many
  // examples in all).
  absl::StatusOr<PreparedBatch*> next = pipeline_->Peek();
  if (!next.ok()) return InStage(next.status(), "training data");
  const bool has_next = *next != nullptr && (*next)->epoch == epoch_;
  // CPU: the gradients ride in the Gloo all-reduce with the step's sums. CUDA: NCCL sums
  // them in device memory; Gloo carries the sums alone.
  const bool on_device = device_collective_ != nullptr;
  const absl::Span<float> grads = tower_->step_gradients();
  if (on_device) {
    EMBER_RETURN_IF_ERROR(InStage(device_collective_->AllReduceSum(grads, tower_->cuda_stream()),
                                  "dense gradient all-reduce (NCCL)"));
  }
  const size_t extra = on_device ? 0 : grads.size();
  // With skew handling on, the step's skew counts ride along (only then: the size of
  // the all-reduce may change the summation order, and so the bits, of the gradients).
  const size_t skew_extra = skew_->active() ? std::tuple_size_v<SkewHandler::StepCounts> : 0;
  reduce_.resize(extra + 4 + skew_extra);
  if (!on_device) std::memcpy(reduce_.data(), grads.data(), grads.size() * sizeof(float));
  reduce_[extra] = loss_sum;
  reduce_[extra + 1] = has_next ? 1.0f : 0.0f;
  reduce_[extra + 2] = has_next ? static_cast<float>(skew_->PlannedSize(**next)) : 0.0f;
  // Rank 0 decides time-based and requested checkpoints (1) and whether the test set is
  // evaluated after this step (2); the sum tells every worker. (Evaluations are rank 0's
  // call, so that workers whose flags differ still meet in the same collective calls.)
  const bool evaluate = rank0() && EvaluationWanted() && training_.eval_every_steps() > 0 &&
                        (step_ + 1) % training_.eval_every_steps() == 0;
  // Elastic runs add their votes for a resize (trainer_elastic.cc).
  reduce_[extra + 3] =
      (rank0() && CheckpointWanted() ? 1.0f : 0.0f) + (evaluate ? 2.0f : 0.0f) + ElasticVotes();
  if (skew_extra > 0) {
    const SkewHandler::StepCounts counts = skew_->TakeStepCounts();
    std::copy(counts.begin(), counts.end(), reduce_.begin() + extra + 4);
    if (metrics_ != nullptr) metrics_->RecordSkew(counts[0], counts[1], counts[3], counts[2]);
  }
  EMBER_RETURN_IF_ERROR(
      InStage(collective_->AllReduceSum(absl::MakeSpan(reduce_)), "dense gradient all-reduce"));
  if (skew_extra > 0) {
    SkewHandler::Totals& totals = skew_->totals();
    const float* sums = &reduce_[extra + 4];
    totals.cold_examples += static_cast<uint64_t>(sums[0]);
    totals.resampled_examples += static_cast<uint64_t>(sums[1]);
    totals.hot_cache_hits += static_cast<uint64_t>(sums[2]);
    totals.hot_cache_lookups += static_cast<uint64_t>(sums[3]);
  }
  if (on_device) {
    optimizer_->Step(tower_->step_parameters(), grads);
  } else {
    optimizer_->Step(tower_->parameters(), absl::MakeConstSpan(reduce_.data(), grads.size()));
  }
  EMBER_RETURN_IF_ERROR(InStage(optimizer_->status(), "dense optimizer"));
  next_agreement_ = {reduce_[extra + 1], reduce_[extra + 2]};
  const long decisions = std::lround(reduce_[extra + 3]);
  checkpoint_next_ = (decisions & 1) != 0;
  evaluate_next_ = (decisions & 2) != 0;
  ElasticDecision(decisions);
  return reduce_[extra];
}

absl::Status Trainer::Loop() {
  const int world = collective_->world_size();
  start_ = absl::Now();
  start_examples_ = examples_;
  start_step_ = step_;
  std::fill(std::begin(stage_seconds_), std::end(stage_seconds_), 0.0);  // this attempt's
  const uint32_t checkpoint_every = config_.checkpoint().every_steps();
  // A fresh run checkpoints before its first push: a failure rolls back to it.
  if (join_.checkpoints() && join_.checkpoint().empty()) EMBER_RETURN_IF_ERROR(TakeCheckpoint());
  while (true) {
    if (training_.max_steps() > 0 && step_ >= training_.max_steps()) break;
    // Every worker must agree to run this step: an epoch ends for all when the first
    // worker runs out of data in it (epoch_end LAST_OUT: the last). The previous step's
    // all-reduce carried the agreement; the first step of an epoch asks for it.
    absl::StatusOr<PreparedBatch*> head = pipeline_->Peek();
    if (!head.ok()) return InStage(head.status(), "training data");
    const bool has = *head != nullptr && (*head)->epoch == epoch_;
    std::array<float, 2> agree = {has ? 1.0f : 0.0f,
                                  has ? static_cast<float>(skew_->PlannedSize(**head)) : 0.0f};
    if (next_agreement_.has_value()) {
      agree = *next_agreement_;
      next_agreement_.reset();
    } else {
      EMBER_RETURN_IF_ERROR(
          InStage(collective_->AllReduceSum(absl::MakeSpan(agree)), "step agreement"));
    }
    if (EpochOver(agree[0], world)) {
      if (!prefetch_.empty()) {
        absl::Status s = WaitAll(&prefetch_);  // the prefetched batch is being dropped
        prefetched_ = nullptr;
        EMBER_RETURN_IF_ERROR(InStage(s, "pull"));
      }
      if (has) EMBER_RETURN_IF_ERROR(InStage(pipeline_->SkipEpoch(epoch_), "training data"));
      if (++epoch_ >= static_cast<int>(training_.epochs())) break;
      continue;
    }
    // With epoch_end LAST_OUT a worker whose share ran out takes an empty step.
    EMBER_RETURN_IF_ERROR(Step(has ? pipeline_->Pop() : EmptyBatch(), agree[1]));
    MaybeLog(/*force=*/false);
    if (join_.checkpoints() &&
        (checkpoint_next_ || (checkpoint_every > 0 && step_ % checkpoint_every == 0))) {
      EMBER_RETURN_IF_ERROR(TakeCheckpoint());
      if (resize_next_) {
        // Elastic: the attempt ends at this cut; the next starts from it at the new size.
        resized_ = true;
        break;
      }
    }
    EMBER_RETURN_IF_ERROR(MaybeEvaluate());
  }
  if (!prefetch_.empty()) {
    absl::Status s = WaitAll(&prefetch_);
    prefetched_ = nullptr;
    EMBER_RETURN_IF_ERROR(InStage(s, "pull"));
  }
  EMBER_RETURN_IF_ERROR(DrainPushes(0));
  if (resized_) return absl::OkStatus();
  // Every worker's updates are applied before anyone evaluates or checksums.
  EMBER_RETURN_IF_ERROR(InStage(collective_->Barrier(), "final barrier"));
  passed_final_barrier_ = true;
  result_.train_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  // Every run that can checkpoint ends with one, period or not: without it the newest
  // checkpoint of a run without a period is its step 0, and a follower would serve the
  // untrained dense tower beside trained rows, and a resume would throw the run away.
  if (join_.checkpoints() && checkpoint_step_ != step_) EMBER_RETURN_IF_ERROR(TakeCheckpoint());
  MaybeLog(/*force=*/true);
  return absl::OkStatus();
}

absl::Status Trainer::Finish() {
  result_.steps = step_;
  result_.examples = examples_;
  result_.examples_per_epoch = epoch_examples_;
  result_.examples_per_sec =
      static_cast<double>(examples_ - start_examples_) / std::max(result_.train_seconds, 1e-9);
  result_.malformed_lines = pipeline_->stats().malformed;
  const SkewHandler::Totals& skew = skew_->totals();
  result_.cold_examples = skew.cold_examples;
  result_.resampled_examples = skew.resampled_examples;
  result_.hot_cache = skew_->cache_active();
  result_.hot_cache_hits = skew.hot_cache_hits;
  result_.hot_cache_lookups = skew.hot_cache_lookups;
  const double steps_here = static_cast<double>(std::max<uint64_t>(step_ - start_step_, 1));
  result_.step_pull_ms = 1e3 * stage_seconds_[0] / steps_here;
  result_.step_compute_ms = 1e3 * stage_seconds_[1] / steps_here;
  result_.step_exchange_ms = 1e3 * stage_seconds_[4] / steps_here;
  result_.step_push_ms = 1e3 * (stage_seconds_[3] - stage_seconds_[4]) / steps_here;
  result_.step_allreduce_ms = 1e3 * stage_seconds_[2] / steps_here;
  const absl::Span<const float> dense = tower_->parameters();
  EMBER_RETURN_IF_ERROR(InStage(tower_->status(), "dense tower"));
  result_.dense_checksum = HashBytes(
      absl::string_view(reinterpret_cast<const char*>(dense.data()), dense.size() * sizeof(float)));
  // Every rank takes part in the final evaluation: a failure in it fails every rank.
  EMBER_RETURN_IF_ERROR(FinalEvaluate());
  if (!rank0()) return absl::OkStatus();
  // The run's last report, with the final evaluation's AUC, before FinishJob.
  ReportProgress(result_.examples_per_sec, result_.final_loss, /*last=*/true);
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
  const double push_only = stage_seconds_[3] - stage_seconds_[4];
  log_ << absl::StrFormat(
              "rank 0 step time: pull %.0f%%, compute %.0f%%, exchange %.0f%%, push %.0f%%, "
              "all-reduce %.0f%%",
              100 * stage_seconds_[0] / staged, 100 * stage_seconds_[1] / staged,
              100 * stage_seconds_[4] / staged, 100 * push_only / staged,
              100 * stage_seconds_[2] / staged)
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
  if (resized_) {
    // Unfinished: the result so far, for the leaving worker's report.
    result_.steps = step_;
    result_.examples = examples_;
    result_.examples_per_epoch = epoch_examples_;
    return result_;
  }
  EMBER_RETURN_IF_ERROR(Finish());
  return result_;
}

}  // namespace trainer_internal
}  // namespace ember::worker
