// Copyright 2026 The Ember Authors.
//
// `ember-bench tls`: what mutual TLS costs the data plane. Two ember-ps processes on
// this machine, one plaintext and one with --tls_* (certificates made by
// tools/gen-certs.sh in a scratch directory), the same table (dim 64, SGD) and the same
// 1M populated rows, measured in one Google Benchmark group with repetitions
// interleaved, from one PsClient each (one channel, one thread):
//  * plain_pull(8), tls_pull(8): PullAsync of 1000 uniform ids, 1 and 8 in flight.
//  * plain_push8, tls_push8: PushAsync of 1000 SGD gradients, 8 in flight.
//  * plain_connect, tls_connect: a new channel and its first GetShardInfo call
//    (TCP + HTTP/2, plus the TLS handshake with certificate checks on both sides).
// Figures are ratios TLS / plaintext from the same run (docs/PERFORMANCE.md, "TLS").

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/ps_client.h"
#include "common/slot_map.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "tools/bench/bench_runner.h"
#include "tools/bench/cluster_fixtures.h"
#include "tools/bench/figures.h"
#include "tools/bench/storage_fixtures.h"
#include "tools/bench/suite.h"
#include "tools/harness/process.h"

namespace ember::bench::tls {
namespace {

using cluster::ExecutableDir;
using cluster::InFlightRing;
using cluster::Pipeline;
using cluster::PopulateRows;
using cluster::PsPullPipeline;
using cluster::PsPushPipeline;
using cluster::SingleShardClient;

constexpr size_t kDim = 64;
constexpr size_t kBatch = 1000;
constexpr size_t kInFlight = 8;
constexpr size_t kPoolKeys = size_t{1} << 22;
constexpr char kTable[] = "bench";
constexpr char kToken[] = "bench-admin-token";
constexpr absl::Duration kStartTimeout = absl::Seconds(30);

void Say(std::string_view message) { Log("tls", message); }

v1::TableConfig BenchTable() {
  v1::TableConfig config;
  config.set_name(kTable);
  config.set_dim(kDim);
  config.set_seed(0x7157);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
  config.mutable_optimizer()->set_learning_rate(0.01f);
  return config;
}

// A new channel per Start, and its first call (the connection is made lazily by it).
class ConnectPipeline : public Pipeline {
 public:
  ConnectPipeline(std::string address, std::shared_ptr<grpc::ChannelCredentials> credentials)
      : address_(std::move(address)), credentials_(std::move(credentials)) {}
  absl::Status Start(size_t) override {
    // A channel argument unique to this channel keeps gRPC from sharing a subchannel
    // (and its connection) with an earlier one.
    grpc::ChannelArguments args;
    args.SetInt("ember.bench.channel", static_cast<int>(++channels_));
    auto stub = v1::PsService::NewStub(grpc::CreateCustomChannel(address_, credentials_, args));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::GetShardInfoResponse info;
    return FromGrpcStatus(stub->GetShardInfo(&context, v1::GetShardInfoRequest(), &info), &context);
  }
  absl::Status Finish(size_t) override { return absl::OkStatus(); }

 private:
  const std::string address_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  uint64_t channels_ = 0;
};

absl::StatusOr<Figures> RunTlsSuite(const BenchOptions& options) {
  const int64_t rows = options.rows_small;
  Figures figures;
  figures.AddString("suite", "tls");
  figures.AddInt("rows", rows);
  figures.AddInt("dim", kDim);
  figures.AddInt("batch_keys", kBatch);
  figures.AddInt("in_flight", kInFlight);
  figures.AddString("tls", "mutual TLS (gRPC over Debian OpenSSL 3), P-256 ECDSA certificates");
  figures.AddNumber("min_time_s", options.min_time_s);
  figures.AddInt("repetitions", options.repetitions);
  figures.AddInt("hardware_threads", std::thread::hardware_concurrency());

  const std::string bin_dir = ExecutableDir();
  if (bin_dir.empty()) return absl::InternalError("cannot read /proc/self/exe");
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<BenchDir> dir, BenchDir::Open(""));
  const std::string certs = dir->path() + "/certs";
  RunResult made = RunBinary(std::string(EMBER_SOURCE_DIR) + "/tools/gen-certs.sh", certs);
  if (made.exit_code != 0) {
    return absl::InternalError(absl::StrCat("tools/gen-certs.sh failed: ", made.output));
  }
  const TlsOptions server_files{certs + "/ca.pem", certs + "/server.pem", certs + "/server.key"};
  const TlsOptions client_files{certs + "/ca.pem", certs + "/client.pem", certs + "/client.key"};
  EMBER_ASSIGN_OR_RETURN(const TlsCredentials client_tls, TlsCredentials::Load(client_files));

