// Copyright 2026 The Ember Authors.
//
// SlotMigrator: online slot migration, driven by the coordinator (the one place that
// decides ownership). An operation (admin.proto Migration) is a list of moves, each
// "these slots go from shard S to shard T", run one at a time. A move:
//
//   COPYING      T drops any leftover rows of the slots; S records its version V and
//                its rows of the slots are copied page by page to T (throttled).
//   CATCHING_UP  rows of the slots changed after V are copied again (current values,
//                coalesced) until a round copies few rows.
//   SWITCHING    under the topology lock (no checkpoint or restore meanwhile): S fences
//                the slots (their calls get UNAVAILABLE, in-flight ones finish), the
//                last changes are copied, and the coordinator moves the owners in its
//                map under a new epoch (CoordinatorState::MoveSlots, the commit point),
//                then installs the map on T, S and every other shard.
//   CLEANING_UP  S deletes its rows of the slots.
//
// Properties (tests/cluster/migration_test.cc): at any moment a slot has one owner
// that accepts writes (S until the fence, nobody while fenced, T once it has the new
// map); rows travel whole, so no update is lost or applied twice; a retried push that
// S applied before the switch is answered by S's dedup window, which is checked
// before routing.
//
// Stores: a move carries every store of the source (the default store, and each job's
// own: docs/ARCHITECTURE.md "Several jobs per PS cluster"). The copy and the catch-up
// run per store (each has its own versions and change log); the target gets each
// job's tables first (CreateTable in the job's store); the fence answers every store
// it drained, and a move that did not copy one of them with tables, or one of a job
// store's tables, starts over; the switch raises the target's attempt of every job store to
// the source's.
//
// Faults: every call names the shard process, job attempt and count of restores it
// expects, so a copy that spans a shard restart or a checkpoint restore of any store
// fails with ABORTED and the move starts over. Shards that do not answer are retried for
// `retry_for`, then the operation is FAILED (the fence lifted); StartMigration with the same spec
// resumes it (as does the same request without the slots already moved). The operation is persisted
// at every phase; a restarted coordinator resumes an unfinished one: a move whose slots the map
// already gives to T is finished (cleanup), any other starts its copy over. Cancel rolls back the
// current move if it has not switched.
//
// Thread-safety: all methods may be called concurrently; one operation runs at a time
// on the migrator's own thread.

#ifndef EMBER_SERVER_COORDINATOR_SLOT_MIGRATOR_H_
#define EMBER_SERVER_COORDINATOR_SLOT_MIGRATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ember/v1/admin.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "server/coordinator/coordinator_state.h"

namespace ember {

struct SlotMigratorOptions {
  // Deadline of one shard call. Default: 30 s
  absl::Duration rpc_timeout = absl::Seconds(30);
  // How long a move keeps retrying shards that fail with UNAVAILABLE or
  // DEADLINE_EXCEEDED before the operation is FAILED. Default: 60 s
  absl::Duration retry_for = absl::Seconds(60);
  // Copies started over (ABORTED: a shard restarted or was restored; OUT_OF_RANGE:
  // the source's change log no longer reaches back) before the operation is FAILED.
  // Default: 10
  int max_restarts = 10;
  // Target bytes per copy page (rows are sized from the table's dim). Default: 1 MiB
  size_t page_bytes = size_t{1} << 20;
  // Catch-up ends, and the source is fenced, once a round copies at most this many
  // rows (or after max_catch_up_rounds). Default: 1000, 50
  uint64_t fence_below_rows = 1000;
  int max_catch_up_rounds = 50;
  // Moves of more slots are split into moves of at most this many. Default: 1024
  uint32_t max_slots_per_move = 1024;
  // The snapshot copy asks the shards to serve its pages at their background priority
  // (ExportRowsRequest/ImportRowsRequest.background; ember-ps --migration_copy_priority)
  // while the move's copy has averaged at least this many bytes per second (after its
  // first second); below it, pages go at normal priority until the average is back,
  // so that a machine kept busy by anything else (or a shard added because the others
  // are saturated) still moves its slots. Catch-up and the switch are never
  // background. 0: every page background. Default: 1 MiB/s
  uint64_t background_floor_bytes_per_sec = uint64_t{1} << 20;
  // Test hook (fault tests): the coordinator SIGKILLs itself when a move reaches
  // "copying" (after its first page), "catching_up", "fenced" or "switched" (map
  // committed, not yet installed). Empty: never.
  std::string test_crash_at;
};

class SlotMigrator {
 public:
  using StubFactory = std::function<std::shared_ptr<v1::PsService::Stub>(const std::string&)>;
  // Told after each switch that `target` (process `incarnation`) took slots.
  using SwitchListener = std::function<void(uint32_t target, uint64_t incarnation)>;

  // `state` and `topology_mu` (held while a move switches; checkpoints and restores
  // hold it too) are not owned and must outlive the migrator.
  SlotMigrator(CoordinatorState* state, SlotMigratorOptions options, StubFactory stubs,
               absl::Mutex* topology_mu, SwitchListener on_switch);
  ~SlotMigrator();

