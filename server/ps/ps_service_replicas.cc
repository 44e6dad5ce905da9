// Copyright 2026 The Ember Authors.
//
// PsServiceImpl, part 4: hot keys (hotkeys.proto). Heavy hitters per table, the hot
// set, replica reads (PullRequest.replica_read), PutReplicas, and what the owner side
// (ReplicaOwner) needs from the store.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/float16.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "server/ps/ps_service.h"
#include "server/ps/request_codec.h"
#include "server/store/initializer.h"
#include "server/store/row_layout.h"

namespace ember {

namespace {

// Which held copies a replica pull may answer from: a hot key whose slot's owner is
// another shard, copied from that owner, to this shard as one of its holders, from
// the owner's incarnation (when known) and a current attempt, and in periodic mode no
// older than the staleness bounds. Runs under a replica stripe's read lock: cheap.
class ReplicaAcceptor {
 public:
  ReplicaAcceptor(const HotSetView& view, const SlotMap& map, const std::string& table,
                  uint64_t seed, uint32_t shard_id, uint64_t attempt, int64_t request_step,
                  absl::Span<const uint64_t> ids)
      : view_(view),
        map_(map),
        hot_(view.HotKeys(table)),
        seed_(seed),
        shard_id_(shard_id),
        attempt_(attempt),
        request_step_(request_step),
        ids_(ids),
        periodic_(view.proto().refresh_interval_ms() > 0),
        max_age_(absl::Milliseconds(view.proto().max_staleness_ms() > 0
                                        ? view.proto().max_staleness_ms()
                                        : 4 * int64_t{view.proto().refresh_interval_ms()})),
        max_steps_(view.proto().max_staleness_steps()),
        now_(absl::Now()) {}

  bool operator()(size_t i, const ReplicaMeta& meta) const {
    const uint64_t id = ids_[i];
    if (hot_ == nullptr || !hot_->contains(id)) return false;
    const uint32_t owner = map_.OwnerOf(SlotOf(seed_, id));
    if (owner == shard_id_ || meta.source.owner_shard != owner) return false;
    const OwnerInfo& info = Info(owner);
    if (!info.holder) return false;
    if (info.incarnation != 0 && info.incarnation != meta.source.owner_incarnation) return false;
    if (meta.source.owner_attempt < attempt_) return false;
    if (periodic_) {
      if (now_ - meta.copied > max_age_) return false;
      if (max_steps_ > 0 && request_step_ > 0 && request_step_ - meta.source.step > max_steps_) {
        return false;
      }
    }
    return true;
  }

 private:
  // Per owner (few): whether this shard holds its keys, and its incarnation if known.
  struct OwnerInfo {
    bool holder = false;
    uint64_t incarnation = 0;
  };

  const OwnerInfo& Info(uint32_t owner) const {
    auto [it, inserted] = owners_.try_emplace(owner);
    if (inserted) {
      const std::vector<uint32_t> holders = view_.ReplicaHoldersOf(owner);
      it->second.holder = std::find(holders.begin(), holders.end(), shard_id_) != holders.end();
      for (const v1::HotSetHolder& h : view_.proto().holders()) {
        if (h.shard_id() == owner) it->second.incarnation = h.incarnation();
      }
    }
    return it->second;
  }

