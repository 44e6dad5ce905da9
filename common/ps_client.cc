// Copyright 2026 The Ember Authors.
//
// PsClient implementation. A call is driven in rounds: each round sends one RPC per
// pending shard request in parallel (gRPC callback API) and waits for all of them;
// then, in the waiting thread, finished requests are consumed, UNAVAILABLE ones are
// queued for a retry after a backoff (overloaded ones after their retry hint),
// redirected ones are re-split with the updated
// slot map.
//
// Lifetimes (the cause of an earlier "ref_counted.h: assertion failed: prior > 0"):
//  * A round (contexts, requests, responses) is owned by its Op and freed only in the
//    waiting thread, after every callback of the round has run. A callback only
//    stores its status and decrements a counter under the round's mutex; it owns
//    nothing, so no ClientContext, stub or channel is ever destroyed on a gRPC
//    callback thread. On the deadline the round's RPCs are cancelled and their
//    callbacks awaited (bounded); a round whose callbacks still do not come is leaked,
//    never freed under a callback.
//  * gRPC is initialized once per process and never shut down by the client: the
//    last grpc_shutdown would otherwise run on a gRPC thread (the channel's callback
//    completion queue is deleted there), spawn a detached clean-up thread and race
//    with the next client's grpc_init and with connections still closing.

#include "common/ps_client.h"
#include "common/keepalive.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/cluster_token.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "common/hash.h"
#include "common/job_name.h"
#include "common/ps_client_cluster.h"
#include "common/ps_client_impl.h"
#include "common/pull_wire.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpc/grpc.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ember {
namespace {

// How long after its deadline a round's callbacks may take before the RPCs are
// cancelled, and how long cancelled RPCs get to deliver their callbacks.
constexpr absl::Duration kCallbackSlack = absl::Seconds(1);
constexpr absl::Duration kCancelGrace = absl::Seconds(5);

// Takes a process-lifetime reference on gRPC (see the file comment).
void KeepGrpcInitialized() {
  static const bool initialized = [] {
    grpc_init();
    return true;
  }();
  (void)initialized;
}

using Shards = PsClient::Impl::Shards;
using Shard = PsClient::Impl::Shard;

std::string PackIds(absl::Span<const uint64_t> ids, const std::vector<size_t>& index) {
  std::string out(index.size() * sizeof(uint64_t), '\0');
  char* p = out.data();
  for (size_t i : index) {
    std::memcpy(p, &ids[i], sizeof(uint64_t));  // little-endian host (x86-64, aarch64)
    p += sizeof(uint64_t);
  }
  return out;
}

}  // namespace

class PsHandle::Op {
 public:
  enum class Kind { kPull, kPush };

  // One per-shard request: the positions in the caller's batch it carries.
  struct Part {
    uint32_t shard = 0;
    // Pulls: hot keys read from `shard`'s replicas (PullRequest.replica_read), not
    // keys `shard` owns.
    bool replica = false;
    std::vector<size_t> index;
    uint64_t sequence = 0;  // pushes
    int retries = 0;
  };

  // One RPC of a round.
  struct Rpc {
    Part part;
    grpc::ClientContext context;  // fresh for every attempt
    v1::PullRequest pull_request;
    grpc::ByteBuffer pull_bytes;  // an owner read's raw answer
    // A replica read's answer, or an owner's that was parsed (`parsed`).
    v1::PullResponse pull_response;
    bool parsed = false;
    v1::PushRequest push_request;
    v1::PushResponse push_response;
    grpc::Status status;  // written by the callback
  };

  // The RPCs sent together. Owned by the Op; freed by the waiting thread once
  // `pending` is 0 (every callback has run and will not touch the round again).
  struct Round {
    absl::Mutex mu;
    int pending ABSL_GUARDED_BY(mu) = 0;
    std::vector<std::unique_ptr<Rpc>> rpcs;
  };

  // A call that fails before any RPC.
  explicit Op(absl::Status error) : error_(std::move(error)) {}

