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
// following, persists the stream positions and exits 0 (server/shared/serve.h). Bad
// flags exit 2 (common/flags.h).

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/admin_auth.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "server/serving/follower.h"
#include "server/serving/serving_service.h"
#include "server/shared/graceful_shutdown.h"
#include "server/shared/serve.h"

namespace ember {
namespace {

struct ServingMainOptions {
  FollowerOptions follower;
  // A follower's calls are short lookups: 2 s of grace, not the servers' 5.
  ServerFlags server = [] {
    ServerFlags flags;
    flags.shutdown_grace_ms = 2000;
    return flags;
  }();
  ServerSecurityFlags security;
  AdminPolicy admin;  // from security
  int64_t memory_budget_mb = FollowerOptions().memory_budget_bytes >> 20;
};

void DeclareFlags(FlagSet& flags, ServingMainOptions& o) {
  FollowerOptions& f = o.follower;
  flags.Synopsis("--coordinator=HOST:PORT --checkpoint_dir=DIR --data_dir=DIR [--flag=value ...]");
  flags.Description(
      "A read-only follower for online inference: bootstraps from the newest checkpoint of a\n"
      "training job, follows every PS shard's update stream and answers Lookup.");
  flags
      .String("coordinator", &f.coordinator, "HOST:PORT",
              "the cluster's coordinator (shards and tables)")
      .Required();
  flags.String("checkpoint_dir", &f.checkpoint_root, "DIR", "the coordinator's --checkpoint_dir")
      .Required();
  flags.String("job", &f.job, "NAME", "the training job whose checkpoints to use")
      .DefaultText("the only job directory under --checkpoint_dir");
  flags
      .String("data_dir", &f.data_dir, "DIR",
              "this follower's own RocksDB (rows and stream positions); a restart resumes "
              "from it")
      .Required();
  DeclareListenFlags(flags, &o.server);
  flags.Choice<bool>("unknown_ids", &f.unknown_as_zeros, {{"init", false}, {"zeros", true}},
                     "what an id without a stored row reads as: its deterministic init vector "
                     "(what the PS answers) or zeros");
  flags.Number("max_batch_keys", &f.max_batch_keys, "N", "most ids per Lookup").Min(1);
  flags.Number("max_predict_rows", &f.max_predict_rows, "N", "most rows per Predict").Min(1);
  flags.Number("max_staleness_steps", &f.max_staleness_steps, "N",
               "never apply rows trained more than N steps after the served dense tower's "
               "checkpoint; 0: unbounded");
  flags
      .Number("memory_budget_mb", &o.memory_budget_mb, "N",
              "memory tier budget in MiB; 0 = unlimited")
      .Range(0, int64_t{1} << 40);
  flags
      .Millis("persist_interval_ms", &f.persist_interval,
              "how often stream positions are made durable")
      .Min(1);
  flags
      .Number("progress_interval_ms", &f.progress_interval_ms, "N",
              "progress marks asked of every shard when idle")
      .Range(1, 60000);
  DeclareMetricsAndShutdownFlags(flags, &o.server);

  flags.Section("Admin credential:");
  DeclareServerSecurityFlags(
      flags,
      {.token = "require this token for PinModelVersion",
       .identities = "client-certificate common names that may pin (mutual TLS); with TLS a "
                     "token or identities are required"},
      &o.security);
}

// The checks of flags together, after parsing.
absl::Status FinishFlags(ServingMainOptions& o) {
  FinishServerFlags(&o.server);
  EMBER_ASSIGN_OR_RETURN(
      o.admin,
      CheckServerSecurityFlags(o.security, "any certificate of the CA could pin model versions"));
  o.follower.memory_budget_bytes = o.memory_budget_mb << 20;
  return absl::OkStatus();
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
  if (o.server.metrics_port >= 0) {
    rpc_metrics = std::make_unique<RpcMetrics>(*registry);
    collector = std::make_shared<FollowerCollector>(follower.get());
    EMBER_ASSIGN_OR_RETURN(metrics_server,
                           MetricsServer::Start(o.server.metrics_host, o.server.metrics_port));
    metrics_server->Register(registry);
    metrics_server->Register(collector);
  }
  ServingServiceImpl service(follower.get(), rpc_metrics.get(), o.admin);
  ServeOptions serve = ServeOptionsFrom(o.server);
  serve.credentials = tls.Server();
  serve.services = {&service};
  serve.health_service = v1::ServingService::service_full_name();
  serve.health_port = o.security.health_port;
  serve.max_receive_message_bytes = 64 << 20;
  serve.max_send_message_bytes = 256 << 20;
  serve.metrics = metrics_server.get();
  ServeHooks hooks;
  hooks.ready = [&](int port) {
    EMBER_LOG(INFO) << "following " << o.follower.coordinator << " from " << o.follower.data_dir
                    << " on " << o.server.host << ":" << port;
  };
  bool closed = false;  // positions persisted, store closed: nothing is left to save
  hooks.stopped = [&]() -> absl::Status {
    metrics_server.reset();
    EMBER_RETURN_IF_ERROR(follower->Stop());
    closed = true;
    EMBER_LOG(INFO) << "positions persisted, store closed";
    return absl::OkStatus();
  };
  const absl::Status served = ServeUntilStopped(serve, hooks);
  if (closed) ExitAfterServing("ember-serving", served);
  return served;
}

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  return ember::RunMain<ember::ServingMainOptions>(
      {"ember-serving", "serving", ember::DeclareFlags, ember::FinishFlags, ember::Run}, argc,
      argv);
}