  // Loads the persisted operations and resumes an unfinished one (not a FAILED or
  // CANCELLED one). DATA_LOSS for a record that does not parse.
  absl::Status Start();
  // Stops the running operation where it is (it resumes at the next Start).
  void Stop();

  // Validates `spec` and starts it (see admin.proto StartMigration). `who` is
  // recorded in the audit log and the operation.
  absl::StatusOr<v1::Migration> StartMigration(const v1::MigrationSpec& spec,
                                               const std::string& who);
  // Empty op_id: the newest. NOT_FOUND when unknown.
  absl::StatusOr<v1::Migration> Get(const std::string& op_id) const;
  // Newest first, at most 100.
  std::vector<v1::Migration> List() const;
  absl::StatusOr<v1::Migration> Cancel(const std::string& op_id, const std::string& who);

 private:
  // A job's own store on a shard (GetShardInfo with the job).
  struct JobStoreInfo {
    std::string job;
    uint64_t attempt = 0;
    std::vector<std::string> tables;
  };
  struct Shard {
    uint32_t id = 0;
    std::string address;
    uint64_t incarnation = 0;
    uint64_t attempt = 0;                  // the default store's
    uint64_t restores = 0;                 // of any store (GetShardInfoResponse.restores)
    std::vector<JobStoreInfo> job_stores;  // ascending job; only with Describe(id, true)
  };
  // One store a move copies: its tables and the version its catch-up reads after.
  struct StoreCopy {
    std::string job;  // empty: the default store
    std::vector<v1::TableConfig> tables;
    uint64_t attempt = 0;  // the source store's job attempt, which its calls expect
    uint64_t version = 0;
  };

  // Splits moves into at most max_slots_per_move slots each; validates against the
  // current map and shards.
  absl::StatusOr<v1::MigrationSpec> Normalize(const v1::MigrationSpec& spec) const;
  static bool Terminal(v1::Migration::Phase phase);
  // `spec` (normalized) asks for what `op` does: every slot it moves is in `op` with
  // the same target, and every other slot of `op` is on its target already.
  bool SameRequest(const v1::Migration& op, const v1::MigrationSpec& spec) const;

  // The operation's thread.
  void Run(std::string op_id);
  // Runs one move to its end (OK), or returns why it stopped.
  absl::Status RunMove(v1::Migration& op, const v1::SlotMove& move);
  // The stores of `source` a move copies, with their tables (the coordinator's
  // configs); creates each job's tables on `target`.
  absl::StatusOr<std::vector<StoreCopy>> PlanStores(const Shard& source, const Shard& target);
  absl::Status Copy(v1::Migration& op, const v1::SlotMove& move, const Shard& source,
                    const Shard& target, std::vector<StoreCopy>& stores);
  // Copies the changes of every store after its version: unfenced (`through` empty)
  // until a round copies few rows and the source is caught up; fenced, one pass per
  // store to its version in `through` (FenceSlotsResponse.stores).
  absl::Status CatchUp(v1::Migration& op, const v1::SlotMove& move, const Shard& source,
                       const Shard& target, std::vector<StoreCopy>& stores,
                       const std::map<std::string, uint64_t>& through);
  absl::Status Switch(v1::Migration& op, const v1::SlotMove& move, const Shard& source,
                      const Shard& target, std::vector<StoreCopy>& stores);
  // The switched move's end: the map on both shards, the source's rows deleted.
  absl::Status Cleanup(v1::Migration& op, const v1::SlotMove& move, uint64_t epoch);
  // Installs the coordinator's map on `target` (with `raise_target`, raising its job
  // attempts, the default store's and every job store's, to the source's) and `source`
  // (errors returned), then on every other alive shard (best effort).
  absl::Status InstallMap(const Shard& target, const Shard& source, bool raise_target);
  absl::Status Import(v1::Migration& op, const Shard& target, v1::ImportRowsRequest& request);

  // `with_job_stores`: also each job store's attempt and tables.
  absl::StatusOr<Shard> Describe(uint32_t shard_id, bool with_job_stores = false) const;
  // Waits until the copy rate is within spec.bytes_per_sec. CANCELLED when the
  // operation is cancelled or the migrator stops meanwhile.
  absl::Status Throttle(const v1::Migration& op);
  absl::Status CheckCancelled(const std::string& op_id) const;
  void SetPhase(v1::Migration& op, v1::Migration::Phase phase);
  // Publishes `op` to readers and, when `persist`, to the coordinator's store.
  void Publish(const v1::Migration& op, bool persist);
  void MaybeCrash(absl::string_view point) const;

  CoordinatorState* const state_;
  const SlotMigratorOptions options_;
  const StubFactory stubs_;
  absl::Mutex* const topology_mu_;
  const SwitchListener on_switch_;

  // Serializes StartMigration and Stop (they start and join thread_).
  absl::Mutex start_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<std::string, v1::Migration> ops_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);  // op ids, oldest first
  uint64_t next_op_ ABSL_GUARDED_BY(mu_) = 1;
  std::string running_ ABSL_GUARDED_BY(mu_);  // op id of the thread's operation
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;

  // Copy accounting of the running operation (its thread only).
  absl::Time run_started_;
  uint64_t run_bytes_ = 0;
  absl::Time last_publish_;
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_SLOT_MIGRATOR_H_
