// Copyright 2026 The Ember Authors.
//
// Follower: opening, bootstrap, persistence, the control loop and the read side.
// The per-shard streams are in follower_stream.cc.

#include "server/serving/follower.h"
#include "common/keepalive.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "server/store/row_backend.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

constexpr char kStateKey[] = "serving/state";
constexpr int kMaxMessageBytes = 256 << 20;

// Every shard's position at the cut of `manifest`: shard -> (stream, version).
std::map<uint32_t, std::pair<uint64_t, uint64_t>> CutOf(const v1::CheckpointManifest& manifest) {
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> cut;
  for (const v1::ShardSnapshot& snap : manifest.shards()) {
    cut[snap.shard_id()] = {snap.stream_id(), snap.version()};
  }
  return cut;
}

}  // namespace

Follower::Follower(const FollowerOptions& options) : options_(options), slot_epoch_(kNumSlots, 0) {}

Follower::~Follower() { Stop().IgnoreError(); }

absl::StatusOr<std::unique_ptr<Follower>> Follower::Start(const FollowerOptions& options) {
  if (options.coordinator.empty()) return absl::InvalidArgumentError("--coordinator is required");
  if (options.checkpoint_root.empty()) {
    return absl::InvalidArgumentError("--checkpoint_dir is required");
  }
  if (options.data_dir.empty()) return absl::InvalidArgumentError("--data_dir is required");
  if (options.max_batch_keys == 0) return absl::InvalidArgumentError("max_batch_keys must be >= 1");
  std::unique_ptr<Follower> follower(new Follower(options));
  EMBER_RETURN_IF_ERROR(follower->Open());
  {
    absl::MutexLock lock(&follower->mu_);
    follower->following_ = true;
  }
  follower->control_ = std::thread([f = follower.get()] { f->ControlLoop(); });
  return follower;
}

absl::Status Follower::Open() {
  ShardStorageOptions storage;
  storage.rocksdb.path = (fs::path(options_.data_dir) / "store").string();
  // Rows become durable at PersistState's flush, together with the positions that
  // cover them; between persists a crash loses both, so nothing needs a WAL (which
  // cost a third of the apply rate in ember-bench serving).
  storage.rocksdb.enable_wal = false;
  storage.store.memory_budget_bytes = options_.memory_budget_bytes;
  storage.store.max_batch_keys = std::max<uint32_t>(options_.max_batch_keys, 1u << 16);
  storage.store.change_log_capacity = 4096;  // nobody follows a follower
  std::error_code ec;
  fs::create_directories(options_.data_dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create --data_dir ", options_.data_dir, ": ", ec.message()));
  }
  EMBER_ASSIGN_OR_RETURN(storage_, ShardStorage::Open(storage));

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  SetClientKeepalive(&args);
  coordinator_ = v1::CoordinatorService::NewStub(grpc::CreateCustomChannel(
      options_.coordinator, OrInsecure(options_.channel_credentials), args));

  // Resume from the persisted positions, or bootstrap.
  std::vector<std::string> values;
  std::vector<bool> found;
  EMBER_RETURN_IF_ERROR(
      storage_->rocksdb()->MultiGet(kMetaTable, {std::string(kStateKey)}, &values, &found));
  v1::FollowerState state;
  if (found[0] && !state.ParseFromString(values[0])) {
    return absl::DataLossError(absl::StrCat("corrupt follower state in ", options_.data_dir));
  }
  // Tables (and shards) from the coordinator first: a restarted store serves none
  // until they are created again, and a bootstrap keeps the tables the store has.
  RefreshMap();
  if (!found[0]) {
    EMBER_RETURN_IF_ERROR(Bootstrap());
  } else {
    absl::MutexLock lock(&mu_);
    bootstrap_checkpoint_ = state.bootstrap_checkpoint();
    pinned_ = state.pinned_checkpoint();
    tables_job_ = state.tables_job();
    for (const v1::ShardPosition& p : state.positions()) {
      std::unique_ptr<ShardState>& shard = shards_[p.shard_id()];
      if (shard == nullptr) shard = std::make_unique<ShardState>();
      shard->id = p.shard_id();
      shard->stream_id = p.stream_id();
      shard->version = p.version();
    }
    EMBER_LOG(INFO) << "resuming " << state.positions_size() << " shard position(s) of "
                    << (state.bootstrap_checkpoint().empty() ? "an empty start"
                                                             : state.bootstrap_checkpoint());
  }
  // The dense tower: the pinned checkpoint, else the newest.
  std::string pinned;
  {
    absl::MutexLock lock(&mu_);
    pinned = pinned_;
  }
  absl::StatusOr<std::vector<v1::CheckpointManifest>> valid = ValidCheckpoints();
  if (valid.ok()) {
    for (const v1::CheckpointManifest& m : *valid) {
      if (m.name() == pinned && !LoadDense(m).ok()) {
        EMBER_LOG(WARNING) << "cannot load pinned " << pinned << "; following the newest";
        absl::MutexLock lock(&mu_);
        pinned_.clear();
      }
    }
  }
  MaybeAdvanceDense();
  opened_ = true;
  return absl::OkStatus();  // the control loop's first RefreshMap starts the shards
}