  // `hot`: a pull's hot set when it replicates (null: every key to its owner).
  Op(Kind kind, std::shared_ptr<PsClient::Impl> impl, v1::TableConfig table,
     absl::Span<const uint64_t> ids, absl::Span<float> out, absl::Span<const float> grads,
     int64_t step, bool float16, std::shared_ptr<const HotSetView> hot = nullptr)
      : kind_(kind),
        impl_(std::move(impl)),
        table_(std::move(table)),
        ids_(ids),
        out_(out),
        grads_(grads),
        step_(step),
        float16_(float16),
        deadline_(absl::Now() + impl_->options.deadline),
        backoff_(impl_->options.initial_backoff) {
    if (hot != nullptr && hot->replicated()) {
      hot_keys_ = hot->HotKeys(table_.name());
      if (hot_keys_ != nullptr) hot_ = std::move(hot);
      spread_ = Mix64Alt(impl_->pulls.fetch_add(1, std::memory_order_relaxed) ^
                         (impl_->options.worker_id << 32));
    }
    std::vector<size_t> all(ids.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    std::vector<Part> parts;
    const PsClient::Impl::View view = impl_->Snapshot();
    error_ = Split(view, all, &parts, /*replicas=*/hot_ != nullptr);
    if (error_.ok() && !parts.empty()) Send(view, std::move(parts));
  }

  // A round still in flight (the call was never waited on) is cancelled and awaited.
  ~Op() {
    if (round_ != nullptr && !AwaitRound(*round_)) round_.release();  // see AwaitRound
  }

  absl::Status Wait() {
    if (!error_.ok()) return error_;
    while (round_ != nullptr) {
      if (!AwaitRound(*round_)) {
        // A callback may still write into the round: leak it rather than free it.
        round_.release();
        return absl::DeadlineExceededError(
            "ps client: shard requests did not finish after being cancelled");
      }
      std::unique_ptr<Round> round = std::move(round_);
      std::vector<Part> next;
      std::vector<size_t> reroute;  // pulled keys to split again after the refresh
      bool backoff = false;
      bool refresh = false;
      for (std::unique_ptr<Rpc>& rpc : round->rpcs) {
        EMBER_RETURN_IF_ERROR(HandleRpc(*rpc, &next, &reroute, &backoff, &refresh));
      }
      round.reset();  // every callback has run (AwaitRound)
      if (next.empty() && reroute.empty()) break;
      EMBER_RETURN_IF_ERROR(BeforeRetry(refresh, backoff));
      if (!reroute.empty()) EMBER_RETURN_IF_ERROR(Split(impl_->Snapshot(), reroute, &next));
      Send(impl_->Snapshot(), std::move(next));
    }
    return absl::OkStatus();
  }

 private:
  // Wait's handling of one finished RPC: consumes its answer, or puts what is to be
  // retried (unavailable or stale shard: same part; redirect or replica miss: its keys
  // re-split) into *next, or (a pull of an unavailable shard) its keys into *reroute,
  // to be split under the map the refresh brings, setting *backoff and *refresh as the
  // retry needs. Returns the call's error when the RPC fails it.
  absl::Status HandleRpc(Rpc& rpc, std::vector<Part>* next, std::vector<size_t>* reroute,
                         bool* backoff, bool* refresh) {
    Part& part = rpc.part;
    const absl::Status s = FromGrpcStatus(rpc.status, &rpc.context);
    if (part.replica) {
      // Whatever a holder could not answer goes to the owners, never fails the call.
      std::vector<size_t> to_owners;
      if (!s.ok() || !ConsumeReplica(rpc, &to_owners)) {
        impl_->replica_fallbacks.fetch_add(1, std::memory_order_relaxed);
        to_owners = std::move(part.index);
      }
      if (!to_owners.empty()) {
        absl::Status split = Split(impl_->Snapshot(), to_owners, next);
        if (!split.ok()) return split;
      }
      return absl::OkStatus();
    }
    if (s.ok()) {
      absl::Status consumed = Consume(rpc);
      if (!consumed.ok()) return Fail(consumed, part.shard);
      return absl::OkStatus();
    }
    std::optional<v1::WrongShard> w = GetWrongShard(s);
    const bool redirect = s.code() == absl::StatusCode::kFailedPrecondition && w.has_value();
    // A shard behind the client's map (restarted, or not yet told of a change)
    // catches up by itself: retry it like an unavailable one. Nothing was applied.
    const bool stale_shard = redirect && w->epoch() < impl_->Map()->epoch();
    // An overloaded shard (its in-flight bound) names when to come back: wait that long
    // and resend, as often as the deadline allows, since the request was not applied.
    if (std::optional<absl::Duration> after = GetRetryAfter(s);
        after.has_value() && s.code() == absl::StatusCode::kResourceExhausted) {
      retry_after_ = std::max(retry_after_, *after);
      next->push_back(std::move(part));  // same shard, same sequence
      return absl::OkStatus();
    }
    if (s.code() == absl::StatusCode::kUnavailable || stale_shard) {
      if (part.retries >= impl_->options.max_retries) return Fail(s, part.shard);
      ++part.retries;
      *backoff = true;
      *refresh = *refresh || !stale_shard;
      if (kind_ == Kind::kPull && !stale_shard && impl_->coordinator != nullptr) {
        // A pull applies nothing, so its keys may go wherever the refreshed map says: a
        // shard that drained and left answers nothing again, and a restarting one is
        // asked again under an unchanged map. (A push stays with its shard: its
        // (worker, sequence) is deduplicated there.) The deadline bounds the rounds.
        reroute->insert(reroute->end(), part.index.begin(), part.index.end());
        return absl::OkStatus();
      }
      next->push_back(std::move(part));  // same shard, same sequence
      return absl::OkStatus();
    }
    if (redirect) {
      if (++redirects_[w->slot()] > impl_->options.max_redirects) {
        return Fail(absl::FailedPreconditionError(
                        absl::StrCat("too many redirects for slot ", w->slot(), ": ", s.message())),
                    part.shard);
      }
      if (impl_->coordinator != nullptr && w->epoch() > impl_->Map()->epoch()) {
        // The map changed: reload all of it. If the coordinator is down or the
        // reload was skipped, the redirect below still fixes this slot.
        impl_->Refresh(deadline_, /*rate_limited=*/true, w->epoch()).IgnoreError();
      }
      impl_->ApplyRedirect(*w);
      // Nothing of the rejected request was applied: re-split its keys as new
      // requests (with new sequences).
      return Split(impl_->Snapshot(), part.index, next);
    }
    return Fail(s, part.shard);
  }

  // Between rounds: refreshes the map (when a shard was unavailable) and sleeps the
  // backoff. DEADLINE_EXCEEDED when the call's deadline passed.
  absl::Status BeforeRetry(bool refresh, bool backoff) {
    if (refresh && impl_->coordinator != nullptr) {
      // A shard may have moved to a new address; the coordinator knows.
      impl_->Refresh(deadline_, /*rate_limited=*/true).IgnoreError();
    }
    const absl::Duration hinted = std::exchange(retry_after_, absl::ZeroDuration());
    if (backoff || hinted > absl::ZeroDuration()) {
      const absl::Duration left = deadline_ - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError(
            hinted > absl::ZeroDuration()
                ? "ps client: deadline passed while retrying an overloaded shard "
                  "(RESOURCE_EXHAUSTED with a retry hint)"
                : "ps client: deadline passed while retrying");
      }
      absl::SleepFor(std::min(std::max(backoff ? backoff_ : absl::ZeroDuration(), hinted), left));
      if (backoff) backoff_ = std::min(backoff_ * 2, impl_->options.max_backoff);
    }
    return absl::OkStatus();
  }

