// Copyright 2026 The Ember Authors.
//
// Collective over Gloo's TCP transport. Algorithms and why:
//   AllReduceSum: gloo::allreduce, RING (reduce-scatter, then allgather). Every chunk
//     is reduced along one fixed chain of ranks and then copied to the others, so all
//     ranks get the same bits, and the chain depends only on (world_size, count), so
//     runs repeat. (gloo::AllreduceRing, the older algorithm, is not used: every rank
//     sums the inputs in its own order, so ranks disagree in the last bits.)
//   Barrier: gloo::barrier (dissemination).
//   AllToAll: gloo::alltoall of the int64 sizes, then gloo::alltoallv of the bytes.
// Every Gloo call runs inside RunGloo, the one place where Gloo's exceptions become
// absl::Status.

#include "worker/collective/collective.h"

#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/cluster_token.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/attr.h"
#include "gloo/transport/tcp/device.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "worker/collective/coordinator_store.h"

namespace ember::worker {
namespace {

constexpr size_t kMaxJobBytes = 128;
// After a rendezvous timed out, how long to spend finding out which ranks are missing.
constexpr absl::Duration kDiagnoseBudget = absl::Seconds(2);

// Blocks SIGPIPE in the calling thread while alive. Gloo's TCP transport writes with
// writev (no MSG_NOSIGNAL), so a write to a peer that has gone would raise SIGPIPE and
// kill the process; blocked, the write fails with EPIPE, which Gloo reports as an
// IoException. On destruction a SIGPIPE raised meanwhile is consumed and the mask is
// restored. Threads started under the guard (Gloo's event loop, started with the
// device) inherit the blocked mask for good.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    was_blocked_ = sigismember(&old_, SIGPIPE) == 1;
  }
  ~ScopedSigpipeBlock() {
    if (was_blocked_) return;  // the caller's pending signals are the caller's
    sigset_t pending;
    const timespec zero = {0, 0};
    while (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      if (sigtimedwait(&pipe_, nullptr, &zero) < 0) break;
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_blocked_ = false;
};

bool LooksLikeTimeout(absl::string_view message) {
  const std::string lower = absl::AsciiStrToLower(message);
  return absl::StrContains(lower, "timeout") || absl::StrContains(lower, "timed out");
}

// The one place where Gloo's exceptions (and StoreError, which carries a status through
// Gloo) become absl::Status. Runs `body` with SIGPIPE blocked. The message starts with
// `operation`. A Gloo timeout is DEADLINE_EXCEEDED, another IO failure (peer closed the
// connection, reset) UNAVAILABLE, a failed Gloo check INTERNAL.
absl::Status RunGloo(absl::string_view operation, const std::function<void()>& body) {
  ScopedSigpipeBlock no_sigpipe;
  try {
    body();
    return absl::OkStatus();
  } catch (const StoreError& e) {
    return absl::Status(e.status().code(),
                        absl::StrCat(operation, ": rendezvous: ", e.status().message()));
  } catch (const gloo::IoException& e) {
    const absl::StatusCode code = LooksLikeTimeout(e.what()) ? absl::StatusCode::kDeadlineExceeded
                                                             : absl::StatusCode::kUnavailable;
    return absl::Status(code, absl::StrCat(operation, ": ", e.what()));
  } catch (const gloo::EnforceNotMet& e) {
    return absl::InternalError(absl::StrCat(operation, ": gloo check failed: ", e.what()));
  } catch (const gloo::Exception& e) {
    return absl::InternalError(absl::StrCat(operation, ": gloo: ", e.what()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(operation, ": out of memory"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(operation, ": ", e.what()));
  } catch (...) {
    return absl::UnknownError(absl::StrCat(operation, ": unknown exception"));
  }
}

absl::Status ValidateOptions(const CollectiveOptions& o) {
  if (o.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world_size must be >= 1, got ", o.world_size));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, ", o.world_size, "), got ", o.rank));
  }
  if (o.timeout < absl::Milliseconds(1) || o.timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout must be finite and >= 1ms, got ", absl::FormatDuration(o.timeout)));
  }
  if (o.world_size == 1) return absl::OkStatus();
  if (o.coordinator_address.empty()) {
    return absl::InvalidArgumentError("coordinator_address is required when world_size > 1");
  }
  if (o.host.empty()) return absl::InvalidArgumentError("host must not be empty");
  if (o.job.empty() || o.job.size() > kMaxJobBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("job must have 1 to ", kMaxJobBytes, " bytes, got ", o.job.size()));
  }
  for (char c : o.job) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat("job may hold only [A-Za-z0-9._-], got \"", o.job, "\""));
    }
  }
  return absl::OkStatus();
}