absl::StatusOr<std::string> Follower::ResolveJob() const {
  if (!options_.job.empty()) return options_.job;
  std::error_code ec;
  std::vector<std::string> jobs;
  for (const auto& entry : fs::directory_iterator(options_.checkpoint_root, ec)) {
    if (entry.is_directory()) jobs.push_back(entry.path().filename().string());
  }
  if (jobs.size() <= 1) return jobs.empty() ? "" : jobs[0];
  std::sort(jobs.begin(), jobs.end());
  return absl::FailedPreconditionError(
      absl::StrCat(options_.checkpoint_root, " holds the checkpoints of ", jobs.size(), " jobs (",
                   absl::StrJoin(jobs, ", "), "): pass --job to say which one to serve"));
}

std::string Follower::Job() const { return ResolveJob().value_or(""); }

std::optional<std::string> Follower::CoordinatorTablesJob() const {
  absl::StatusOr<std::string> job = ResolveJob();
  if (!job.ok() || job->empty()) return std::nullopt;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::GetJobRequest request;
  request.set_job(*job);
  v1::GetJobResponse response;
  if (!coordinator_->GetJob(&context, request, &response).ok()) return std::nullopt;
  return response.tables_job();
}

absl::StatusOr<std::vector<v1::CheckpointManifest>> Follower::ValidCheckpoints() const {
  EMBER_ASSIGN_OR_RETURN(const std::string job, ResolveJob());
  if (job.empty()) return std::vector<v1::CheckpointManifest>{};
  CheckpointCatalog catalog(options_.checkpoint_root);
  EMBER_ASSIGN_OR_RETURN(CheckpointListing listing, catalog.List(job));
  return std::move(listing.valid);
}

absl::StatusOr<std::map<uint32_t, Follower::ShardStream>> Follower::ShardStreams(
    const std::string& tables_job) const {
  std::map<uint32_t, std::string> addresses;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, shard] : shards_) addresses[id] = shard->address;
  }
  std::map<uint32_t, ShardStream> streams;
  for (const auto& [id, address] : addresses) {
    if (address.empty()) {
      return absl::UnavailableError(absl::StrCat("shard ", id, " has no address yet"));
    }
    std::unique_ptr<v1::PsService::Stub> stub = v1::PsService::NewStub(
        grpc::CreateChannel(address, OrInsecure(options_.channel_credentials)));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::GetShardInfoResponse info;
    v1::GetShardInfoRequest request;
    request.set_job(tables_job);
    const grpc::Status status = stub->GetShardInfo(&context, request, &info);
    if (!status.ok()) {
      return absl::UnavailableError(
          absl::StrCat("shard ", id, " (", address, "): ", status.error_message()));
    }
    ShardStream& stream = streams[id];
    stream.id = info.stream_id();
    stream.start_version = info.stream_start_version();
    stream.restored_from = info.stream_restored_from();
    stream.parent_id = info.stream_parent_id();
    stream.parent_version = info.stream_parent_version();
  }
  return streams;
}

