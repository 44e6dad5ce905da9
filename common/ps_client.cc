// Copyright 2026 The Ember Authors.
//
// PsClient implementation. A call is driven in rounds: each round sends one RPC per
// pending shard request in parallel (gRPC callback API) and waits for all of them;
// then, in the waiting thread, finished requests are consumed, UNAVAILABLE ones are
// queued for a retry after a backoff, redirected ones are re-split with the updated
// slot map. Callbacks never touch caller memory, so a call that gives up early only
// leaves a shared Round alive until its RPCs end (each bounded by the deadline).

#include "common/ps_client.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/slot.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
// TODO(lead): float16.h and grpc_status.h belong in common/ (layering: common/ must
// not depend on server/). Until they move, ember_ps_client links ember_ps_service.
#include "common/float16.h"
#include "common/grpc_status.h"

namespace ember {

struct PsClient::Impl {
  PsClientOptions options;
  absl::flat_hash_map<uint32_t, std::unique_ptr<v1::PsService::Stub>> stubs;  // immutable
  std::atomic<uint64_t> next_sequence{1};

  mutable absl::Mutex map_mu;
  // Replaced whole, never mutated: readers copy the pointer and drop the lock.
  std::shared_ptr<const SlotMap> slot_map ABSL_GUARDED_BY(map_mu);

  mutable absl::Mutex tables_mu;
  absl::flat_hash_map<std::string, v1::TableConfig> tables ABSL_GUARDED_BY(tables_mu);

  std::shared_ptr<const SlotMap> Map() const {
    absl::MutexLock lock(&map_mu);
    return slot_map;
  }

  // Records a redirect: `slot` is owned by `owner` at `epoch` (never moves back).
  void ApplyRedirect(const v1::WrongShard& w) {
    absl::MutexLock lock(&map_mu);
    if (w.epoch() < slot_map->epoch()) return;  // a stale shard: keep our newer view
    auto next = std::make_shared<SlotMap>(*slot_map);
    next->SetOwner(w.slot(), w.owner());
    next->set_epoch(w.epoch());
    slot_map = std::move(next);
  }