// The numeric form of the first address of `host` that a socket can bind on this
// machine (what Gloo's TCP device would pick). Gloo's own lookup is only ever given this
// numeric address: for a name that does not resolve, it walks an uninitialized addrinfo
// list and crashes. INVALID_ARGUMENT when the host does not resolve or binds nowhere.
absl::StatusOr<std::string> ResolveBindableAddress(const std::string& host) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rv = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rv != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host \"", host, "\" does not resolve: ", gai_strerror(rv)));
  }
  std::string numeric;
  for (addrinfo* rp = result; rp != nullptr && numeric.empty(); rp = rp->ai_next) {
    const int fd = socket(rp->ai_family, rp->ai_socktype | SOCK_CLOEXEC, rp->ai_protocol);
    if (fd < 0) continue;
    if (bind(fd, rp->ai_addr, rp->ai_addrlen) == 0) {
      char buf[NI_MAXHOST];
      if (getnameinfo(rp->ai_addr, rp->ai_addrlen, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) ==
          0) {
        numeric = buf;
      }
    }
    close(fd);
  }
  freeaddrinfo(result);
  if (numeric.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("host \"", host, "\": no address of it can be bound on this machine"));
  }
  return numeric;
}

void SumFloats(void* out, const void* a, const void* b, size_t n) {
  float* o = static_cast<float*>(out);
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

void MaxInt64(void* out, const void* a, const void* b, size_t n) {
  int64_t* o = static_cast<int64_t*>(out);
  const int64_t* x = static_cast<const int64_t*>(a);
  const int64_t* y = static_cast<const int64_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = std::max(x[i], y[i]);
}

// world_size 1: every operation is local.
class LocalCollective final : public Collective {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(absl::Span<float>) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::string>> AllToAll(const std::vector<std::string>& send) override {
    if (send.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("AllToAll: send has ", send.size(), " entries, world_size is 1"));
    }
    return send;
  }
};

class GlooCollective final : public Collective {
 public:
  GlooCollective(const CollectiveOptions& options, std::shared_ptr<gloo::transport::Device> device,
                 std::shared_ptr<gloo::rendezvous::Context> context)
      : rank_(options.rank),
        world_size_(options.world_size),
        timeout_(absl::ToChronoMilliseconds(options.timeout)),
        device_(std::move(device)),
        context_(std::move(context)) {}

  ~GlooCollective() override { TearDown(); }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  absl::Status AllReduceSum(absl::Span<float> data) override {
    EMBER_RETURN_IF_ERROR(CheckUsable("AllReduceSum"));
    if (static_cast<int64_t>(data.size()) != verified_count_) {
      EMBER_RETURN_IF_ERROR(VerifyCount(static_cast<int64_t>(data.size())));
    }
    if (data.empty()) return absl::OkStatus();
    return Run("AllReduceSum", [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setOutput(data.data(), data.size());
      opts.setReduceFunction(&SumFloats);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    });
  }

