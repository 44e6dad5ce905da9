// Copyright 2026 The Ember Authors.
//
// CoordinatorState: the coordinator's metadata and its persistence. Owns the tables,
// the registered shards, the slot map with its epoch, the audit log and the rendezvous
// key-value pairs, and keeps every one of them in its own RocksDB (the meta space of
// a RocksDbBackend, one key prefix per kind), so a restart on the same directory
// restores all of it. Shard liveness (last heartbeat, reported version) is memory
// only: after a restart every known shard gets a fresh heartbeat timeout.
//
//   CoordinatorOptions options;
//   options.data_dir = "/data/ember/coordinator";
//   options.expected_shards = 2;
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorState> state,
//                          CoordinatorState::Open(options));
//   EMBER_ASSIGN_OR_RETURN(v1::RegisterShardResponse r,
//                          state->RegisterShard(0, "10.0.0.1:7000", "peer=..."));
//
// Slot assignment: once `expected_shards` shards have registered, every slot is
// assigned evenly over them (SlotMap::Even over ascending ids) at epoch 1. Later
// shards register with no slots; a shard that registers again keeps its slots.
//
// Thread-safety: all methods may be called concurrently. Mutations are serialized by
// write_mu_, which is held across the RocksDB write so that the persisted order is the
// applied order; readers (heartbeats, maps, lookups) take only mu_, never held across
// IO, so they do not wait for a write.

#ifndef EMBER_SERVER_COORDINATOR_COORDINATOR_STATE_H_
#define EMBER_SERVER_COORDINATOR_COORDINATOR_STATE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/slot_map.h"
#include "ember/v1/admin.pb.h"
#include "ember/v1/coordinator.pb.h"
#include "server/coordinator/audit_file.h"
#include "server/store/rocksdb_backend.h"

namespace ember {

// Options of CoordinatorState::Open. None can be changed after Open.
struct CoordinatorOptions {
  // Directory of the coordinator's RocksDB. Required.
  std::string data_dir;
  // Shards that must register before slots are assigned. Default: 1
  uint32_t expected_shards = 1;
  // A shard without a heartbeat for this long is reported DEAD. Default: 3000
  int64_t heartbeat_timeout_ms = 3000;
  // Time source; not owned. Default: Clock::Real()
  Clock* clock = Clock::Real();
  // When set, every audit entry is also appended to this file as a JSON line
  // (server/coordinator/audit_file.h). Default: none
  std::string audit_log_path;
};

inline constexpr size_t kMaxKvKeyBytes = 256;
inline constexpr size_t kMaxKvValueBytes = 64 << 10;

class CoordinatorState {
 public:
  // Opens (or creates) the database in options.data_dir and loads everything in it.
  // Errors: INVALID_ARGUMENT for bad options; storage errors as RocksDbBackend::Open
  // (e.g. UNAVAILABLE when another process holds the directory); DATA_LOSS for a
  // record that does not parse.
  static absl::StatusOr<std::unique_ptr<CoordinatorState>> Open(const CoordinatorOptions& options);

  CoordinatorState(const CoordinatorState&) = delete;
  CoordinatorState& operator=(const CoordinatorState&) = delete;

  // Registers (or re-registers) shard `shard_id` at `address` and counts as its
  // heartbeat; assigns the slots when this registration completes the expected set.
  // `who` names the caller for the audit log. INVALID_ARGUMENT for an empty address
  // or shard id kNoShard; storage errors (then nothing changed).
  absl::StatusOr<v1::RegisterShardResponse> RegisterShard(uint32_t shard_id,
                                                          const std::string& address,
                                                          const std::string& who);

  // Records a heartbeat. Returns the epoch, plus the map when request.epoch is older
  // and every table when request.table_count is below the number of tables.
  // NOT_FOUND for an unregistered shard.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);

  // The whole cluster view: epoch, owners, shards with liveness, and the shared tables
  // (`job` empty) or that job's own tables (coordinator.proto JobTables).
  v1::GetClusterMapResponse ClusterMap(const std::string& job = "") const;
  // Shards ascending by id, with liveness.
  std::vector<v1::ShardInfo> Shards() const;
  SlotMap slot_map() const;

  // Validates and normalizes `config`, then persists it as a shared table (`job`
  // empty) or one of that job's own (JobTables; names are per job). Returns the
  // normalized config. Idempotent for an equal config; ALREADY_EXISTS for a
  // conflicting one; INVALID_ARGUMENT for an invalid config or job name; storage
  // errors.
  absl::StatusOr<v1::TableConfig> CreateTable(const v1::TableConfig& config, const std::string& who,
                                              const std::string& job = "");
  // NOT_FOUND for an unknown table (of `job`, as in CreateTable).
  absl::StatusOr<v1::TableConfig> DescribeTable(const std::string& name,
                                                const std::string& job = "") const;

