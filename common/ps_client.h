// Copyright 2026 The Ember Authors.
//
// PsClient: the client of a PS cluster used by workers, serving followers and tools.
// The shape is ps-lite's KVWorker: batched Pull/Push of embedding rows, with async
// versions that return a handle you Wait() on.
//
// A batch is split by owner shard (SlotOf(table seed, id) + the client's SlotMap),
// the per-shard RPCs run in parallel (gRPC callback API) and the pulled rows are put
// back in request order. Failures are handled per shard request:
//  * UNAVAILABLE: retried with exponential backoff, at most `max_retries` times and
//    never past the call's deadline. A retried push reuses its sequence, so the
//    server applies it once (docs/ARCHITECTURE.md invariant 2).
//  * RESOURCE_EXHAUSTED with a retry hint (common/grpc_status.h GetRetryAfter: the
//    shard's bound on calls and answer bytes in flight, issue 28 item 1.3): resent
//    after the hinted delay, as often as the call's deadline allows (nothing was
//    applied; a push keeps its sequence). Without a hint it fails the call.
//  * FAILED_PRECONDITION with a WrongShard detail (invariant 3): with a coordinator
//    and a redirect naming a newer epoch, the client reloads the whole cluster map
//    from the coordinator (rate-limited); without one (or while it is down) it records
//    the slot's owner and the shard's epoch in its slot map. Then it re-splits just
//    the rejected keys. A slot followed more than `max_redirects` times fails the call.
//  * anything else: returned, with the shard id and address in the message.
//
// Hot keys (proto/ember/v1/hotkeys.proto): with a coordinator the client keeps the
// published hot set (common/hot_set.h), fetched with GetHotSet in the background at
// most every `hot_set_refresh_interval` from the pull path (a pull never waits for
// it) and after every cluster map reload. When the hot set has replication on and
// `read_replicas` is set, a Pull sends each hot key to one of its owner and the
// owner's replica holders (HotSetView::ReplicaHoldersOf), picked by a hash of the id
// and a per-pull counter so the load spreads evenly; keys for a holder travel as a
// separate replica_read request. Keys a holder cannot answer
// (PullResponse.replica_missing) and every key of a replica request that fails
// (whatever the error) go to their owner in the next round, with normal routing.
// Pushes always go to owners. replica_stats() counts what happened.
//
//   PsClientOptions options;
//   options.coordinator_address = "10.0.0.9:6000";  // map, shards and tables from it
//   options.worker_id = 7;
//   absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
//   EMBER_RETURN_IF_ERROR((*client)->Pull("item", ids, absl::MakeSpan(rows)));
//   PsHandle h = (*client)->PushAsync("item", ids, grads, /*step=*/12);
//   ...overlap other work...
//   EMBER_RETURN_IF_ERROR(h.Wait());
//
// Without a coordinator, give the shards and the map yourself:
//   options.shard_addresses = {{0, "10.0.0.1:7000"}, {1, "10.0.0.2:7000"}};
//   options.slot_map = SlotMap::Even({0, 1}, /*epoch=*/1);
//   EMBER_RETURN_IF_ERROR((*client)->CreateTableEverywhere(config));
//
// The data path never goes through the coordinator: while it is down the client keeps
// working with the map and the hot set it has.
//
// Thread-safety: all PsClient methods may be called concurrently. A PsHandle is used
// by one thread at a time.
//
// gRPC stays initialized from the first PsClient::Create until the process exits (see
// ps_client.cc: a shutdown triggered from a gRPC thread races with a later re-init).

#ifndef EMBER_COMMON_PS_CLIENT_H_
#define EMBER_COMMON_PS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/hot_set.h"
#include "common/slot_map.h"
#include "ember/v1/table.pb.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace ember {

// Wire encoding of values for one call.
enum class WireEncoding {
  kTableDefault,  // the table's TableConfig.wire_type
  kFloat32,
  kFloat16,  // half the bytes; values round to nearest binary16
};