  const HotSetView& view_;
  const SlotMap& map_;
  const absl::flat_hash_set<uint64_t>* const hot_;
  const uint64_t seed_;
  const uint32_t shard_id_;
  const uint64_t attempt_;
  const int64_t request_step_;
  const absl::Span<const uint64_t> ids_;
  const bool periodic_;
  const absl::Duration max_age_;
  const int64_t max_steps_;
  const absl::Time now_;
  mutable absl::flat_hash_map<uint32_t, OwnerInfo> owners_;  // a cache, filled by Info
};

// Writes the accepted copies of `ids` (dim floats each; zeros where missing) to *out
// in the request's encoding, straight into *out for aligned float32. Returns the
// number answered; the missing positions go to *missing (ascending).
size_t ReadReplicas(const ReplicaStore& replicas, const v1::PullRequest& request,
                    absl::Span<const uint64_t> ids, uint32_t dim, size_t element_bytes,
                    absl::FunctionRef<bool(size_t i, const ReplicaMeta& meta)> accept,
                    std::string* out, std::vector<uint32_t>* missing) {
  const size_t elements = ids.size() * dim;
  if (request.encoding() == v1::VALUE_ENCODING_FLOAT32) {
    out->resize(elements * sizeof(float));
  }
  if (request.encoding() == v1::VALUE_ENCODING_FLOAT32 &&
      reinterpret_cast<uintptr_t>(out->data()) % alignof(float) == 0) {
    return replicas.Get(request.table(), ids, accept,
                        absl::MakeSpan(reinterpret_cast<float*>(out->data()), elements), missing);
  }
  std::vector<float> values(elements);
  const size_t answered =
      replicas.Get(request.table(), ids, accept, absl::MakeSpan(values), missing);
  out->clear();
  out->reserve(values.size() * element_bytes);
  if (request.encoding() == v1::VALUE_ENCODING_FLOAT16) {
    AppendFloat16Bytes(values, out);
  } else {
    AppendFloat32Bytes(values, out);
  }
  return answered;
}

}  // namespace

void PsServiceImpl::RebuildReplicaOwner() {
  owner_->Stop();
  ReplicaOwnerOptions options = hot_options_.owner;
  options.sender.admin_token = admin_policy_.token;
  options.sender.channel_credentials = peer_credentials_;
  owner_ = std::make_unique<ReplicaOwner>(static_cast<ReplicaHost*>(this), shard_id_, incarnation_,
                                          options, metrics_);
}

void PsServiceImpl::SetHotKeyOptions(const HotKeyOptions& options) {
  hot_options_ = options;
  RebuildReplicaOwner();
  absl::MutexLock lock(&hitters_mu_);
  hitters_.clear();
}

void PsServiceImpl::RequireAdmin(AdminPolicy policy) {
  admin_policy_ = std::move(policy);
  RebuildReplicaOwner();
}

void PsServiceImpl::SetPeerCredentials(std::shared_ptr<grpc::ChannelCredentials> credentials) {
  peer_credentials_ = std::move(credentials);
  RebuildReplicaOwner();
}

void PsServiceImpl::RecordServed(const std::string& table, absl::Span<const uint64_t> ids) {
  if (ids.empty()) return;
  HeavyHitters* hitters = nullptr;
  {
    absl::ReaderMutexLock lock(&hitters_mu_);
    auto it = hitters_.find(table);
    if (it != hitters_.end()) hitters = it->second.get();
  }
  if (hitters == nullptr) {
    absl::MutexLock lock(&hitters_mu_);
    std::unique_ptr<HeavyHitters>& slot = hitters_[table];
    if (slot == nullptr) slot = std::make_unique<HeavyHitters>(hot_options_.heavy_hitters);
    hitters = slot.get();  // never removed while the service lives
  }
  hitters->Record(ids, absl::Now());
}

v1::HotKeyReport PsServiceImpl::HotKeyReport(size_t top_n) const {
  std::vector<std::pair<std::string, const HeavyHitters*>> tables;
  {
    absl::ReaderMutexLock lock(&hitters_mu_);
    for (const auto& [name, hitters] : hitters_) tables.emplace_back(name, hitters.get());
  }
  std::sort(tables.begin(), tables.end());
  const absl::Time now = absl::Now();
  v1::HotKeyReport report;
  double total = 0;
  for (const auto& [name, hitters] : tables) {
    total += hitters->TotalRate(now);
    std::vector<v1::HotKey> keys = hitters->Top(top_n, now);
    if (metrics_ != nullptr) {
      std::vector<double> rates;
      for (size_t i = 0; i < keys.size() && i < PsMetrics::kHotKeyRanks; ++i) {
        rates.push_back(keys[i].rate());
      }
      metrics_->SetHotKeyRates(name, rates);
    }
    if (keys.empty()) continue;
    v1::HotKeyTable* table = report.add_tables();
    table->set_table(name);
    for (v1::HotKey& key : keys) *table->add_keys() = std::move(key);
  }
  report.set_total_rate(total);
  return report;
}

void PsServiceImpl::ApplyHotSet(const v1::HotSet& hot_set) {
  auto view = std::make_shared<const HotSetView>(hot_set);
  if (!owner_->SetHotSet(view)) return;
  // Copies of keys that are no longer hot, or no longer this shard's to hold, are
  // never served: free them now (their owners also drop them).
  absl::flat_hash_map<uint32_t, bool> holds;  // per owner
  replicas_.DropIf([&](absl::string_view table, uint64_t id, const ReplicaMeta& meta) {
    if (!view->IsHot(table, id)) return true;
    auto [it, inserted] = holds.try_emplace(meta.source.owner_shard, false);
    if (inserted) {
      const std::vector<uint32_t> holders = view->ReplicaHoldersOf(meta.source.owner_shard);
      it->second = std::find(holders.begin(), holders.end(), shard_id_) != holders.end();
    }
    return !it->second;
  });
  if (metrics_ != nullptr) {
    metrics_->SetHotSet(view->version(), view->size());
    metrics_->SetReplicaRows(replicas_.size());
  }
}

void PsServiceImpl::ReplicasAfterMapChange() {
  const std::shared_ptr<const SlotMap> map = slot_map();
  absl::flat_hash_map<std::string, uint64_t> seeds;
  for (const std::string& name : default_job_->store->ListTables()) {
    absl::StatusOr<v1::TableConfig> config = default_job_->store->GetTableConfig(name);
    if (config.ok()) seeds[name] = config->seed();
  }
  // A copy whose owner is no longer its slot's owner is never served: free it.
  replicas_.DropIf([&](absl::string_view table, uint64_t id, const ReplicaMeta& meta) {
    auto seed = seeds.find(table);
    return seed == seeds.end() || map->OwnerOf(SlotOf(seed->second, id)) != meta.source.owner_shard;
  });
  if (metrics_ != nullptr) metrics_->SetReplicaRows(replicas_.size());
  owner_->MapChanged();
}

absl::Status PsServiceImpl::DoReplicaPull(const v1::PullRequest& request,
                                          v1::PullResponse* response) {
  EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config,
                         default_job_->store->GetTableConfig(request.table()));
  EMBER_ASSIGN_OR_RETURN(const size_t element_bytes, ElementBytes(request.encoding()));
  EMBER_ASSIGN_OR_RETURN(const std::vector<uint64_t> ids,
                         DecodeIds(request.ids(), max_batch_keys_));
  const std::shared_ptr<const HotSetView> view = owner_->view();
  const std::shared_ptr<const SlotMap> map = slot_map();
  ReplicaAcceptor accept(*view, *map, request.table(), config.seed(), shard_id_, this->attempt(),
                         request.step(), ids);
  std::vector<uint32_t> missing;
  const size_t answered = ReadReplicas(replicas_, request, ids, config.dim(), element_bytes, accept,
                                       response->mutable_values(), &missing);
  for (uint32_t position : missing) response->add_replica_missing(position);
  replica_pulled_keys_.fetch_add(answered, std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->CountReplicaPull(answered, missing.size());
  if (answered > 0) {
    // The keys answered here count as this shard's load (the coordinator sums them).
    std::vector<uint64_t> served;
    served.reserve(answered);
    size_t next_missing = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (next_missing < missing.size() && missing[next_missing] == i) {
        ++next_missing;
        continue;
      }
      served.push_back(ids[i]);
    }
    RecordServed(request.table(), served);
  }
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoPutReplicas(const v1::PutReplicasRequest& request,
                                          v1::PutReplicasResponse* response) {
  absl::ReaderMutexLock lock(&default_job_->mu);
  EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config,
                         default_job_->store->GetTableConfig(request.table()));
  if (request.owner_shard() == shard_id_) {
    return absl::InvalidArgumentError(
        absl::StrCat("PutReplicas from shard ", shard_id_,
                     " to itself: a shard holds no replicas of its own keys"));
  }
  if (request.owner_incarnation() == 0) {
    return absl::InvalidArgumentError("PutReplicas needs the owner's incarnation");
  }
  EMBER_ASSIGN_OR_RETURN(const std::vector<uint64_t> ids,
                         DecodeIds(request.ids(), max_batch_keys_));
  ReplicaSource source;
  source.owner_shard = request.owner_shard();
  source.owner_incarnation = request.owner_incarnation();
  source.owner_attempt = request.owner_attempt();
  source.step = request.step();
  source.hot_set_version = request.hot_set_version();
  const absl::Time now = absl::Now();
  if (request.drop()) {
    if (!request.values().empty() || !request.versions().empty()) {
      return absl::InvalidArgumentError("PutReplicas with drop carries no values or versions");
    }
    response->set_applied(static_cast<uint32_t>(replicas_.Drop(request.table(), source, ids, now)));
    if (metrics_ != nullptr) metrics_->SetReplicaRows(replicas_.size());
    return absl::OkStatus();
  }
  const size_t dim = config.dim();
  if (request.values().size() != ids.size() * dim * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat("values length ", request.values().size(),
                                                   " != ids ", ids.size(), " * dim ", dim, " * 4"));
  }
  if (request.versions().size() != ids.size() * sizeof(uint64_t)) {
    return absl::InvalidArgumentError(absl::StrCat("versions length ", request.versions().size(),
                                                   " != ids ", ids.size(), " * 8"));
  }
  std::vector<float> values(ids.size() * dim);
  DecodeFloat32Bytes(request.values(), absl::MakeSpan(values));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("value ", i % dim, " of id ", ids[i / dim], " is not finite"));
    }
  }
  std::vector<uint64_t> versions(ids.size());
  std::memcpy(versions.data(), request.versions().data(), request.versions().size());
  const uint64_t attempt = this->attempt();
  if (request.owner_attempt() < attempt) {
    return absl::AbortedError(absl::StrCat("shard ", shard_id_, " serves job attempt ", attempt,
                                           "; refusing replicas of attempt ",
                                           request.owner_attempt()));
  }
  size_t refused = 0;
  response->set_applied(static_cast<uint32_t>(replicas_.Put(
      request.table(), static_cast<uint32_t>(dim), source, ids, values, versions, now, &refused)));
  if (metrics_ != nullptr) metrics_->SetReplicaRows(replicas_.size());
  if (refused > 0) {
    // The copies that fit are kept; the refused ids are read from their owner.
    return absl::ResourceExhaustedError(absl::StrCat(
        "shard ", shard_id_, ": ", refused, " of ", ids.size(), " replica copies refused: the ",
        "replicas' share of --memory_limit_mb (", replicas_.max_bytes(), " bytes) is full"));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PsServiceImpl::PutReplicas(grpc::CallbackServerContext* context,
                                                     const v1::PutReplicasRequest* request,
                                                     v1::PutReplicasResponse* response) {
  const int64_t start = CallStart();
  absl::Status status = AuthorizeAdmin(context);
  if (status.ok()) status = DoPutReplicas(*request, response);
  return FinishNamed(context, "PutReplicas", start, status, *request, *response);
}

void PsServiceImpl::KeepOwned(const std::string& table, std::vector<uint64_t>* ids) {
  uint64_t seed = 0;
  {
    absl::ReaderMutexLock lock(&default_job_->mu);
    absl::StatusOr<v1::TableConfig> config = default_job_->store->GetTableConfig(table);
    if (!config.ok()) {
      ids->clear();
      return;
    }
    seed = config->seed();
  }
  const std::shared_ptr<const SlotMap> map = slot_map();
  ids->erase(
      std::remove_if(ids->begin(), ids->end(),
                     [&](uint64_t id) { return map->OwnerOf(SlotOf(seed, id)) != shard_id_; }),
      ids->end());
}

absl::Status PsServiceImpl::ReadOwnedRows(const std::string& table, std::vector<uint64_t>* ids,
                                          v1::PutReplicasRequest* request) {
  absl::ReaderMutexLock lock(&default_job_->mu);
  EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config, default_job_->store->GetTableConfig(table));
  const std::shared_ptr<const SlotMap> map = slot_map();
  ids->erase(std::remove_if(
                 ids->begin(), ids->end(),
                 [&](uint64_t id) { return map->OwnerOf(SlotOf(config.seed(), id)) != shard_id_; }),
             ids->end());
  request->clear_ids();
  request->clear_values();
  request->clear_versions();
  if (ids->empty()) return absl::OkStatus();
  // Read before the rows: an unstored row is stamped with it (see ps.proto).
  const uint64_t watermark = default_job_->store->version();
  EMBER_ASSIGN_OR_RETURN(const std::vector<EncodedRow> rows,
                         default_job_->store->ReadEncodedRows(table, *ids));
  const uint32_t dim = config.dim();
  std::vector<float> values(ids->size() * dim);
  std::vector<uint64_t> versions(ids->size());
  for (size_t i = 0; i < rows.size(); ++i) {
    float* dest = values.data() + i * dim;
    if (rows[i].value.empty()) {
      InitEmbedding(config.initializer(), config.seed(), (*ids)[i], dest, dim);
      versions[i] = watermark;
      continue;
    }
    if (rows[i].value.size() < RowBytes(dim)) {
      return absl::DataLossError(absl::StrCat("stored row of id ", (*ids)[i], " in table ", table,
                                              " has ", rows[i].value.size(), " bytes"));
    }
    RowMeta meta;
    std::memcpy(&meta, rows[i].value.data(), sizeof(meta));
    std::memcpy(dest, rows[i].value.data() + sizeof(RowMeta), dim * sizeof(float));
    versions[i] = meta.version;
  }
  request->set_ids(
      std::string(reinterpret_cast<const char*>(ids->data()), ids->size() * sizeof(uint64_t)));
  request->set_values(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  request->set_versions(std::string(reinterpret_cast<const char*>(versions.data()),
                                    versions.size() * sizeof(uint64_t)));
  return absl::OkStatus();
}

}  // namespace ember