absl::StatusOr<Follower::BootstrapPlan> Follower::PlanBootstrap(
    const std::vector<v1::CheckpointManifest>& valid) const {
  const v1::CheckpointManifest& newest = valid.back();
  BootstrapPlan plan;
  absl::StatusOr<std::map<uint32_t, ShardStream>> streams = ShardStreams(newest.tables_job());
  if (!streams.ok() || streams->empty()) {
    // Without every shard's word, the newest cut is the likeliest: a recovery restores
    // it (an OUT_OF_RANGE later brings the follower back here).
    if (!streams.ok()) {
      EMBER_LOG(WARNING) << "cannot ask every shard for its stream (" << streams.status()
                         << "); bootstrapping from the newest checkpoint";
    }
    plan.checkpoint = newest.name();
    plan.from = CutOf(newest);
    return plan;
  }
  // The newest checkpoint whose cut every shard's stream continues: the cut lies on the
  // stream, or the stream began with a restore that continues it.
  for (auto m = valid.rbegin(); m != valid.rend(); ++m) {
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> from = CutOf(*m);
    bool continues = true;
    for (const auto& [id, stream] : *streams) {
      auto it = from.find(id);
      if (it == from.end()) {
        // A shard the cut does not know: only a stream from an empty store covers it.
        continues = stream.start_version == 0 && stream.restored_from.empty();
        if (continues) from[id] = {stream.id, 0};
      } else {
        const auto [snap_stream, snap_version] = it->second;
        continues = (snap_stream == stream.id && snap_version >= stream.start_version) ||
                    (stream.parent_id != 0 && snap_stream == stream.parent_id &&
                     snap_version == stream.parent_version);
      }
      if (!continues) break;
    }
    if (!continues) continue;
    plan.checkpoint = m->name();
    plan.from = std::move(from);
    return plan;
  }
  // Every shard began its stream with a restore of one checkpoint (an operator's
  // restore of an older one, or a restore onto other slots than the cut's): its rows,
  // all of them, are that checkpoint's, and each stream follows from its start.
  const std::string& restored = streams->begin()->second.restored_from;
  bool all_restored = !restored.empty();
  for (const auto& [id, stream] : *streams) all_restored &= stream.restored_from == restored;
  const bool valid_restored =
      std::any_of(valid.begin(), valid.end(),
                  [&](const v1::CheckpointManifest& m) { return m.name() == restored; });
  if (all_restored && valid_restored) {
    plan.checkpoint = restored;
    for (const auto& [id, stream] : *streams) plan.from[id] = {stream.id, stream.start_version};
    return plan;
  }
  std::string why;
  for (const auto& [id, stream] : *streams) {
    absl::StrAppend(&why, why.empty() ? "" : "; ", "shard ", id, "'s stream began at version ",
                    stream.start_version,
                    stream.restored_from.empty()
                        ? std::string(" when its process started")
                        : absl::StrCat(" with a restore of ", stream.restored_from));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no valid checkpoint is a cut every shard's update stream continues (", why,
                   "): waiting for the training job's next checkpoint"));
}