struct PsClientOptions {
  // Address ("host:port") of the coordinator. When set, Create loads the slot map, the
  // shard addresses and the tables from it (they replace `shard_addresses` and
  // `slot_map`), and the client reloads them on a redirect to a newer epoch or when a
  // shard is UNAVAILABLE. Default: none (static `shard_addresses` and `slot_map`).
  std::string coordinator_address;
  // Credentials of every channel, to the coordinator and the shards (common/tls.h);
  // null: insecure.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  // The cluster token (common/cluster_token.h), sent with every call to the coordinator
  // and the shards: a plaintext cluster with one requires it of CreateTable.
  // Default: none.
  std::string cluster_token;
  // Address ("host:port") of every shard the slot map may name. Required without a
  // coordinator.
  std::map<uint32_t, std::string> shard_addresses;
  // The initial slot map. Redirects from shards update the client's copy.
  // Default: every slot unowned (every call fails until set).
  SlotMap slot_map;
  // Deadline of one coordinator call (map load). Default: 2 s.
  absl::Duration coordinator_deadline = absl::Seconds(2);
  // Least time between two map reloads from the coordinator; reloads wanted sooner are
  // skipped (the call goes on with the map it has). Default: 100 ms.
  absl::Duration min_refresh_interval = absl::Milliseconds(100);
  // This worker's id in (worker_id, sequence) push deduplication. Must be unique
  // among concurrently running clients that push. Default: 0.
  uint64_t worker_id = 0;
  // The first push sequence this client uses (>= 1). A restarted worker that reuses
  // its worker_id must start past every sequence it used before. Default: 1.
  uint64_t first_sequence = 1;
  // The training-job attempt every Pull and Push names (ps.proto RestoreShardRequest):
  // shards restored for a later attempt answer ABORTED, shards not yet restored for
  // this one UNAVAILABLE. 0: not part of a fenced job. Default: 0.
  uint64_t attempt = 0;
  // The job whose own tables every call uses (ps.proto PullRequest.job; coordinator.proto
  // JobTables): tables are created, loaded, pulled, pushed and digested in that job's
  // store. Hot keys are not read from replicas then (read_replicas is ignored: the
  // replicas hold shared tables' rows). Empty: the cluster's shared tables.
  // Default: empty.
  std::string job;
  // Budget of one Pull/Push including retries and redirects; every RPC carries it as
  // its gRPC deadline. Default: 5 s.
  absl::Duration deadline = absl::Seconds(5);
  // Retries of one shard request on UNAVAILABLE. Default: 5.
  int max_retries = 5;
  // Backoff before the first retry, doubling up to max_backoff. Default: 10 ms, 1 s.
  absl::Duration initial_backoff = absl::Milliseconds(10);
  absl::Duration max_backoff = absl::Seconds(1);
  // Redirects followed per slot within one call. Default: 3.
  int max_redirects = 3;
  // Largest message sent or received. Default: 256 MiB (the server's default).
  int max_message_bytes = 256 << 20;
  // Least time between two background fetches of the hot set from the coordinator,
  // started by pulls; 0: no automatic fetch (only RefreshHotSet()). Without a
  // coordinator there is no hot set. Default: 1 s.
  absl::Duration hot_set_refresh_interval = absl::Seconds(1);
  // Spread pulls of hot keys over their replica holders when the hot set replicates
  // them; false: every key goes to its owner. Default: true.
  bool read_replicas = true;
  // Test-only: when set, called once per shard channel the client creates; the
  // interceptors it returns are installed on that channel (fault injection).
  // Default: none.
  std::function<
      std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>()>
      shard_interceptors;
};

// Per-call options.
struct PsCallOptions {
  WireEncoding encoding = WireEncoding::kTableDefault;
  // Pulls: the caller's training step (PullRequest.step; 0: unknown). Replica holders
  // refuse copies more than HotSet.max_staleness_steps behind it. Pushes take their
  // step as an argument instead.
  int64_t step = 0;
};

// The pending result of PullAsync/PushAsync. Move-only. Destroying a handle that was
// not waited on waits (bounded by the call's deadline). No RPC of the call outlives
// Wait: on the deadline its RPCs are cancelled and their callbacks awaited (bounded).
class PsHandle {
 public:
  class Op;  // implementation, ps_client.cc

  PsHandle();
  explicit PsHandle(std::unique_ptr<Op> op);
  PsHandle(PsHandle&&) noexcept;
  PsHandle& operator=(PsHandle&&) noexcept;
  ~PsHandle();

  // Drives the call to completion (retries and redirects run inside Wait) and returns
  // its status. Returns at the latest shortly after the call's deadline. Calling it
  // again returns the same status.
  absl::Status Wait();

 private:
  std::unique_ptr<Op> op_;
  bool done_ = false;
  absl::Status status_;
};

// Waits for every handle (all of them, even after an error: none is left in flight)
// and returns the first error; clears `handles`.
absl::Status WaitAll(std::vector<PsHandle>* handles);