  absl::Status Fail(const absl::Status& s, uint32_t shard) {
    return WithShardContext(s, shard, impl_->AddressOf(shard));
  }

  // Waits until every callback of `round` has run. Every RPC carries deadline_, so
  // they come by then; past deadline_ + kCallbackSlack the RPCs are cancelled and get
  // kCancelGrace more. Returns false if callbacks are still outstanding after that:
  // the caller must then not free the round.
  bool AwaitRound(Round& round) {
    auto done = [&round]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(round.mu) { return round.pending == 0; };
    {
      absl::MutexLock lock(&round.mu);
      if (round.mu.AwaitWithDeadline(absl::Condition(&done), deadline_ + kCallbackSlack)) {
        return true;
      }
    }
    for (std::unique_ptr<Rpc>& rpc : round.rpcs) rpc->context.TryCancel();  // thread-safe
    absl::MutexLock lock(&round.mu);
    return round.mu.AwaitWithDeadline(absl::Condition(&done), absl::Now() + kCancelGrace);
  }

  // Groups `index` by owner shard under `view`, appending to `parts`. With `replicas`
  // (a pull whose table has hot keys in a replicating hot set), each hot key goes to
  // one of its readers instead: its owner or one of the owner's replica holders the
  // client has an address for, a replica part per holder.
  absl::Status Split(const PsClient::Impl::View& view, const std::vector<size_t>& index,
                     std::vector<Part>* parts, bool replicas = false) {
    // (shard, replica) -> position in *parts
    absl::flat_hash_map<std::pair<uint32_t, bool>, size_t> by_shard;
    // owner -> its readers: the owner, then its replica holders
    absl::flat_hash_map<uint32_t, std::vector<uint32_t>> readers_of;
    for (size_t i : index) {
      const uint32_t slot = SlotOf(table_.seed(), ids_[i]);
      uint32_t shard = view.map->OwnerOf(slot);
      if (view.shards->find(shard) == view.shards->end()) {
        return absl::UnavailableError(
            absl::StrCat("ps client: slot ", slot, " is owned by shard ",
                         shard == kNoShard ? std::string("<none>") : absl::StrCat(shard),
                         " which has no address"));
      }
      bool replica = false;
      if (replicas && hot_keys_->contains(ids_[i])) {
        auto [readers, inserted] = readers_of.try_emplace(shard);
        if (inserted) {
          readers->second.push_back(shard);
          for (uint32_t holder : hot_->ReplicaHoldersOf(shard)) {
            if (view.shards->contains(holder)) readers->second.push_back(holder);
          }
        }
        const std::vector<uint32_t>& r = readers->second;
        const uint32_t pick = r[Mix64Alt(ids_[i] ^ spread_) % r.size()];
        replica = pick != shard;
        shard = pick;
      }
      auto [it, inserted] = by_shard.try_emplace(std::make_pair(shard, replica), parts->size());
      if (inserted) {
        parts->emplace_back();
        parts->back().shard = shard;
        parts->back().replica = replica;
        if (kind_ == Kind::kPush) parts->back().sequence = impl_->next_sequence.fetch_add(1);
      }
      (*parts)[it->second].index.push_back(i);
    }
    return absl::OkStatus();
  }