absl::Status Follower::Bootstrap() {
  EMBER_ASSIGN_OR_RETURN(const std::vector<v1::CheckpointManifest> valid, ValidCheckpoints());
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> from;  // shard -> (stream, version)
  std::string name;
  std::optional<StagedRestore> staged;  // none: nothing to import
  // The store followed from here on: the checkpoint's, or without one the coordinator's
  // word for the job's run (the shared tables when it knows none).
  const std::optional<std::string> run = CoordinatorTablesJob();
  std::string tables_job = run.value_or("");
  if (valid.empty()) {
    // Nothing to import: only an empty store can start at (stream 0, version 0).
    bool bootstrapped_before = false;
    {
      absl::MutexLock lock(&mu_);
      bootstrapped_before = bootstraps_ > 0;
    }
    if (storage_->store()->EstimatedStoredRows() > 0 || bootstrapped_before) {
      return absl::FailedPreconditionError(
          "a shard's stream cannot be resumed and there is no checkpoint to bootstrap from "
          "yet: waiting for the training job's first checkpoint");
    }
  } else {
    EMBER_ASSIGN_OR_RETURN(BootstrapPlan plan, PlanBootstrap(valid));
    name = plan.checkpoint;
    from = std::move(plan.from);
    CheckpointCatalog catalog(options_.checkpoint_root);
    const std::string job = Job();
    EMBER_ASSIGN_OR_RETURN(const std::vector<v1::CheckpointManifest> chain,
                           catalog.Chain(job, name));
    if (run.has_value() && *run != chain.back().tables_job()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", name, " is of the job's ",
                       chain.back().tables_job().empty() ? "shared tables" : "own tables",
                       ", its run now trains on ", run->empty() ? "the shared ones" : "its own",
                       ": waiting for the run's first checkpoint"));
    }
    tables_job = chain.back().tables_job();
    std::vector<std::string> dirs;
    for (const v1::CheckpointManifest& link : chain) dirs.push_back(catalog.Dir(job, link.name()));
    EMBER_LOG(INFO) << "bootstrapping from " << name << " (" << chain.size() << " link(s))";
    // The import runs next to the live store, which keeps serving meanwhile.
    EMBER_ASSIGN_OR_RETURN(staged,
                           storage_->StageRestore(chain, dirs, [](uint32_t) { return true; }));
  }
  {
    // The swap, the new positions and the generation bump are one step for Apply (which
    // holds apply_mu_ from its generation check to its import): an apply of the old
    // generation lands before the swap, which replaces it, or sees the new generation
    // and is dropped. With the bump after the swap, an old-stream message could land on
    // the freshly imported rows, and its older values outlived the bootstrap.
    absl::MutexLock apply(&apply_mu_);
    if (staged.has_value()) {
      absl::WriterMutexLock store(&store_mu_);
      EMBER_RETURN_IF_ERROR(storage_->CommitRestore(*staged).status());
    }
    absl::MutexLock lock(&mu_);
    ++generation_;
    ++bootstraps_;
    bootstrap_checkpoint_ = name;
    bootstrap_requested_ = false;
    tables_job_ = tables_job;
    sparse_step_ = 0;
    std::fill(slot_epoch_.begin(), slot_epoch_.end(), 0);
    for (const auto& [id, position] : from) {
      if (shards_.find(id) == shards_.end()) {
        shards_[id] = std::make_unique<ShardState>();
        shards_[id]->id = id;
      }
    }
    for (auto& [id, shard] : shards_) {
      auto it = from.find(id);
      shard->stream_id = it == from.end() ? 0 : it->second.first;
      shard->version = it == from.end() ? 0 : it->second.second;
      shard->received = false;
      shard->watermark = shard->version;
      shard->resync_active = false;
      if (shard->active != nullptr) shard->active->TryCancel();
    }
    if (!name.empty()) {
      for (const v1::CheckpointManifest& m : valid) {
        if (m.name() == name) sparse_step_ = static_cast<int64_t>(m.step());
      }
    }
  }
  if (staged.has_value()) {
    EMBER_LOG(INFO) << "bootstrapped " << staged->rows << " rows from " << name << " in "
                    << staged->seconds << " s";
  }
  return PersistState();
}

absl::Status Follower::PersistState(absl::Duration spread) {
  absl::MutexLock persist(&persist_mu_);
  v1::FollowerState state;
  {
    // Waits for the applies in flight, so the positions cover every row applied so far
    // (rows applied after may be durable too: a restart fetches them again from these
    // positions, with current values, which changes nothing).
    absl::MutexLock apply(&apply_mu_);
    absl::MutexLock lock(&mu_);
    state.set_bootstrap_checkpoint(bootstrap_checkpoint_);
    state.set_pinned_checkpoint(pinned_);
    state.set_tables_job(tables_job_);
    for (const auto& [id, shard] : shards_) {
      v1::ShardPosition* p = state.add_positions();
      p->set_shard_id(id);
      p->set_stream_id(shard->stream_id);
      p->set_version(shard->version);
    }
  }
  absl::ReaderMutexLock store(&store_mu_);
  // Rows first (every dirty row, then RocksDB's memtables), then the positions that
  // cover them, flushed in turn. Without a WAL a crash keeps the newest complete flush:
  // positions are never ahead of the rows they cover.
  EMBER_RETURN_IF_ERROR(storage_->store()->Flush(spread));
  EMBER_RETURN_IF_ERROR(
      storage_->rocksdb()->Write({{kMetaTable, kStateKey, state.SerializeAsString(), false}}));
  return storage_->rocksdb()->Flush();
}

absl::Status Follower::LoadDense(const v1::CheckpointManifest& manifest) {
  CheckpointCatalog catalog(options_.checkpoint_root);
  EMBER_ASSIGN_OR_RETURN(const v1::WorkerState worker, catalog.ReadWorkerState(manifest));
  // Built before the lock: the version and its model change in one step below.
  absl::StatusOr<std::unique_ptr<ServedModel>> model = ServedModel::Create(worker, manifest.name());
  if (absl::IsFailedPrecondition(model.status())) {
    // Expected of a Python job's checkpoints: one line per version, not a warning.
    EMBER_LOG(INFO) << "Predict cannot score " << manifest.name() << ": " << model.status();
  } else if (!model.ok()) {
    EMBER_LOG(WARNING) << "Predict cannot score " << manifest.name() << ": " << model.status();
  }
  absl::MutexLock lock(&mu_);
  dense_.checkpoint = manifest.name();
  dense_.step = manifest.step();
  dense_.parameters = worker.dense_parameters();
  dense_.config_digest = worker.config_digest();
  if (model.ok()) {
    dense_.model = std::shared_ptr<const ServedModel>(std::move(*model));
  } else {
    dense_.model = model.status();
  }
  return absl::OkStatus();
}