class PsClient {
 public:
  // Connects (lazily) to every shard in options.shard_addresses, or loads the cluster
  // map from options.coordinator_address and connects to its shards. INVALID_ARGUMENT
  // for bad options (no shards and no coordinator, first_sequence 0, non-positive
  // deadline). With a coordinator: its error (UNAVAILABLE when down) if the map cannot
  // be loaded, UNAVAILABLE while it has not assigned slots yet (epoch 0).
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(const PsClientOptions& options);
  ~PsClient();

  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  // Registers a table this client may pull and push. REQUIRES: `config` normalized
  // (as returned by the CreateTable RPC): seed != 0 and 1 <= dim <= 4096, else
  // INVALID_ARGUMENT. Replaces an earlier registration of the same name.
  absl::Status AddTable(const v1::TableConfig& config);

  // Creates the table on every shard the client knows (CreateTable RPC,
  // idempotent for an equal config), checks all shards return the same normalized
  // config and registers it (AddTable). Errors: those of the RPC (ALREADY_EXISTS for
  // a conflicting config), INTERNAL if shards disagree.
  absl::Status CreateTableEverywhere(const v1::TableConfig& config);

  // The registered config of `table`, or NOT_FOUND.
  absl::StatusOr<v1::TableConfig> GetTable(absl::string_view table) const;

  // Reads the rows of `ids` into `out` (row-major, out[i * dim + j]).
  // REQUIRES: out.size() == ids.size() * dim. `ids` and `out` must stay valid until the
  // handle's Wait returns. Errors: NOT_FOUND (table not registered), INVALID_ARGUMENT
  // (sizes), UNAVAILABLE (a shard did not answer within the retries),
  // DEADLINE_EXCEEDED, FAILED_PRECONDITION (redirects exhausted), server errors.
  // On error the contents of `out` are unspecified.
  PsHandle PullAsync(absl::string_view table, absl::Span<const uint64_t> ids, absl::Span<float> out,
                     const PsCallOptions& call = {});
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> ids, absl::Span<float> out,
                    const PsCallOptions& call = {});

  // Applies the gradients `grads` (row-major, grads.size() == ids.size() * dim) of
  // `ids` at training `step`. Each per-shard request carries (worker_id, sequence);
  // retries reuse the sequence, so a push is applied at most once per key.
  // Errors as Pull, plus ABORTED (the server's dedup window passed; the request may
  // have been applied). On error some shards may have applied their part.
  PsHandle PushAsync(absl::string_view table, absl::Span<const uint64_t> ids,
                     absl::Span<const float> grads, int64_t step, const PsCallOptions& call = {});
  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> ids,
                    absl::Span<const float> grads, int64_t step, const PsCallOptions& call = {});

  // The digest of `table`'s stored rows over the shards that own slots in the client's
  // map (each shard's ChecksumRequest answer, summed per table; see ps.proto):
  // comparable across shard counts, restores and followers. Empty `table`: every
  // table. Flushes dirty rows on the shards; consistent while no pushes run. A cut of
  // one slot map: when the shards answer at different epochs (a slot move switched
  // between the calls), or with a coordinator at another epoch than the client's map,
  // it reloads the map and asks again, with backoff, until `deadline`; then ABORTED
  // naming the epochs. Errors: the first failing shard's, with its id and address.
  struct TableDigest {
    uint64_t rows = 0;
    uint64_t digest = 0;
  };
  absl::StatusOr<std::map<std::string, TableDigest>> Checksum(absl::string_view table = "");

  // The client's current view of the slot map (updated by redirects and reloads).
  SlotMap slot_map() const;

  // Reloads the slot map, shard addresses and tables from the coordinator now (not
  // rate-limited). FAILED_PRECONDITION without a coordinator; the coordinator's error
  // otherwise (the client keeps its current map). A map older than the client's is
  // ignored.
  absl::Status RefreshClusterMap();

  // The newest hot set the client has (never null; version 0: none). Starts a
  // background fetch when one is due, never waits for it.
  std::shared_ptr<const HotSetView> hot_set() const;
  // Fetches the hot set from the coordinator now and waits for it (coordinator_deadline).
  // FAILED_PRECONDITION without a coordinator; the coordinator's error otherwise (the
  // client keeps the hot set it has).
  absl::Status RefreshHotSet();

  // Replica reads since the client was created.
  struct ReplicaStats {
    uint64_t replica_keys = 0;     // keys sent to replica holders (replica_read pulls)
    uint64_t replica_missing = 0;  // of them, answered as missing: asked of the owner
    uint64_t fallbacks = 0;        // replica requests that failed: keys asked of owners
  };
  ReplicaStats replica_stats() const;

  struct Impl;  // ps_client_impl.h

 private:
  explicit PsClient(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace ember

#endif  // EMBER_COMMON_PS_CLIENT_H_