  // Makes `shard_id` the owner of `slot`, bumps the epoch and records an audit entry.
  // Returns the new epoch. INVALID_ARGUMENT for slot >= kNumSlots; NOT_FOUND for an
  // unregistered shard; FAILED_PRECONDITION before slots are assigned; storage errors.
  absl::StatusOr<uint64_t> SetSlotOwner(uint32_t slot, uint32_t shard_id, const std::string& who);

  // Moves every slot in `slots` from `source` to `target` in one change: one epoch
  // bump and one audit entry ("move_slots op=<op> ..."). The slot-migration commit
  // point. Returns the new epoch. FAILED_PRECONDITION if a slot is not owned by
  // `source` (nothing changes) or before slots are assigned; NOT_FOUND for an
  // unregistered target; INVALID_ARGUMENT for a slot >= kNumSlots; storage errors.
  absl::StatusOr<uint64_t> MoveSlots(const std::vector<uint32_t>& slots, uint32_t source,
                                     uint32_t target, const std::string& op,
                                     const std::string& who);

  // Forgets a registered shard (audited). FAILED_PRECONDITION while it owns slots;
  // NOT_FOUND if unknown; storage errors.
  absl::Status RemoveShard(uint32_t shard_id, const std::string& who);

  // Appends an audit entry for a change made elsewhere (e.g. a migration started),
  // with the current epoch before and after. Storage errors.
  absl::Status Audit(const std::string& who, const std::string& what);

  // Audit entries with sequence > after_sequence, ascending, at most `limit`.
  absl::StatusOr<std::vector<v1::AuditEntry>> AuditLog(uint64_t after_sequence, size_t limit) const;

  // Stores `value` under `key`. INVALID_ARGUMENT for an empty or oversized key or an
  // oversized value (kMaxKvKeyBytes, kMaxKvValueBytes); storage errors.
  absl::Status KvPut(const std::string& key, const std::string& value);
  // The value of `key`, or nullopt.
  std::optional<std::string> KvGet(const std::string& key) const;

 private:
  struct Shard {
    std::string address;
    int64_t last_heartbeat_micros = 0;  // clock_->NowMicros()
    uint64_t version = 0;
  };

  CoordinatorState(const CoordinatorOptions& options, std::unique_ptr<RocksDbBackend> backend);

  // Applies `change` to a copy of the map (it returns the audit text, or an error and
  // nothing changes), bumps the epoch, persists map and audit entry in one write and
  // installs the map. NOT_FOUND when `shard_id` is not registered;
  // FAILED_PRECONDITION before slots are assigned; storage errors.
  absl::StatusOr<uint64_t> ChangeMap(
      uint32_t shard_id, const std::function<absl::StatusOr<std::string>(SlotMap&)>& change,
      const std::string& who);
  // Loads every persisted record. Called once by Open.
  absl::Status Load();
  // A ShardInfo for `shard`, with liveness at `now_micros`. REQUIRES: mu_ held.
  v1::ShardInfo MakeShardInfo(uint32_t id, const Shard& shard, int64_t now_micros) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A persisted audit entry (key and value) with sequence ++*sequence. The caller
  // calls AuditCommitted(*sequence) once the batch is written.
  BackendWrite AuditWrite(uint64_t* sequence, const std::string& who, const std::string& what,
                          uint64_t epoch_before, uint64_t epoch_after) const;

  // Records that audit entries up to `sequence` are written, and mirrors the new ones
  // to the audit file. REQUIRES: write_mu_ held.
  void AuditCommitted(uint64_t sequence) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Appends the entries in (after, through] to the audit file, if there is one.
  absl::Status MirrorAudit(uint64_t after, uint64_t through)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  const CoordinatorOptions options_;
  const std::unique_ptr<RocksDbBackend> backend_;
  std::unique_ptr<AuditFile> audit_file_ ABSL_GUARDED_BY(write_mu_);

  // Serializes mutations (held across their RocksDB write). Acquired before mu_.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  uint64_t last_audit_sequence_ ABSL_GUARDED_BY(write_mu_) = 0;

  mutable absl::Mutex mu_;
  std::map<uint32_t, Shard> shards_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::TableConfig> tables_ ABSL_GUARDED_BY(mu_);
  // Jobs' own tables: job -> name -> config.
  std::map<std::string, std::map<std::string, v1::TableConfig>> job_tables_ ABSL_GUARDED_BY(mu_);
  // Every table, shared and jobs' own (HeartbeatRequest.table_count).
  size_t TableCountLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Adds every table to a registration or heartbeat answer.
  template <typename Response>
  void AddTablesLocked(Response* response) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  SlotMap map_ ABSL_GUARDED_BY(mu_);  // epoch 0: not assigned yet
  absl::flat_hash_map<std::string, std::string> kv_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_COORDINATOR_STATE_H_