void Follower::MaybeAdvanceDense() {
  {
    absl::MutexLock lock(&mu_);
    if (!pinned_.empty()) return;
  }
  absl::StatusOr<std::vector<v1::CheckpointManifest>> valid = ValidCheckpoints();
  if (!valid.ok()) return;
  for (auto it = valid->rbegin(); it != valid->rend(); ++it) {
    if (!it->has_worker_state()) continue;
    {
      absl::MutexLock lock(&mu_);
      if (it->name() == dense_.checkpoint || it->step() < dense_.step) return;
    }
    const absl::Status loaded = LoadDense(*it);
    if (loaded.ok()) {
      EMBER_LOG(INFO) << "serving dense parameters of " << it->name();
      return;
    }
    EMBER_LOG(WARNING) << "cannot load dense parameters of " << it->name() << ": " << loaded;
  }
}

void Follower::WarnIfUntrainedDense() {
  absl::MutexLock lock(&mu_);
  if (dense_.checkpoint.empty() || dense_.step != 0 || sparse_step_ <= 0 ||
      warned_dense_ == dense_.checkpoint) {
    return;
  }
  warned_dense_ = dense_.checkpoint;
  EMBER_LOG(WARNING) << "serving the untrained dense tower of " << dense_.checkpoint
                     << " (step 0) beside rows trained up to step " << sparse_step_
                     << ": the job has no later checkpoint yet (a run checkpoints at its end; "
                        "set checkpoint.every_steps for checkpoints while it runs, and "
                        "--max_staleness_steps to hold rows until their dense tower is served)";
}

void Follower::RefreshMap() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::GetClusterMapResponse map;
  v1::GetClusterMapRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_job(tables_job_);
  }
  if (!coordinator_->GetClusterMap(&context, request, &map).ok()) return;
  // The job's run on another store than the one followed (a run with tables of its own
  // started after this follower): bootstrap again, onto that store's streams.
  if (const std::optional<std::string> run = CoordinatorTablesJob();
      run.has_value() && *run != request.job()) {
    absl::MutexLock lock(&mu_);
    if (!bootstrap_requested_) {
      EMBER_LOG(INFO) << "the job's tables are now "
                      << (run->empty() ? std::string("the shared ones")
                                       : absl::StrCat("its own (store '", *run, "')"))
                      << ": bootstrapping again";
      bootstrap_requested_ = true;
    }
  }
  {
    absl::ReaderMutexLock store(&store_mu_);
    for (const v1::TableConfig& table : map.tables()) {
      if (!storage_->store()->GetTableConfig(table.name()).ok()) {
        storage_->store()->CreateTable(table).IgnoreError();
      }
    }
  }
  absl::MutexLock lock(&mu_);
  for (const v1::TableConfig& table : map.tables()) map_tables_[table.name()] = table;
  for (const v1::ShardInfo& info : map.shards()) {
    std::unique_ptr<ShardState>& shard = shards_[info.shard_id()];
    if (shard == nullptr) {
      shard = std::make_unique<ShardState>();
      shard->id = info.shard_id();
    }
    shard->address = info.address();
    if (!shard->thread_started && following_ && !stopping_) {
      shard->thread_started = true;
      shard_threads_.emplace_back([this, id = info.shard_id()] { RunShard(id); });
    }
  }
}