  std::string AddressOf(uint32_t shard) const {
    auto it = options.shard_addresses.find(shard);
    return it == options.shard_addresses.end() ? "?" : it->second;
  }
};

namespace {

std::string PackIds(absl::Span<const uint64_t> ids, const std::vector<size_t>& index) {
  std::string out(index.size() * sizeof(uint64_t), '\0');
  char* p = out.data();
  for (size_t i : index) {
    std::memcpy(p, &ids[i], sizeof(uint64_t));  // little-endian host (x86-64, aarch64)
    p += sizeof(uint64_t);
  }
  return out;
}

absl::Status WithContext(const absl::Status& s, uint32_t shard, const std::string& address) {
  absl::Status out(s.code(), absl::StrCat("ps shard ", shard, " (", address, "): ", s.message()));
  s.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace

class PsHandle::Op {
 public:
  enum class Kind { kPull, kPush };

  // One per-shard request: the positions in the caller's batch it carries.
  struct Part {
    uint32_t shard = 0;
    std::vector<size_t> index;
    uint64_t sequence = 0;  // pushes
    int retries = 0;
  };

  // One RPC of a round. Owned by the Round, which the callbacks keep alive.
  struct Rpc {
    Part part;
    grpc::ClientContext context;
    v1::PullRequest pull_request;
    v1::PullResponse pull_response;
    v1::PushRequest push_request;
    v1::PushResponse push_response;
    absl::Status status;
  };

  struct Round {
    absl::Mutex mu;
    int pending ABSL_GUARDED_BY(mu) = 0;
    std::vector<std::unique_ptr<Rpc>> rpcs;
  };

  // A call that fails before any RPC.
  explicit Op(absl::Status error) : error_(std::move(error)) {}

  Op(Kind kind, std::shared_ptr<PsClient::Impl> impl, v1::TableConfig table,
     absl::Span<const uint64_t> ids, absl::Span<float> out, absl::Span<const float> grads,
     int64_t step, bool float16)
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
    std::vector<size_t> all(ids.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    std::vector<Part> parts;
    error_ = Split(all, &parts);
    if (error_.ok() && !parts.empty()) Send(std::move(parts));
  }

  // Callbacks own the Round; they never touch the Op or caller memory.
  ~Op() = default;

  absl::Status Wait() {
    if (!error_.ok()) return error_;
    while (round_ != nullptr) {
      std::shared_ptr<Round> round = std::move(round_);
      {
        absl::MutexLock lock(&round->mu);
        // Every RPC carries deadline_, so the callbacks come by then; the slack only
        // guards against a lost callback.
        auto done = [&round]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(round->mu) { return round->pending == 0; };
        if (!round->mu.AwaitWithDeadline(absl::Condition(&done), deadline_ + absl::Seconds(1))) {
          return absl::DeadlineExceededError("ps client: shard requests did not finish");
        }
      }
      std::vector<Part> next;
      bool backoff = false;
      for (std::unique_ptr<Rpc>& rpc : round->rpcs) {
        Part& part = rpc->part;
        const absl::Status& s = rpc->status;
        if (s.ok()) {
          absl::Status consumed = Consume(*rpc);
          if (!consumed.ok()) return Fail(consumed, part.shard);
          continue;
        }
        if (s.code() == absl::StatusCode::kUnavailable) {
          if (part.retries >= impl_->options.max_retries) return Fail(s, part.shard);
          ++part.retries;
          backoff = true;
          next.push_back(std::move(part));
          continue;
        }
        std::optional<v1::WrongShard> w = GetWrongShard(s);
        if (s.code() == absl::StatusCode::kFailedPrecondition && w.has_value()) {
          if (++redirects_[w->slot()] > impl_->options.max_redirects) {
            return Fail(absl::FailedPreconditionError(absl::StrCat("too many redirects for slot ",
                                                                   w->slot(), ": ", s.message())),
                        part.shard);
          }
          impl_->ApplyRedirect(*w);
          // Nothing of the rejected request was applied: re-split its keys as new
          // requests (with new sequences).
          absl::Status split = Split(part.index, &next);
          if (!split.ok()) return split;
          continue;
        }
        return Fail(s, part.shard);
      }
      if (next.empty()) break;
      if (backoff) {
        const absl::Duration left = deadline_ - absl::Now();
        if (left <= absl::ZeroDuration()) {
          return absl::DeadlineExceededError("ps client: deadline passed while retrying");
        }
        absl::SleepFor(std::min(backoff_, left));
        backoff_ = std::min(backoff_ * 2, impl_->options.max_backoff);
      }
      Send(std::move(next));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Fail(const absl::Status& s, uint32_t shard) {
    return WithContext(s, shard, impl_->AddressOf(shard));
  }

  // Groups `index` by owner shard under the current slot map, appending to `parts`.
  absl::Status Split(const std::vector<size_t>& index, std::vector<Part>* parts) {
    std::shared_ptr<const SlotMap> map = impl_->Map();
    absl::flat_hash_map<uint32_t, size_t> by_shard;  // shard -> position in *parts
    for (size_t i : index) {
      const uint32_t slot = SlotOf(table_.seed(), ids_[i]);
      const uint32_t shard = map->OwnerOf(slot);
      if (impl_->stubs.find(shard) == impl_->stubs.end()) {
        return absl::UnavailableError(
            absl::StrCat("ps client: slot ", slot, " is owned by shard ",
                         shard == kNoShard ? std::string("<none>") : absl::StrCat(shard),
                         " which has no address"));
      }
      auto [it, inserted] = by_shard.try_emplace(shard, parts->size());
      if (inserted) {
        parts->emplace_back();
        parts->back().shard = shard;
        if (kind_ == Kind::kPush) parts->back().sequence = impl_->next_sequence.fetch_add(1);
      }
      (*parts)[it->second].index.push_back(i);
    }
    return absl::OkStatus();
  }

  // Starts one RPC per part; the next Wait round collects them.
  void Send(std::vector<Part> parts) {
    auto round = std::make_shared<Round>();
    const uint64_t epoch = impl_->Map()->epoch();
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
        r.set_encoding(encoding);
      } else {
        v1::PushRequest& r = rpc->push_request;
        r.set_table(table_.name());
        r.set_ids(PackIds(ids_, rpc->part.index));
        r.set_encoding(encoding);
        r.set_step(step_);
        r.set_worker_id(impl_->options.worker_id);
        r.set_sequence(rpc->part.sequence);
        r.set_epoch(epoch);
        const uint32_t dim = table_.dim();
        std::vector<float> g(rpc->part.index.size() * dim);
        for (size_t k = 0; k < rpc->part.index.size(); ++k) {
          std::memcpy(&g[k * dim], &grads_[rpc->part.index[k] * dim], dim * sizeof(float));
        }
        std::string* bytes = r.mutable_grads();
        if (float16_) {
          AppendFloat16Bytes(g, bytes);
        } else {
          AppendFloat32Bytes(g, bytes);
        }
      }
      round->rpcs.push_back(std::move(rpc));
    }
    {
      absl::MutexLock lock(&round->mu);
      round->pending = static_cast<int>(round->rpcs.size());
    }
    round_ = round;
    for (std::unique_ptr<Rpc>& owned : round->rpcs) {
      Rpc* rpc = owned.get();
      v1::PsService::Stub* stub = impl_->stubs.at(rpc->part.shard).get();
      auto done = [round, rpc](grpc::Status status) {
        rpc->status = FromGrpcStatus(status, &rpc->context);
        absl::MutexLock lock(&round->mu);
        --round->pending;
      };
      if (kind_ == Kind::kPull) {
        stub->async()->Pull(&rpc->context, &rpc->pull_request, &rpc->pull_response, done);
      } else {
        stub->async()->Push(&rpc->context, &rpc->push_request, &rpc->push_response, done);
      }
    }
  }

  // Takes the result of a successful RPC.
  absl::Status Consume(const Rpc& rpc) {
    if (kind_ == Kind::kPush) return absl::OkStatus();
    const uint32_t dim = table_.dim();
    const size_t n = rpc.part.index.size() * dim;
    const std::string& bytes = rpc.pull_response.values();
    if (bytes.size() != n * (float16_ ? 2 : 4)) {
      return absl::InternalError(absl::StrCat("ps client: pull returned ", bytes.size(),
                                              " bytes, expected ", n * (float16_ ? 2 : 4)));
    }
    std::vector<float> values(n);
    if (float16_) {
      DecodeFloat16Bytes(bytes, absl::MakeSpan(values));
    } else {
      DecodeFloat32Bytes(bytes, absl::MakeSpan(values));
    }
    for (size_t k = 0; k < rpc.part.index.size(); ++k) {
      std::memcpy(&out_[rpc.part.index[k] * dim], &values[k * dim], dim * sizeof(float));
    }
    return absl::OkStatus();
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
  absl::flat_hash_map<uint32_t, int> redirects_;  // slot -> redirects followed
  std::shared_ptr<Round> round_;                  // the round in flight, if any
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

absl::Status PsHandle::Wait() {
  if (done_) return status_;
  status_ = op_ == nullptr ? absl::FailedPreconditionError("empty PsHandle") : op_->Wait();
  done_ = true;
  return status_;
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(const PsClientOptions& options) {
  if (options.shard_addresses.empty()) {
    return absl::InvalidArgumentError("PsClientOptions.shard_addresses is empty");
  }
  if (options.first_sequence == 0) {
    return absl::InvalidArgumentError("PsClientOptions.first_sequence must be >= 1");
  }
  if (options.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("PsClientOptions.deadline must be positive");
  }
  auto impl = std::make_shared<Impl>();
  impl->options = options;
  impl->next_sequence.store(options.first_sequence);
  {
    absl::MutexLock lock(&impl->map_mu);
    impl->slot_map = std::make_shared<const SlotMap>(options.slot_map);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  for (const auto& [shard, address] : options.shard_addresses) {
    impl->stubs[shard] = v1::PsService::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  return std::unique_ptr<PsClient>(new PsClient(std::move(impl)));
}

PsClient::PsClient(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
PsClient::~PsClient() = default;

absl::Status PsClient::AddTable(const v1::TableConfig& config) {
  if (config.seed() == 0 || config.dim() == 0 || config.dim() > 4096 || config.name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("PsClient::AddTable: table '", config.name(),
                                                   "' is not normalized (seed ", config.seed(),
                                                   ", dim ", config.dim(), ")"));
  }
  absl::MutexLock lock(&impl_->tables_mu);
  impl_->tables[config.name()] = config;
  return absl::OkStatus();
}

absl::Status PsClient::CreateTableEverywhere(const v1::TableConfig& config) {
  v1::CreateTableRequest request;
  *request.mutable_config() = config;
  const absl::Time deadline = absl::Now() + impl_->options.deadline;
  std::string first;
  v1::TableConfig normalized;
  for (const auto& [shard, address] : impl_->options.shard_addresses) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    v1::CreateTableResponse response;
    absl::Status s =
        FromGrpcStatus(impl_->stubs.at(shard)->CreateTable(&context, request, &response), &context);
    if (!s.ok()) return WithContext(s, shard, address);
    std::string bytes;
    response.config().SerializeToString(&bytes);  // deterministic enough for equal messages
    if (first.empty()) {
      first = std::move(bytes);
      normalized = response.config();
    } else if (bytes != first) {
      return absl::InternalError(absl::StrCat("CreateTable: shard ", shard, " (", address,
                                              ") normalized table '", config.name(),
                                              "' differently"));
    }
  }
  return AddTable(normalized);
}

absl::StatusOr<v1::TableConfig> PsClient::GetTable(absl::string_view table) const {
  absl::MutexLock lock(&impl_->tables_mu);
  auto it = impl_->tables.find(table);
  if (it == impl_->tables.end()) {
    return absl::NotFoundError(absl::StrCat("PsClient: table '", table, "' not registered"));
  }
  return it->second;
}

SlotMap PsClient::slot_map() const { return *impl_->Map(); }

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

}  // namespace

PsHandle PsClient::PullAsync(absl::string_view table, absl::Span<const uint64_t> ids,
                             absl::Span<float> out, const PsCallOptions& call) {
  absl::StatusOr<v1::TableConfig> config = GetTable(table);
  if (!config.ok()) return PsHandle(std::make_unique<PsHandle::Op>(config.status()));
  if (out.size() != ids.size() * config->dim()) {
    return PsHandle(std::make_unique<PsHandle::Op>(absl::InvalidArgumentError(absl::StrCat(
        "Pull: out has ", out.size(), " floats, expected ", ids.size(), " x ", config->dim()))));
  }
  const bool f16 = UseFloat16(*config, call);
  return PsHandle(std::make_unique<PsHandle::Op>(PsHandle::Op::Kind::kPull, impl_,
                                                 *std::move(config), ids, out,
                                                 absl::Span<const float>(), 0, f16));
}

absl::Status PsClient::Pull(absl::string_view table, absl::Span<const uint64_t> ids,
                            absl::Span<float> out, const PsCallOptions& call) {
  return PullAsync(table, ids, out, call).Wait();
}

PsHandle PsClient::PushAsync(absl::string_view table, absl::Span<const uint64_t> ids,
                             absl::Span<const float> grads, int64_t step,
                             const PsCallOptions& call) {
  absl::StatusOr<v1::TableConfig> config = GetTable(table);
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
