// Copyright 2026 The Ember Authors.

#include "server/coordinator/coordinator_state.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clip.h"
#include "common/job_name.h"
#include "common/log.h"
#include "common/proto_diff.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/shared/slot_owners.h"
#include "server/store/table_config.h"

namespace ember {
namespace {

// Key prefixes in the backend's meta space.
constexpr char kShardPrefix[] = "shard/";         // + big-endian uint32 id -> ShardRecord
constexpr char kTablePrefix[] = "table/";         // + name -> TableConfig
constexpr char kJobTablePrefix[] = "job_table/";  // + job + "/" + name -> TableConfig
constexpr char kAuditPrefix[] = "audit/";         // + big-endian uint64 sequence -> AuditEntry
constexpr char kKvPrefix[] = "kv/";               // + key -> value
constexpr char kSlotMapKey[] = "slotmap";         // -> SlotMapRecord

std::string BigEndian(uint64_t value, int bytes) {
  std::string out(bytes, '\0');
  for (int i = bytes - 1; i >= 0; --i) {
    out[i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  return out;
}

uint64_t FromBigEndian(absl::string_view bytes) {
  uint64_t value = 0;
  for (char c : bytes) value = (value << 8) | static_cast<uint8_t>(c);
  return value;
}

BackendWrite MetaPut(std::string key, std::string value) {
  BackendWrite write;
  write.table = kMetaTable;
  write.key = std::move(key);
  write.value = std::move(value);
  return write;
}

BackendWrite SlotMapWrite(const SlotMap& map) {
  v1::SlotMapRecord record;
  record.set_epoch(map.epoch());
  record.set_slot_owners(PackSlotOwners(map));
  return MetaPut(kSlotMapKey, record.SerializeAsString());
}

BackendWrite ShardWrite(uint32_t id, const std::string& address) {
  v1::ShardRecord record;
  record.set_shard_id(id);
  record.set_address(address);
  return MetaPut(absl::StrCat(kShardPrefix, BigEndian(id, 4)), record.SerializeAsString());
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorState>> CoordinatorState::Open(
    const CoordinatorOptions& options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir is required");
  if (options.expected_shards == 0) return absl::InvalidArgumentError("expected_shards is 0");
  if (options.heartbeat_timeout_ms <= 0) {
    return absl::InvalidArgumentError("heartbeat_timeout_ms must be > 0");
  }
  if (options.clock == nullptr) return absl::InvalidArgumentError("clock is null");
  RocksDbOptions rocks;
  rocks.path = options.data_dir;
  rocks.sync_writes = true;  // metadata: survive machine crashes, writes are rare
  rocks.block_cache_bytes = 8 << 20;
  rocks.write_buffer_bytes = 4 << 20;
  rocks.max_background_jobs = 1;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RocksDbBackend> backend, RocksDbBackend::Open(rocks));
  std::unique_ptr<CoordinatorState> state(new CoordinatorState(options, std::move(backend)));
  EMBER_RETURN_IF_ERROR(state->Load());
  if (!options.audit_log_path.empty()) {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<AuditFile> audit_file,
                           AuditFile::Open(options.audit_log_path));
    absl::MutexLock write_lock(&state->write_mu_);
    state->audit_file_ = std::move(audit_file);
    // Entries the file missed (written to the database just before a crash).
    EMBER_RETURN_IF_ERROR(
        state->MirrorAudit(state->audit_file_->last_sequence(), state->last_audit_sequence_));
  }
  return state;
}

CoordinatorState::CoordinatorState(const CoordinatorOptions& options,
                                   std::unique_ptr<RocksDbBackend> backend)
    : options_(options), backend_(std::move(backend)) {}

absl::Status CoordinatorState::Load() {
  absl::Status parse_error;
  const int64_t now = options_.clock->NowMicros();
  absl::MutexLock write_lock(&write_mu_);
  absl::MutexLock lock(&mu_);
  auto bad = [&](absl::string_view key) {
    parse_error = absl::DataLossError(absl::StrCat("coordinator record '", key, "' is corrupt"));
    return false;
  };
  // Called by Scan on this thread, with both locks above held.
  auto load = [&](std::string_view key_sv, std::string_view value_sv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                  write_mu_, mu_) {
    const absl::string_view key(key_sv.data(), key_sv.size());
    const std::string value(value_sv);
    if (absl::StartsWith(key, kShardPrefix)) {
      v1::ShardRecord record;
      if (!record.ParseFromString(value)) return bad(key);
      shards_[record.shard_id()] = Shard{record.address(), now, 0};
    } else if (absl::StartsWith(key, kTablePrefix)) {
      v1::TableConfig config;
      if (!config.ParseFromString(value)) return bad(key);
      tables_[config.name()] = config;
    } else if (absl::StartsWith(key, kJobTablePrefix)) {
      const absl::string_view rest = key.substr(sizeof(kJobTablePrefix) - 1);
      const size_t slash = rest.find('/');
      v1::TableConfig config;
      if (slash == absl::string_view::npos || !config.ParseFromString(value)) return bad(key);
      job_tables_[std::string(rest.substr(0, slash))][config.name()] = config;
    } else if (absl::StartsWith(key, kAuditPrefix)) {
      last_audit_sequence_ =
          std::max(last_audit_sequence_, FromBigEndian(key.substr(sizeof(kAuditPrefix) - 1)));
    } else if (absl::StartsWith(key, kKvPrefix)) {
      kv_[std::string(key.substr(sizeof(kKvPrefix) - 1))] = value;
    } else if (key == kSlotMapKey) {
      v1::SlotMapRecord record;
      if (!record.ParseFromString(value)) return bad(key);
      absl::StatusOr<SlotMap> map = UnpackSlotOwners(record.slot_owners(), record.epoch());
      if (!map.ok()) return bad(key);
      map_ = *std::move(map);
    }
    return true;
  };
  EMBER_RETURN_IF_ERROR(backend_->Scan(kMetaTable, "", "", load));
  return parse_error;
}

BackendWrite CoordinatorState::AuditWrite(uint64_t* sequence, const std::string& who,
                                          const std::string& what, uint64_t epoch_before,
                                          uint64_t epoch_after) const {
  v1::AuditEntry entry;
  entry.set_sequence(++*sequence);
  entry.set_unix_micros(options_.clock->WallMicros());
  entry.set_who(who);
  entry.set_what(what);
  entry.set_epoch_before(epoch_before);
  entry.set_epoch_after(epoch_after);
  return MetaPut(absl::StrCat(kAuditPrefix, BigEndian(entry.sequence(), 8)),
                 entry.SerializeAsString());
}

absl::StatusOr<v1::RegisterShardResponse> CoordinatorState::RegisterShard(
    uint32_t shard_id, const std::string& address, const std::string& who) {
  if (address.empty()) return absl::InvalidArgumentError("empty shard address");
  if (shard_id == kNoShard) return absl::InvalidArgumentError("shard id 0xffffffff is reserved");
  absl::MutexLock write_lock(&write_mu_);
  uint64_t sequence = last_audit_sequence_;
  bool known_same = false;
  std::vector<uint32_t> ids;
  SlotMap map;
  {
    absl::MutexLock lock(&mu_);
    auto it = shards_.find(shard_id);
    known_same = it != shards_.end() && it->second.address == address;
    for (const auto& [id, shard] : shards_) ids.push_back(id);
    map = map_;
  }
  BackendWriteBatch batch;
  if (!known_same) {
    batch.push_back(ShardWrite(shard_id, address));
    batch.push_back(AuditWrite(&sequence, who,
                               absl::StrCat("register_shard id=", shard_id, " address=", address),
                               map.epoch(), map.epoch()));
  }
  if (!std::binary_search(ids.begin(), ids.end(), shard_id)) {
    ids.insert(std::lower_bound(ids.begin(), ids.end(), shard_id), shard_id);
  }
  const bool assign = map.epoch() == 0 && ids.size() >= options_.expected_shards;
  if (assign) {
    map = SlotMap::Even(ids, /*epoch=*/1);
    batch.push_back(SlotMapWrite(map));
    batch.push_back(AuditWrite(
        &sequence, who, absl::StrCat("assign_slots even over ", ids.size(), " shards"), 0, 1));
  }
  if (!batch.empty()) {
    EMBER_RETURN_IF_ERROR(backend_->Write(batch));
    AuditCommitted(sequence);
  }
  v1::RegisterShardResponse response;
  absl::MutexLock lock(&mu_);
  Shard& shard = shards_[shard_id];
  shard.address = address;
  shard.last_heartbeat_micros = options_.clock->NowMicros();
  if (assign) map_ = map;
  response.set_assigned(map_.epoch() > 0);
  response.set_epoch(map_.epoch());
  if (map_.epoch() > 0) response.set_slot_owners(PackSlotOwners(map_));
  AddTablesLocked(&response);
  return response;
}

size_t CoordinatorState::TableCountLocked() const {
  size_t count = tables_.size();
  for (const auto& [job, tables] : job_tables_) count += tables.size();
  return count;
}

template <typename Response>
void CoordinatorState::AddTablesLocked(Response* response) const {
  for (const auto& [name, config] : tables_) *response->add_tables() = config;
  for (const auto& [job, tables] : job_tables_) {
    v1::JobTables* of_job = response->add_job_tables();
    of_job->set_job(job);
    for (const auto& [name, config] : tables) *of_job->add_tables() = config;
  }
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorState::Heartbeat(
    const v1::HeartbeatRequest& request) {
  v1::HeartbeatResponse response;
  absl::MutexLock lock(&mu_);
  auto it = shards_.find(request.shard_id());
  if (it == shards_.end()) {
    return absl::NotFoundError(absl::StrCat("shard ", request.shard_id(), " is not registered"));
  }
  it->second.last_heartbeat_micros = options_.clock->NowMicros();
  it->second.version = request.version();
  response.set_epoch(map_.epoch());
  if (request.epoch() < map_.epoch()) response.set_slot_owners(PackSlotOwners(map_));
  if (request.table_count() < TableCountLocked()) AddTablesLocked(&response);
  return response;
}

v1::ShardInfo CoordinatorState::MakeShardInfo(uint32_t id, const Shard& shard,
                                              int64_t now_micros) const {
  v1::ShardInfo info;
  info.set_shard_id(id);
  info.set_address(shard.address);
  const int64_t since_ms = (now_micros - shard.last_heartbeat_micros) / 1000;
  info.set_millis_since_heartbeat(since_ms);
  info.set_state(since_ms > options_.heartbeat_timeout_ms ? v1::ShardInfo::DEAD
                                                          : v1::ShardInfo::ALIVE);
  info.set_version(shard.version);
  if (map_.epoch() > 0) info.set_owned_slots(static_cast<uint32_t>(map_.SlotsOf(id).size()));
  return info;
}

std::vector<v1::ShardInfo> CoordinatorState::Shards() const {
  const int64_t now = options_.clock->NowMicros();
  std::vector<v1::ShardInfo> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, shard] : shards_) out.push_back(MakeShardInfo(id, shard, now));
  return out;
}

SlotMap CoordinatorState::slot_map() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

v1::GetClusterMapResponse CoordinatorState::ClusterMap(const std::string& job) const {
  v1::GetClusterMapResponse response;
  for (v1::ShardInfo& info : Shards()) *response.add_shards() = std::move(info);
  absl::MutexLock lock(&mu_);
  response.set_epoch(map_.epoch());
  if (map_.epoch() > 0) response.set_slot_owners(PackSlotOwners(map_));
  if (job.empty()) {
    for (const auto& [name, config] : tables_) *response.add_tables() = config;
  } else if (auto it = job_tables_.find(job); it != job_tables_.end()) {
    for (const auto& [name, config] : it->second) *response.add_tables() = config;
  }
  return response;
}

absl::StatusOr<v1::TableConfig> CoordinatorState::CreateTable(const v1::TableConfig& config,
                                                              const std::string& who,
                                                              const std::string& job) {
  if (!job.empty()) EMBER_RETURN_IF_ERROR(CheckJobName(job));
  EMBER_ASSIGN_OR_RETURN(v1::TableConfig normalized, NormalizeTableConfig(config));
  absl::MutexLock write_lock(&write_mu_);
  uint64_t sequence = last_audit_sequence_;
  uint64_t epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    const v1::TableConfig* existing = nullptr;
    if (job.empty()) {
      if (auto it = tables_.find(normalized.name()); it != tables_.end()) existing = &it->second;
    } else if (auto of_job = job_tables_.find(job); of_job != job_tables_.end()) {
      auto it = of_job->second.find(normalized.name());
      if (it != of_job->second.end()) existing = &it->second;
    }
    if (existing != nullptr) {
      if (google::protobuf::util::MessageDifferencer::Equals(*existing, normalized)) {
        return normalized;
      }
      // A second job that names the table with other settings gets which ones differ.
      return absl::AlreadyExistsError(absl::StrCat(
          "table '", normalized.name(), "' ",
          job.empty() ? std::string("(shared)") : absl::StrCat("of job '", job, "'"),
          " exists with a different config: ",
          DescribeDifference(normalized, *existing, 3, "asked", "existing"),
          job.empty() ? " (shared tables are used by every job without tables of its own: give "
                        "this one another name, the existing settings, or the job tables of "
                        "its own with --own_tables)"
                      : " (a new run of the job declares its tables as before)"));
    }
    epoch = map_.epoch();
  }
  const std::string key = job.empty() ? absl::StrCat(kTablePrefix, normalized.name())
                                      : absl::StrCat(kJobTablePrefix, job, "/", normalized.name());
  const std::string named =
      job.empty() ? normalized.name() : absl::StrCat(job, "/", normalized.name());
  BackendWriteBatch batch;
  batch.push_back(MetaPut(key, normalized.SerializeAsString()));
  batch.push_back(AuditWrite(&sequence, who,
                             absl::StrCat("create_table ", named, " dim=", normalized.dim()), epoch,
                             epoch));
  EMBER_RETURN_IF_ERROR(backend_->Write(batch));
  AuditCommitted(sequence);
  absl::MutexLock lock(&mu_);
  if (job.empty()) {
    tables_[normalized.name()] = normalized;
  } else {
    job_tables_[job][normalized.name()] = normalized;
  }
  return normalized;
}

absl::StatusOr<v1::TableConfig> CoordinatorState::DescribeTable(const std::string& name,
                                                                const std::string& job) const {
  absl::MutexLock lock(&mu_);
  const std::map<std::string, v1::TableConfig>* tables = &tables_;
  if (!job.empty()) {
    auto of_job = job_tables_.find(job);
    if (of_job == job_tables_.end()) {
      return absl::NotFoundError(
          absl::StrCat("job '", ClipForMessage(job), "' has no tables of its own"));
    }
    tables = &of_job->second;
  }
  auto it = tables->find(name);
  if (it == tables->end()) {
    return absl::NotFoundError(
        absl::StrCat("no table '", ClipForMessage(name), "'",
                     job.empty() ? "" : absl::StrCat(" in job '", job, "'")));
  }
  return it->second;
}

absl::StatusOr<uint64_t> CoordinatorState::ChangeMap(
    uint32_t shard_id, const std::function<absl::StatusOr<std::string>(SlotMap&)>& change,
    const std::string& who) {
  absl::MutexLock write_lock(&write_mu_);
  uint64_t sequence = last_audit_sequence_;
  SlotMap map;
  {
    absl::MutexLock lock(&mu_);
    if (!shards_.contains(shard_id)) {
      return absl::NotFoundError(absl::StrCat("shard ", shard_id, " is not registered"));
    }
    map = map_;
  }
  if (map.epoch() == 0) return absl::FailedPreconditionError("slots are not assigned yet");
  const uint64_t before = map.epoch();
  EMBER_ASSIGN_OR_RETURN(const std::string what, change(map));
  map.set_epoch(before + 1);
  BackendWriteBatch batch;
  batch.push_back(SlotMapWrite(map));
  batch.push_back(AuditWrite(&sequence, who, what, before, before + 1));
  EMBER_RETURN_IF_ERROR(backend_->Write(batch));
  AuditCommitted(sequence);
  absl::MutexLock lock(&mu_);
  map_ = std::move(map);
  return map_.epoch();
}

absl::StatusOr<uint64_t> CoordinatorState::SetSlotOwner(uint32_t slot, uint32_t shard_id,
                                                        const std::string& who) {
  if (slot >= kNumSlots) {
    return absl::InvalidArgumentError(absl::StrCat("slot ", slot, " >= ", kNumSlots));
  }
  return ChangeMap(
      shard_id,
      [&](SlotMap& map) -> absl::StatusOr<std::string> {
        const uint32_t previous = map.OwnerOf(slot);
        map.SetOwner(slot, shard_id);
        return absl::StrCat("set_slot_owner slot=", slot, " shard=", shard_id, " (was ", previous,
                            ")");
      },
      who);
}

absl::StatusOr<uint64_t> CoordinatorState::MoveSlots(const std::vector<uint32_t>& slots,
                                                     uint32_t source, uint32_t target,
                                                     const std::string& op,
                                                     const std::string& who) {
  return ChangeMap(
      target,
      [&](SlotMap& map) -> absl::StatusOr<std::string> {
        for (uint32_t slot : slots) {
          if (slot >= kNumSlots) {
            return absl::InvalidArgumentError(absl::StrCat("slot ", slot, " >= ", kNumSlots));
          }
          if (map.OwnerOf(slot) != source) {
            return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is owned by shard ",
                                                              map.OwnerOf(slot), ", not ", source));
          }
        }
        for (uint32_t slot : slots) map.SetOwner(slot, target);
        return absl::StrCat("move_slots op=", op, " slots=", slots.size(), " from shard ", source,
                            " to shard ", target);
      },
      who);
}