  const std::vector<std::string> common = {
      "--port=0", "--wal=false", absl::StrCat("--memory_budget_mb=", (rows * 1024 >> 20) + 256)};
  std::vector<std::string> plain_args = common;
  plain_args.push_back(absl::StrCat("--data_dir=", dir->path(), "/plain"));
  std::vector<std::string> tls_args = common;
  for (const std::string& flag : {absl::StrCat("--data_dir=", dir->path(), "/tls"),
                                  absl::StrCat("--tls_ca=", server_files.ca_file),
                                  absl::StrCat("--tls_cert=", server_files.cert_file),
                                  absl::StrCat("--tls_key=", server_files.key_file),
                                  absl::StrCat("--admin_token=", kToken)}) {
    tls_args.push_back(flag);
  }
  EMBER_ASSIGN_OR_RETURN(
      std::unique_ptr<Process> plain_ps,
      Process::Start(bin_dir + "/ember-ps", plain_args, "listening on ", kStartTimeout));
  EMBER_ASSIGN_OR_RETURN(
      std::unique_ptr<Process> tls_ps,
      Process::Start(bin_dir + "/ember-ps", tls_args, "listening on ", kStartTimeout));
  Say(absl::StrFormat("plaintext ember-ps at %s, mutual-TLS ember-ps at %s", plain_ps->ready_text(),
                      tls_ps->ready_text()));

  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> plain,
                         SingleShardClient(plain_ps->ready_text()));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> secure,
                         SingleShardClient(tls_ps->ready_text(), client_tls.Channel()));
  const std::vector<float> grads = RandomGradients(kBatch * kDim, options.seed + 2);
  for (PsClient* client : {plain.get(), secure.get()}) {
    EMBER_RETURN_IF_ERROR(client->CreateTableEverywhere(BenchTable()));
    EMBER_RETURN_IF_ERROR(PopulateRows(*client, kTable, rows, kBatch, grads));
  }
  Say(absl::StrFormat("populated %d rows on each", rows));

  const std::vector<uint64_t> pool = UniformRows(rows, kPoolKeys, options.seed);
  PsPullPipeline plain_pull(plain.get(), kTable, kDim, &pool, kBatch, 1);
  PsPullPipeline plain_pull8(plain.get(), kTable, kDim, &pool, kBatch, kInFlight);
  PsPushPipeline plain_push8(plain.get(), kTable, &pool, kBatch, grads, kInFlight);
  PsPullPipeline tls_pull(secure.get(), kTable, kDim, &pool, kBatch, 1);
  PsPullPipeline tls_pull8(secure.get(), kTable, kDim, &pool, kBatch, kInFlight);
  PsPushPipeline tls_push8(secure.get(), kTable, &pool, kBatch, grads, kInFlight);
  ConnectPipeline plain_connect(plain_ps->ready_text(), grpc::InsecureChannelCredentials());
  ConnectPipeline tls_connect(tls_ps->ready_text(), client_tls.Channel());

  struct Ring {
    std::string figure;
    size_t keys;  // per step
    InFlightRing ring;
  };
  std::vector<std::unique_ptr<Ring>> rings;
  auto add = [&rings](std::string figure, size_t keys, Pipeline* p, size_t depth) {
    rings.push_back(std::make_unique<Ring>(Ring{std::move(figure), keys, InFlightRing(p, depth)}));
  };
  add("plain_pull", kBatch, &plain_pull, 1);
  add("tls_pull", kBatch, &tls_pull, 1);
  add("plain_pull8", kBatch, &plain_pull8, kInFlight);
  add("tls_pull8", kBatch, &tls_pull8, kInFlight);
  add("plain_push8", kBatch, &plain_push8, kInFlight);
  add("tls_push8", kBatch, &tls_push8, kInFlight);
  add("plain_connect", 1, &plain_connect, 1);
  add("tls_connect", 1, &tls_connect, 1);

  std::vector<BenchCase> cases;
  for (const auto& r : rings) {
    InFlightRing* ring = &r->ring;
    cases.push_back({r->figure, static_cast<int64_t>(r->keys), [ring] { return ring->Step(); }});
  }
  Say(absl::StrFormat("measuring %d cases x %d repetitions", cases.size(), options.repetitions));
  absl::StatusOr<absl::flat_hash_map<std::string, Measurement>> results =
      RunCases(cases, RunConfig{options.min_time_s, options.warmup_s, options.repetitions});
  absl::Status drained;
  for (const auto& r : rings) drained.Update(r->ring.Drain());
  if (!results.ok()) return results.status();
  EMBER_RETURN_IF_ERROR(drained);
  for (const std::string op : {"pull", "pull8", "push8"}) {
    const double p = (*results)["plain_" + op].keys_per_sec;
    const double t = (*results)["tls_" + op].keys_per_sec;
    figures.AddNumber("plain_" + op + "_keys_per_sec", p);
    figures.AddNumber("tls_" + op + "_keys_per_sec", t);
    figures.AddNumber("tls_vs_plain_" + op, p > 0 ? t / p : NAN);
  }
  // One "key" per connect step: keys_per_sec is connections per second.
  const double plain_connects = (*results)["plain_connect"].keys_per_sec;
  const double tls_connects = (*results)["tls_connect"].keys_per_sec;
  figures.AddNumber("plain_connect_ms", plain_connects > 0 ? 1000.0 / plain_connects : NAN);
  figures.AddNumber("tls_connect_ms", tls_connects > 0 ? 1000.0 / tls_connects : NAN);

  rings.clear();
  plain.reset();
  secure.reset();
  EMBER_RETURN_IF_ERROR(plain_ps->Kill().status());
  EMBER_RETURN_IF_ERROR(tls_ps->Kill().status());
  return figures;
}

}  // namespace

EMBER_BENCH_SUITE(tls,
                  "ember-ps pull/push and connection setup with mutual TLS vs plaintext "
                  "(starts two ember-ps)",
                  RunTlsSuite);

}  // namespace ember::bench::tls