  absl::Status Barrier() override {
    EMBER_RETURN_IF_ERROR(CheckUsable("Barrier"));
    return Run("Barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

  absl::StatusOr<std::vector<std::string>> AllToAll(const std::vector<std::string>& send) override {
    if (send.size() != static_cast<size_t>(world_size_)) {
      return absl::InvalidArgumentError(absl::StrCat("AllToAll: send has ", send.size(),
                                                     " entries, world_size is ", world_size_));
    }
    EMBER_RETURN_IF_ERROR(CheckUsable("AllToAll"));
    std::vector<int64_t> send_sizes(world_size_);
    std::vector<int64_t> recv_sizes(world_size_);
    for (int j = 0; j < world_size_; ++j) send_sizes[j] = static_cast<int64_t>(send[j].size());
    EMBER_RETURN_IF_ERROR(Run("AllToAll(sizes)", [&] {
      gloo::AlltoallOptions opts(context_);
      opts.setInput(send_sizes.data(), send_sizes.size());
      opts.setOutput(recv_sizes.data(), recv_sizes.size());
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      gloo::alltoall(opts);
    }));
    for (int j = 0; j < world_size_; ++j) {
      if (recv_sizes[j] < 0 || (j == rank_ && recv_sizes[j] != send_sizes[j])) {
        return Break(absl::InternalError(
            absl::StrCat("AllToAll: rank ", j, " announced ", recv_sizes[j], " bytes")));
      }
    }
    std::vector<std::string> recv(world_size_);
    EMBER_RETURN_IF_ERROR(Run("AllToAll", [&] {
      std::string in;
      in.reserve(std::accumulate(send_sizes.begin(), send_sizes.end(), size_t{0}));
      for (const std::string& s : send) in.append(s);
      std::string out(std::accumulate(recv_sizes.begin(), recv_sizes.end(), size_t{0}), '\0');
      gloo::AlltoallvOptions opts(context_);
      opts.setInput(in.data(), send_sizes);
      opts.setOutput(out.data(), recv_sizes);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      gloo::alltoallv(opts);
      size_t offset = 0;
      for (int j = 0; j < world_size_; ++j) {
        recv[j] = out.substr(offset, recv_sizes[j]);
        offset += recv_sizes[j];
      }
    }));
    return recv;
  }

 private:
  absl::Status CheckUsable(absl::string_view operation) const {
    if (broken_.ok()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(operation, ": the collective is broken by an earlier error (",
                     broken_.ToString(), "); reconnect with a new generation"));
  }

  // Every rank runs the same sequence of operations, so the counter gives matching tags
  // and an operation never matches a message of another one.
  uint32_t NextTag() { return next_tag_++; }

  // Runs Gloo calls through RunGloo; an error breaks the collective.
  absl::Status Run(absl::string_view operation, const std::function<void()>& body) {
    absl::Status s = RunGloo(operation, body);
    if (!s.ok()) return Break(std::move(s));
    return s;
  }

  // Records `status` as the reason the collective is broken and closes the connections
  // at once, so peers fail fast instead of waiting for their timeout.
  absl::Status Break(absl::Status status) {
    broken_ = status;
    TearDown();
    return status;
  }

  void TearDown() {
    ScopedSigpipeBlock no_sigpipe;
    context_.reset();
    device_.reset();
  }

  // Checks that every rank passes `count` elements (Gloo would fail or hang on a
  // mismatch): an allreduce of (count, -count) under max gives (max, -min). Done once
  // per distinct count. INVALID_ARGUMENT, without breaking, when ranks disagree.
  absl::Status VerifyCount(int64_t count) {
    int64_t bounds[2] = {count, -count};
    EMBER_RETURN_IF_ERROR(Run("AllReduceSum(count check)", [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setOutput(bounds, 2);
      opts.setReduceFunction(&MaxInt64);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    }));
    if (bounds[0] != count || -bounds[1] != count) {
      return absl::InvalidArgumentError(
          absl::StrCat("AllReduceSum: ranks pass different element counts (min ", -bounds[1],
                       ", max ", bounds[0], "; this rank ", count, ")"));
    }
    verified_count_ = count;
    return absl::OkStatus();
  }

  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  absl::Status broken_;  // OK while usable
  uint32_t next_tag_ = 0;
  int64_t verified_count_ = -1;  // the element count every rank was seen to pass
};

// The store key under which Gloo's connectFullMesh (this version) publishes rank r's
// addresses.
std::string GlooRankKey(int r) { return absl::StrCat("rank_", r); }

// After a rendezvous timed out: the ranks whose address key is absent (probing stops
// after kDiagnoseBudget). Empty when every rank showed up or nothing could be learned,
// including when this rank's own key is absent (then Gloo names its keys differently).
std::vector<int> MissingRanks(CoordinatorStore& store, int rank, int world_size) {
  std::vector<int> missing;
  const absl::Time end = absl::Now() + kDiagnoseBudget;
  for (int r = 0; r < world_size; ++r) {
    if (absl::Now() >= end) return {};
    absl::StatusOr<bool> present = store.Contains(GlooRankKey(r), end);
    if (!present.ok() || (r == rank && !*present)) return {};
    if (!*present) missing.push_back(r);
  }
  return missing;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> Collective::Connect(const CollectiveOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateOptions(options));
  if (options.world_size == 1) return std::make_unique<LocalCollective>();

  const absl::Time deadline = absl::Now() + options.timeout;
  EMBER_ASSIGN_OR_RETURN(const std::string host, ResolveBindableAddress(options.host));
  std::shared_ptr<gloo::transport::Device> device;
  EMBER_RETURN_IF_ERROR(RunGloo("Connect", [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    device = gloo::transport::tcp::CreateDevice(attr);
  }));

  // Rank r's Gloo addresses live under "rdzv/<job>/<generation>/gloo/rank_<r>".
  CoordinatorStore store(CreateClusterChannel(options.coordinator_address,
                                              options.channel_credentials, options.cluster_token),
                         options.coordinator_address,
                         absl::StrCat("rdzv/", options.job, "/", options.generation, "/gloo/"),
                         deadline);
  auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
  absl::Status s = RunGloo("Connect", [&] {
    context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
    context->connectFullMesh(store, device);
  });
  if (!s.ok()) {
    {
      ScopedSigpipeBlock no_sigpipe;
      context.reset();
      device.reset();
    }
    if (s.code() == absl::StatusCode::kDeadlineExceeded) {
      const std::vector<int> missing = MissingRanks(store, options.rank, options.world_size);
      if (!missing.empty()) {
        s = absl::DeadlineExceededError(absl::StrCat(
            "Connect: ranks [", absl::StrJoin(missing, ", "), "] of ", options.world_size,
            " did not join job ", options.job, " generation ", options.generation, " within ",
            absl::FormatDuration(options.timeout), " (", s.message(), ")"));
      }
    }
    return s;
  }
  return std::make_unique<GlooCollective>(options, std::move(device), std::move(context));
}

}  // namespace ember::worker