absl::Status CoordinatorState::RemoveShard(uint32_t shard_id, const std::string& who) {
  absl::MutexLock write_lock(&write_mu_);
  uint64_t sequence = last_audit_sequence_;
  uint64_t epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!shards_.contains(shard_id)) {
      return absl::NotFoundError(absl::StrCat("shard ", shard_id, " is not registered"));
    }
    const size_t owned = map_.SlotsOf(shard_id).size();
    if (owned > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", shard_id, " owns ", owned,
                       " slots: drain it first (emberctl shards drain --id=", shard_id, ")"));
    }
    epoch = map_.epoch();
  }
  BackendWriteBatch batch;
  BackendWrite erase;
  erase.table = kMetaTable;
  erase.key = absl::StrCat(kShardPrefix, BigEndian(shard_id, 4));
  erase.erase = true;
  batch.push_back(std::move(erase));
  batch.push_back(
      AuditWrite(&sequence, who, absl::StrCat("remove_shard shard=", shard_id), epoch, epoch));
  EMBER_RETURN_IF_ERROR(backend_->Write(batch));
  AuditCommitted(sequence);
  absl::MutexLock lock(&mu_);
  shards_.erase(shard_id);
  return absl::OkStatus();
}

void CoordinatorState::AuditCommitted(uint64_t sequence) {
  const uint64_t before = last_audit_sequence_;
  last_audit_sequence_ = sequence;
  if (audit_file_ == nullptr) return;
  // The change is durable in the database; the mirror failing must not undo it.
  if (absl::Status s = MirrorAudit(before, sequence); !s.ok()) {
    EMBER_LOG(ERROR) << s.message();
  }
}