  // Starts one RPC per part (each with a fresh ClientContext); the next Wait round
  // collects them. REQUIRES: no round in flight.
  void Send(const PsClient::Impl::View& view, std::vector<Part> parts) {
    auto round = std::make_unique<Round>();
    const uint64_t epoch = view.map->epoch();
    const v1::ValueEncoding encoding =
        float16_ ? v1::VALUE_ENCODING_FLOAT16 : v1::VALUE_ENCODING_FLOAT32;
    for (Part& part : parts) {
      auto rpc = std::make_unique<Rpc>();
      rpc->part = std::move(part);
      rpc->context.set_deadline(absl::ToChronoTime(deadline_));
      if (kind_ == Kind::kPull) {
        v1::PullRequest& r = rpc->pull_request;
        r.set_table(table_.name());
        r.set_ids(PackIds(ids_, rpc->part.index));
        r.set_epoch(epoch);
        r.set_attempt(impl_->options.attempt);
        r.set_job(impl_->options.job);
        r.set_encoding(encoding);
        r.set_step(step_);
        if (rpc->part.replica) {
          r.set_replica_read(true);
          impl_->replica_keys.fetch_add(rpc->part.index.size(), std::memory_order_relaxed);
        }
      } else {
        v1::PushRequest& r = rpc->push_request;
        r.set_table(table_.name());
        r.set_ids(PackIds(ids_, rpc->part.index));
        r.set_encoding(encoding);
        r.set_step(step_);
        r.set_worker_id(impl_->options.worker_id);
        r.set_sequence(rpc->part.sequence);
        r.set_epoch(epoch);
        r.set_attempt(impl_->options.attempt);
        r.set_job(impl_->options.job);
        // Each row's gradient straight into the request's bytes.
        const uint32_t dim = table_.dim();
        const size_t row_bytes = dim * (float16_ ? 2 : sizeof(float));
        std::string* bytes = r.mutable_grads();
        bytes->resize(rpc->part.index.size() * row_bytes);
        for (size_t k = 0; k < rpc->part.index.size(); ++k) {
          const absl::Span<const float> row = grads_.subspan(rpc->part.index[k] * dim, dim);
          char* dst = bytes->data() + k * row_bytes;
          if (float16_) {
            EncodeFloat16Bytes(row, dst);
          } else {
            std::memcpy(dst, row.data(), row_bytes);
          }
        }
      }
      round->rpcs.push_back(std::move(rpc));
    }
    Round* r = round.get();
    {
      absl::MutexLock lock(&r->mu);
      r->pending = static_cast<int>(r->rpcs.size());
    }
    round_ = std::move(round);
    for (std::unique_ptr<Rpc>& owned : r->rpcs) {
      Rpc* rpc = owned.get();
      auto shard = view.shards->find(rpc->part.shard);
      if (shard == view.shards->end()) {  // not reachable: shards are never removed
        rpc->status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "shard has no address");
        absl::MutexLock lock(&r->mu);
        --r->pending;
        continue;
      }
      // The callback owns nothing and touches only the round; its unlock is its last
      // access (the waiting thread frees the round once pending reaches 0).
      auto done = [r, rpc](grpc::Status status) {
        rpc->status = std::move(status);
        absl::MutexLock lock(&r->mu);
        --r->pending;
      };
      v1::PsService::StubInterface::async_interface* async = shard->second.stub->async();
      if (kind_ == Kind::kPull && rpc->part.replica) {
        // A replica read's answer carries replica_missing: parsed as a message.
        rpc->parsed = true;
        async->Pull(&rpc->context, &rpc->pull_request, &rpc->pull_response, std::move(done));
      } else if (kind_ == Kind::kPull) {
        shard->second.pull->UnaryCall(&rpc->context, PsClient::Impl::kPullMethod,
                                      grpc::StubOptions(), &rpc->pull_request, &rpc->pull_bytes,
                                      std::move(done));
      } else {
        async->Push(&rpc->context, &rpc->push_request, &rpc->push_response, std::move(done));
      }
    }
  }

  // Takes the result of a successful RPC: the pulled rows into out_, copied straight
  // from the received slices when the answer is an owner's plain values (every
  // ember-ps writes that), else through a parse of the PullResponse.
  absl::Status Consume(Rpc& rpc) {
    if (kind_ == Kind::kPush) return absl::OkStatus();
    const uint32_t dim = table_.dim();
    const size_t rows = rpc.part.index.size();
    const size_t element_bytes = float16_ ? 2 : 4;
    auto take_row = [&](size_t k, absl::string_view bytes) {
      const absl::Span<float> dst(&out_[rpc.part.index[k] * dim], dim);
      if (float16_) {
        DecodeFloat16Bytes(bytes, dst);
      } else {
        DecodeFloat32Bytes(bytes, dst);
      }
    };
    if (!rpc.parsed && ForEachPulledRow(rpc.pull_bytes, dim * element_bytes, rows, take_row)) {
      return absl::OkStatus();
    }
    EMBER_RETURN_IF_ERROR(Parse(rpc));
    const std::string& bytes = rpc.pull_response.values();
    if (bytes.size() != rows * dim * element_bytes) {
      return absl::InternalError(absl::StrCat("ps client: pull returned ", bytes.size(),
                                              " bytes, expected ", rows * dim * element_bytes));
    }
    const size_t row_bytes = dim * element_bytes;
    for (size_t k = 0; k < rows; ++k) take_row(k, bytes.substr(k * row_bytes, row_bytes));
    return absl::OkStatus();
  }

  // Parses the raw answer of a pull into rpc.pull_response (once).
  static absl::Status Parse(Rpc& rpc) {
    if (rpc.parsed) return absl::OkStatus();
    rpc.parsed = true;
    if (!grpc::SerializationTraits<v1::PullResponse>::Deserialize(&rpc.pull_bytes,
                                                                  &rpc.pull_response)
             .ok()) {
      return absl::InternalError("ps client: the pull's answer is not a PullResponse");
    }
    return absl::OkStatus();
  }

  // Takes a successful replica read: the answered rows into out_, the positions the
  // holder did not answer into *to_owners. False for a malformed answer (then nothing
  // of it counts: every key goes to its owner).
  bool ConsumeReplica(Rpc& rpc, std::vector<size_t>* to_owners) {
    if (!Parse(rpc).ok()) return false;
    const google::protobuf::RepeatedField<uint32_t>& missing = rpc.pull_response.replica_missing();
    for (int k = 0; k < missing.size(); ++k) {
      if (missing[k] >= rpc.part.index.size() || (k > 0 && missing[k] <= missing[k - 1])) {
        return false;
      }
    }
    if (!Consume(rpc).ok()) return false;
    for (uint32_t position : missing) to_owners->push_back(rpc.part.index[position]);
    impl_->replica_missing.fetch_add(missing.size(), std::memory_order_relaxed);
    return true;
  }

  absl::Status error_;
  Kind kind_ = Kind::kPull;
  std::shared_ptr<PsClient::Impl> impl_;
  v1::TableConfig table_;
  absl::Span<const uint64_t> ids_;
  absl::Span<float> out_;
  absl::Span<const float> grads_;
  int64_t step_ = 0;
  bool float16_ = false;
  absl::Time deadline_;
  absl::Duration backoff_;
  // The longest retry hint of the round's overloaded shards (RESOURCE_EXHAUSTED).
  absl::Duration retry_after_ = absl::ZeroDuration();
  // Pulls with replica reads: the hot set, its hot keys of table_ (non-null exactly
  // when hot_ is) and this pull's spreading salt.
  std::shared_ptr<const HotSetView> hot_;
  const absl::flat_hash_set<uint64_t>* hot_keys_ = nullptr;
  uint64_t spread_ = 0;
  absl::flat_hash_map<uint32_t, int> redirects_;  // slot -> redirects followed
  std::unique_ptr<Round> round_;                  // the round in flight, if any
};

