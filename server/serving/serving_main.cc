// Copyright 2026 The Ember Authors.
//
// ember-serving: a read-only follower of a PS cluster for online inference
// (server/serving/follower.h), serving ServingService (proto/ember/v1/serving.proto).
//
//   ember-serving --coordinator=127.0.0.1:7000 --checkpoint_dir=/data/ember/checkpoints
//       --data_dir=/data/ember/serving-0 --port=7100
//
// Once bootstrapped and serving, the process prints exactly one line
// "listening on HOST:PORT" to stdout (tests and scripts wait for it), then, with
// --metrics_port, "metrics on HOST:PORT"; logs go to stderr. SIGTERM or SIGINT stops
// following, persists the stream positions and exits 0. Bad flags exit 2.

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/admin_auth.h"
#include "common/flags.h"
#include "common/health.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "server/shared/graceful_shutdown.h"
#include "server/serving/follower.h"
#include "server/serving/serving_service.h"

namespace ember {
namespace {

constexpr char kUsage[] =
    R"(usage: ember-serving --coordinator=HOST:PORT --checkpoint_dir=DIR --data_dir=DIR [--flag=value ...]

A read-only follower for online inference: bootstraps from the newest checkpoint of a
training job, follows every PS shard's update stream and answers Lookup.

  --coordinator=HOST:PORT  the cluster's coordinator (shards and tables). Required.
  --checkpoint_dir=DIR     the coordinator's --checkpoint_dir. Required.
  --job=NAME               the training job whose checkpoints to use. Default: the only
                           job directory under --checkpoint_dir
  --data_dir=DIR           this follower's own RocksDB (rows and stream positions).
                           Required. A restart resumes from it.
  --host=ADDR              address to bind. Default: 127.0.0.1
  --port=N                 port to bind; 0 picks a free one. Default: 0
  --unknown_ids=init|zeros what an id without a stored row reads as: its deterministic
                           init vector (what the PS answers) or zeros. Default: init
  --max_batch_keys=N       most ids per Lookup. Default: 100000
  --max_staleness_steps=N  never apply rows trained more than N steps after the served
                           dense tower's checkpoint; 0: unbounded. Default: 0
  --memory_budget_mb=N     memory tier budget in MiB; 0 = unlimited. Default: 1024
  --persist_interval_ms=N  how often stream positions are made durable. Default: 5000
  --progress_interval_ms=N progress marks asked of every shard when idle. Default: 100
  --metrics_port=N         serve Prometheus metrics at /metrics; 0 picks a free port,
                           -1 disables. Default: -1
  --metrics_host=ADDR      address the metrics server binds. Default: --host
  --admin_token=TOKEN      require this token for PinModelVersion. Default: none
  --admin_token_file=FILE  read the token from FILE
  --admin_identities=A,B   client-certificate common names that may pin (mutual
                           TLS); with TLS a token or identities are required
  --shutdown_grace_ms=N    time calls in flight get at shutdown. Default: 2000
  --help                   this text
)";

struct ServingMainOptions {
  FollowerOptions follower;
  std::string host = "127.0.0.1";
  uint32_t port = 0;
  int metrics_port = -1;
  std::string metrics_host;
  ServerSecurityFlags security;
  AdminPolicy admin;  // from security
  int64_t memory_budget_mb = 1024;
  int64_t persist_interval_ms = 5000;
  int64_t shutdown_grace_ms = 2000;
};

absl::StatusOr<ServingMainOptions> ParseFlags(const std::vector<Flag>& flags) {
  ServingMainOptions o;
  FollowerOptions& f = o.follower;
  for (const Flag& flag : flags) {
    const absl::string_view name = flag.name;
    if (name == "coordinator") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &f.coordinator));
    } else if (name == "checkpoint_dir") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &f.checkpoint_root));
    } else if (name == "job") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &f.job));
    } else if (name == "data_dir") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &f.data_dir));
    } else if (name == "host") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.host));
    } else if (name == "port") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.port));
    } else if (name == "unknown_ids") {
      std::string mode;
      EMBER_RETURN_IF_ERROR(ParseString(flag, &mode));
      if (mode != "init" && mode != "zeros") {
        return absl::InvalidArgumentError(
            absl::StrCat("--unknown_ids: expected init or zeros, got '", mode, "'"));
      }
      f.unknown_as_zeros = mode == "zeros";
    } else if (name == "max_batch_keys") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &f.max_batch_keys));
    } else if (name == "max_staleness_steps") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &f.max_staleness_steps));
    } else if (name == "memory_budget_mb") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.memory_budget_mb));
    } else if (name == "persist_interval_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.persist_interval_ms));
    } else if (name == "progress_interval_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &f.progress_interval_ms));
    } else if (name == "metrics_port") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.metrics_port));
    } else if (name == "metrics_host") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.metrics_host));
    } else if (absl::Status s; ParseServerSecurityFlag(flag, &o.security, &s)) {
      EMBER_RETURN_IF_ERROR(s);
    } else if (name == "shutdown_grace_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.shutdown_grace_ms));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  if (f.coordinator.empty()) return absl::InvalidArgumentError("--coordinator is required");
  if (f.checkpoint_root.empty()) return absl::InvalidArgumentError("--checkpoint_dir is required");
  if (f.data_dir.empty()) return absl::InvalidArgumentError("--data_dir is required");
  if (o.port > 65535) return absl::InvalidArgumentError("--port must be <= 65535");
  if (f.max_batch_keys == 0) return absl::InvalidArgumentError("--max_batch_keys must be >= 1");
  if (o.memory_budget_mb < 0 || o.memory_budget_mb > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError("--memory_budget_mb must be in [0, 2^40]");
  }
  if (o.persist_interval_ms < 1) return absl::InvalidArgumentError("--persist_interval_ms must be >= 1");
  if (f.progress_interval_ms < 1 || f.progress_interval_ms > 60000) {
    return absl::InvalidArgumentError("--progress_interval_ms must be in [1, 60000]");
  }
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return absl::InvalidArgumentError("--metrics_port must be in [-1, 65535]");
  }
  if (o.shutdown_grace_ms < 0) return absl::InvalidArgumentError("--shutdown_grace_ms < 0");
  if (o.metrics_host.empty()) o.metrics_host = o.host;
  EMBER_ASSIGN_OR_RETURN(
      o.admin,
      CheckServerSecurityFlags(o.security, "any certificate of the CA could pin model versions"));
  f.memory_budget_bytes = o.memory_budget_mb << 20;
  f.persist_interval = absl::Milliseconds(o.persist_interval_ms);
  return o;
}