void Follower::ControlLoop() {
  absl::Time last_persist = absl::Now();
  // Shards known before the loop started get their threads now.
  RefreshMap();
  while (true) {
    bool bootstrap = false;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]()
                      ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || bootstrap_requested_; };
      mu_.AwaitWithTimeout(absl::Condition(&wake),
                           std::min(options_.refresh_interval, options_.persist_interval));
      if (stopping_) return;
      bootstrap = bootstrap_requested_;
    }
    if (bootstrap) {
      const absl::Status status = Bootstrap();
      absl::MutexLock lock(&mu_);
      bootstrap_error_ = status.ok() ? "" : std::string(status.message());
      if (!status.ok()) {
        EMBER_LOG(WARNING) << "bootstrap failed: " << status;
        bootstrap_requested_ = false;
      }
    }
    RefreshMap();
    MaybeAdvanceDense();
    WarnIfUntrainedDense();
    if (absl::Now() - last_persist >= options_.persist_interval) {
      // Spread over a fifth of the interval: the applies keep their share of the CPU.
      const absl::Status persisted = PersistState(options_.persist_interval / 5);
      if (!persisted.ok()) EMBER_LOG(WARNING) << "persisting positions failed: " << persisted;
      last_persist = absl::Now();
    }
  }
}

absl::Status Follower::Stop() {
  if (stopped_.exchange(true)) return absl::OkStatus();
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, shard] : shards_) {
      if (shard->active != nullptr) shard->active->TryCancel();
    }
  }
  if (control_.joinable()) control_.join();
  {
    absl::MutexLock lock(&mu_);
    threads.swap(shard_threads_);
  }
  for (std::thread& t : threads) t.join();
  if (!opened_) {
    // Open failed: nothing was followed, and what is on disk (perhaps the very state
    // that failed to load) stays as it is for the operator to look at.
    if (storage_ == nullptr) return absl::OkStatus();
    absl::WriterMutexLock store(&store_mu_);
    return storage_->Close();
  }
  absl::Status status = PersistState();
  absl::WriterMutexLock store(&store_mu_);
  const absl::Status closed = storage_->Close();
  return status.ok() ? closed : status;
}

// ------------------------------------------------------------------------ Read side

v1::ModelVersion Follower::VersionLocked() const {
  v1::ModelVersion version;
  version.set_checkpoint(dense_.checkpoint);
  version.set_dense_step(dense_.step);
  version.set_sparse_step(static_cast<uint64_t>(std::max<int64_t>(sparse_step_, 0)));
  version.set_pinned(!pinned_.empty());
  return version;
}

absl::StatusOr<uint32_t> Follower::Lookup(const std::string& table, absl::Span<const uint64_t> ids,
                                          std::vector<float>* out, v1::ModelVersion* version) {
  if (ids.empty()) return absl::InvalidArgumentError("Lookup needs at least one id");
  if (ids.size() > options_.max_batch_keys) {
    return absl::InvalidArgumentError(absl::StrCat("Lookup of ", ids.size(), " ids; the most is ",
                                                   options_.max_batch_keys, " (--max_batch_keys)"));
  }
  std::vector<uint8_t> unknown;
  size_t dim = 0;
  {
    absl::ReaderMutexLock store(&store_mu_);
    if (stopped_) return absl::UnavailableError("ember-serving is stopping");
    EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config, storage_->store()->GetTableConfig(table));
    dim = config.dim();
    out->resize(ids.size() * dim);
    EMBER_RETURN_IF_ERROR(storage_->store()->Pull(table, ids, absl::MakeSpan(*out), &unknown));
  }
  uint32_t unknown_ids = 0;
  for (size_t i = 0; i < unknown.size(); ++i) {
    if (unknown[i] == 0) continue;
    ++unknown_ids;
    if (options_.unknown_as_zeros) std::fill_n(out->begin() + i * dim, dim, 0.0f);
  }
  lookups_.fetch_add(1, std::memory_order_relaxed);
  if (version != nullptr) {
    absl::MutexLock lock(&mu_);
    *version = VersionLocked();
  }
  return unknown_ids;
}