absl::Status CoordinatorState::MirrorAudit(uint64_t after, uint64_t through) {
  if (audit_file_ == nullptr || through <= after) return absl::OkStatus();
  EMBER_ASSIGN_OR_RETURN(std::vector<v1::AuditEntry> entries,
                         AuditLog(after, static_cast<size_t>(through - after)));
  return audit_file_->Append(entries);
}

absl::Status CoordinatorState::Audit(const std::string& who, const std::string& what) {
  absl::MutexLock write_lock(&write_mu_);
  uint64_t sequence = last_audit_sequence_;
  const uint64_t epoch = slot_map().epoch();
  EMBER_RETURN_IF_ERROR(backend_->Write({AuditWrite(&sequence, who, what, epoch, epoch)}));
  AuditCommitted(sequence);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::AuditEntry>> CoordinatorState::AuditLog(uint64_t after_sequence,
                                                                       size_t limit) const {
  std::vector<v1::AuditEntry> out;
  absl::Status parse_error;
  const std::string begin = absl::StrCat(kAuditPrefix, BigEndian(after_sequence + 1, 8));
  const std::string end = "audit0";  // '0' follows '/': the end of the audit prefix
  EMBER_RETURN_IF_ERROR(
      backend_->Scan(kMetaTable, begin, end, [&](std::string_view key, std::string_view value) {
        if (out.size() >= limit) return false;
        v1::AuditEntry entry;
        if (!entry.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          parse_error = absl::DataLossError("corrupt audit entry");
          return false;
        }
        out.push_back(std::move(entry));
        return true;
      }));
  EMBER_RETURN_IF_ERROR(parse_error);
  return out;
}

absl::Status CoordinatorState::KvPut(const std::string& key, const std::string& value) {
  if (key.empty() || key.size() > kMaxKvKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv key must be 1..", kMaxKvKeyBytes, " bytes, got ", key.size()));
  }
  if (value.size() > kMaxKvValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv value exceeds ", kMaxKvValueBytes, " bytes"));
  }
  absl::MutexLock write_lock(&write_mu_);
  EMBER_RETURN_IF_ERROR(backend_->Write({MetaPut(absl::StrCat(kKvPrefix, key), value)}));
  absl::MutexLock lock(&mu_);
  kv_[key] = value;
  return absl::OkStatus();
}

std::optional<std::string> CoordinatorState::KvGet(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = kv_.find(key);
  if (it == kv_.end()) return std::nullopt;
  return it->second;
}

}  // namespace ember