PsHandle::PsHandle() = default;
PsHandle::PsHandle(std::unique_ptr<Op> op) : op_(std::move(op)) {}
PsHandle::PsHandle(PsHandle&&) noexcept = default;
PsHandle& PsHandle::operator=(PsHandle&& other) noexcept {
  if (this != &other) {
    if (op_ != nullptr && !done_) Wait().IgnoreError();  // the caller dropped it
    op_ = std::move(other.op_);
    done_ = other.done_;
    status_ = std::move(other.status_);
  }
  return *this;
}
PsHandle::~PsHandle() {
  if (op_ != nullptr && !done_) Wait().IgnoreError();  // the caller dropped it
}

absl::Status WaitAll(std::vector<PsHandle>* handles) {
  absl::Status first;
  for (PsHandle& h : *handles) {
    absl::Status s = h.Wait();
    if (!s.ok() && first.ok()) first = s;
  }
  handles->clear();
  return first;
}

absl::Status PsHandle::Wait() {
  if (done_) return status_;
  status_ = op_ == nullptr ? absl::FailedPreconditionError("empty PsHandle") : op_->Wait();
  done_ = true;
  return status_;
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(const PsClientOptions& options) {
  if (options.shard_addresses.empty() && options.coordinator_address.empty()) {
    return absl::InvalidArgumentError(
        "PsClientOptions: shard_addresses is empty and there is no coordinator_address");
  }
  if (options.first_sequence == 0) {
    return absl::InvalidArgumentError("PsClientOptions.first_sequence must be >= 1");
  }
  if (options.deadline <= absl::ZeroDuration() ||
      options.coordinator_deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("PsClientOptions deadlines must be positive");
  }
  if (options.hot_set_refresh_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("PsClientOptions.hot_set_refresh_interval must be >= 0");
  }
  if (!options.job.empty()) EMBER_RETURN_IF_ERROR(CheckJobName(options.job));
  KeepGrpcInitialized();
  auto impl = std::make_shared<Impl>();
  impl->options = options;
  impl->next_sequence.store(options.first_sequence);
  impl->channel_args.SetMaxReceiveMessageSize(options.max_message_bytes);
  impl->channel_args.SetMaxSendMessageSize(options.max_message_bytes);
  SetClientKeepalive(&impl->channel_args);
  auto shards = std::make_shared<Shards>();
  for (const auto& [shard, address] : options.shard_addresses) {
    (*shards)[shard] = impl->NewShard(address);
  }
  {
    absl::MutexLock lock(&impl->map_mu);
    impl->slot_map = std::make_shared<const SlotMap>(options.slot_map);
    impl->shards = std::move(shards);
  }
  if (!options.coordinator_address.empty()) {
    impl->coordinator = v1::CoordinatorService::NewStub(CreateClusterChannel(
        options.coordinator_address, options.channel_credentials, options.cluster_token));
  }
  // The first fetch starts with the first map load (Impl::Refresh).
  impl->hot_set = std::make_unique<HotSetCache>(
      impl->coordinator.get(), options.hot_set_refresh_interval, options.coordinator_deadline);
  if (impl->coordinator != nullptr) {
    absl::Status loaded =
        impl->Refresh(absl::Now() + options.coordinator_deadline, /*rate_limited=*/false);
    if (!loaded.ok()) return loaded;
  }
  return std::unique_ptr<PsClient>(new PsClient(std::move(impl)));
}

PsClient::PsClient(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
PsClient::~PsClient() = default;

namespace {

bool UseFloat16(const v1::TableConfig& table, const PsCallOptions& call) {
  switch (call.encoding) {
    case WireEncoding::kFloat16:
      return true;
    case WireEncoding::kFloat32:
      return false;
    case WireEncoding::kTableDefault:
      break;
  }
  return table.wire_type() == v1::TableConfig::WIRE_FLOAT16;
}

// The config of `table`; with a coordinator, an unknown table triggers one
// (rate-limited) reload of the cluster map, which carries every table.
absl::StatusOr<v1::TableConfig> LookupTable(const PsClient& client, PsClient::Impl& impl,
                                            absl::string_view table) {
  absl::StatusOr<v1::TableConfig> config = client.GetTable(table);
  if (config.ok() || impl.coordinator == nullptr) return config;
  if (!impl.Refresh(absl::Now() + impl.options.coordinator_deadline, /*rate_limited=*/true).ok()) {
    return config;
  }
  return client.GetTable(table);
}

}  // namespace

PsHandle PsClient::PullAsync(absl::string_view table, absl::Span<const uint64_t> ids,
                             absl::Span<float> out, const PsCallOptions& call) {
  absl::StatusOr<v1::TableConfig> config = LookupTable(*this, *impl_, table);
  if (!config.ok()) return PsHandle(std::make_unique<PsHandle::Op>(config.status()));
  if (out.size() != ids.size() * config->dim()) {
    return PsHandle(std::make_unique<PsHandle::Op>(absl::InvalidArgumentError(absl::StrCat(
        "Pull: out has ", out.size(), " floats, expected ", ids.size(), " x ", config->dim()))));
  }
  const bool f16 = UseFloat16(*config, call);
  std::shared_ptr<const HotSetView> hot;
  if (impl_->options.read_replicas && impl_->options.job.empty()) hot = impl_->hot_set->Current();
  return PsHandle(
      std::make_unique<PsHandle::Op>(PsHandle::Op::Kind::kPull, impl_, *std::move(config), ids, out,
                                     absl::Span<const float>(), call.step, f16, std::move(hot)));
}

absl::Status PsClient::Pull(absl::string_view table, absl::Span<const uint64_t> ids,
                            absl::Span<float> out, const PsCallOptions& call) {
  return PullAsync(table, ids, out, call).Wait();
}

PsHandle PsClient::PushAsync(absl::string_view table, absl::Span<const uint64_t> ids,
                             absl::Span<const float> grads, int64_t step,
                             const PsCallOptions& call) {
  absl::StatusOr<v1::TableConfig> config = LookupTable(*this, *impl_, table);
  if (!config.ok()) return PsHandle(std::make_unique<PsHandle::Op>(config.status()));
  if (grads.size() != ids.size() * config->dim()) {
    return PsHandle(std::make_unique<PsHandle::Op>(absl::InvalidArgumentError(
        absl::StrCat("Push: grads has ", grads.size(), " floats, expected ", ids.size(), " x ",
                     config->dim()))));
  }
  const bool f16 = UseFloat16(*config, call);
  return PsHandle(std::make_unique<PsHandle::Op>(PsHandle::Op::Kind::kPush, impl_,
                                                 *std::move(config), ids, absl::Span<float>(),
                                                 grads, step, f16));
}

absl::Status PsClient::Push(absl::string_view table, absl::Span<const uint64_t> ids,
                            absl::Span<const float> grads, int64_t step,
                            const PsCallOptions& call) {
  return PushAsync(table, ids, grads, step, call).Wait();
}

}  // namespace ember