v1::ServingStatus Follower::Status() const {
  v1::ServingStatus status;
  status.set_job(Job());
  status.set_max_staleness_steps(options_.max_staleness_steps);
  status.set_lookups(lookups_.load(std::memory_order_relaxed));
  status.set_predict_rows_scored(predict_rows_scored_.load(std::memory_order_relaxed));
  status.set_predict_rows_refused(predict_rows_refused_.load(std::memory_order_relaxed));
  {
    absl::ReaderMutexLock store(&store_mu_);
    if (!stopped_) {
      for (const std::string& t : storage_->store()->ListTables()) status.add_tables(t);
      status.set_rows_in_memory(storage_->store()->Stats().rows_in_memory);
      status.set_stored_rows(storage_->store()->EstimatedStoredRows());
    }
  }
  absl::MutexLock lock(&mu_);
  status.set_bootstrap_checkpoint(bootstrap_checkpoint_);
  status.set_bootstrap_error(bootstrap_error_);
  status.set_bootstraps(bootstraps_);
  *status.mutable_version() = VersionLocked();
  // Ready: following every known shard, each stream open and heard from.
  bool ready = !shards_.empty() && !bootstrap_requested_;
  for (const auto& [id, shard] : shards_) {
    v1::ShardFollowState* s = status.add_shards();
    s->set_shard_id(id);
    s->set_address(shard->address);
    s->set_connected(shard->connected);
    s->set_stream_id(shard->stream_id);
    s->set_applied_version(shard->version);
    s->set_shard_watermark(shard->watermark);
    s->set_lag_versions(shard->watermark > shard->version ? shard->watermark - shard->version : 0);
    s->set_lag_seconds(shard->lag_seconds);
    s->set_batches_applied(shard->batches);
    s->set_rows_applied(shard->rows);
    s->set_tombstones_applied(shard->tombstones);
    s->set_reconnects(shard->reconnects);
    s->set_last_error(shard->last_error);
    s->set_held_for_staleness(shard->held);
    s->set_resyncs_applied(shard->resyncs);
    if (!shard->received || !shard->connected) ready = false;
  }
  status.set_ready(ready);
  return status;
}

absl::StatusOr<v1::ListModelVersionsResponse> Follower::ListVersions() const {
  EMBER_ASSIGN_OR_RETURN(const std::vector<v1::CheckpointManifest> valid, ValidCheckpoints());
  v1::ListModelVersionsResponse response;
  for (const v1::CheckpointManifest& m : valid) {
    v1::ModelVersionInfo* info = response.add_versions();
    info->set_checkpoint(m.name());
    info->set_step(m.step());
    info->set_created_unix_ms(m.created_unix_ms());
    info->set_has_dense(m.has_worker_state());
  }
  absl::MutexLock lock(&mu_);
  *response.mutable_current() = VersionLocked();
  return response;
}

absl::StatusOr<v1::ModelVersion> Follower::Pin(const std::string& checkpoint) {
  if (checkpoint.empty() || checkpoint == "latest") {
    {
      absl::MutexLock lock(&mu_);
      pinned_.clear();
    }
    MaybeAdvanceDense();
  } else {
    EMBER_ASSIGN_OR_RETURN(const std::vector<v1::CheckpointManifest> valid, ValidCheckpoints());
    const v1::CheckpointManifest* found = nullptr;
    for (const v1::CheckpointManifest& m : valid) {
      if (m.name() == checkpoint) found = &m;
    }
    if (found == nullptr) {
      return absl::NotFoundError(absl::StrCat("no valid checkpoint '", checkpoint, "' of job '",
                                              Job(), "' (emberctl serving versions lists them)"));
    }
    if (!found->has_worker_state()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint '", checkpoint, "' holds no dense parameters"));
    }
    EMBER_RETURN_IF_ERROR(LoadDense(*found));
    absl::MutexLock lock(&mu_);
    pinned_ = checkpoint;
  }
  EMBER_RETURN_IF_ERROR(PersistState());
  absl::MutexLock lock(&mu_);
  return VersionLocked();
}

absl::StatusOr<v1::GetDenseParametersResponse> Follower::DenseParameters() const {
  absl::MutexLock lock(&mu_);
  if (dense_.checkpoint.empty()) {
    return absl::UnavailableError("no dense parameters loaded yet (no checkpoint with them)");
  }
  v1::GetDenseParametersResponse response;
  *response.mutable_version() = VersionLocked();
  response.set_dense_parameters(dense_.parameters);
  response.set_config_digest(dense_.config_digest);
  return response;
}

absl::StatusOr<v1::ChecksumResponse> Follower::Checksum(const std::string& table) {
  absl::ReaderMutexLock store(&store_mu_);
  if (stopped_) return absl::UnavailableError("ember-serving is stopping");
  std::vector<std::string> tables = storage_->store()->ListTables();
  if (!table.empty()) tables = {table};
  std::sort(tables.begin(), tables.end());
  v1::ChecksumResponse response;
  for (const std::string& t : tables) {
    EMBER_ASSIGN_OR_RETURN(const TableChecksum sum, storage_->store()->Checksum(t));
    v1::ChecksumResponse::Table* out = response.add_tables();
    out->set_table(sum.table);
    out->set_rows(sum.rows);
    out->set_digest(sum.digest);
  }
  return response;
}

}  // namespace ember