absl::Status Run(const ServingMainOptions& o) {
  BlockStopSignals();  // before any thread starts

  EMBER_ASSIGN_OR_RETURN(const TlsCredentials tls, TlsCredentials::Load(o.security.tls));
  FollowerOptions follower_options = o.follower;
  follower_options.channel_credentials = tls.Channel();
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Follower> follower, Follower::Start(follower_options));

  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<RpcMetrics> rpc_metrics;
  std::shared_ptr<FollowerCollector> collector;
  std::unique_ptr<MetricsServer> metrics_server;
  if (o.metrics_port >= 0) {
    rpc_metrics = std::make_unique<RpcMetrics>(*registry);
    collector = std::make_shared<FollowerCollector>(follower.get());
    EMBER_ASSIGN_OR_RETURN(metrics_server, MetricsServer::Start(o.metrics_host, o.metrics_port));
    metrics_server->Register(registry);
    metrics_server->Register(collector);
  }
  ServingServiceImpl service(follower.get(), rpc_metrics.get(), o.admin);
  ServerCallTracker calls;
  EnableHealthService();
  grpc::ServerBuilder builder;
  calls.Install(&builder);
  int port = 0;
  builder.AddListeningPort(absl::StrCat(o.host, ":", o.port), tls.Server(), &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", o.host, ":", o.port));
  }
  HealthReporter health(server.get(), v1::ServingService::service_full_name());
  EMBER_ASSIGN_OR_RETURN(const int health_port, health.ServeProbes(o.host, o.security.health_port));
  health.SetReady(true);
  std::cout << "listening on " << o.host << ":" << port << std::endl;
  if (metrics_server != nullptr) {
    std::cout << "metrics on " << metrics_server->address() << std::endl;
  }
  if (health_port >= 0) std::cout << "health on " << o.host << ":" << health_port << std::endl;
  EMBER_LOG(INFO) << "following " << o.follower.coordinator << " from " << o.follower.data_dir
                  << " on " << o.host << ":" << port;

  const int signal_number = WaitForStopSignal();
  EMBER_LOG(INFO) << "signal " << signal_number << ", shutting down";
  health.Shutdown();
  ShutdownServer(server.get(), &calls, absl::Now() + absl::Milliseconds(o.shutdown_grace_ms));
  metrics_server.reset();
  EMBER_RETURN_IF_ERROR(follower->Stop());
  EMBER_LOG(INFO) << "positions persisted, store closed";
  return absl::OkStatus();
}

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  static const std::string* const usage =
      new std::string(absl::StrCat(ember::kUsage, ember::SecurityUsage(/*server=*/true)));
  return ember::RunMain<ember::ServingMainOptions>("ember-serving", usage->c_str(), argc, argv,
                                                   ember::ParseFlags, ember::Run);
}
