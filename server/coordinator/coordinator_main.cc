// Copyright 2026 The Ember Authors.
//
// ember-coordinator: cluster metadata (tables, shards, slot map, hot set) and worker
// rendezvous, serving CoordinatorService and AdminService on one port.
//
//   ember-coordinator --data_dir=/data/ember/coordinator --port=6000 --expected_shards=2
//       --admin_token_file=/etc/ember/admin_token
//
// With --port=0 the kernel picks a free port. Once serving, the process prints exactly
// one line "listening on HOST:PORT" to stdout (then, with --metrics_port, one line
// "metrics on HOST:PORT"); logs go to stderr. SIGTERM or SIGINT
// shuts down gracefully (waiting KvGets fail with UNAVAILABLE, calls in flight get
// --shutdown_grace_ms; server/shared/serve.h) and exits 0. Bad flags exit 2 with a
// message (common/flags.h).

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/admin_auth.h"
#include "common/cluster_token.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "server/coordinator/admin_service.h"
#include "server/coordinator/coordinator_metrics.h"
#include "server/coordinator/coordinator_service.h"
#include "server/coordinator/coordinator_state.h"
#include "server/coordinator/hot_set_publisher.h"
#include "server/coordinator/job_manager.h"
#include "server/coordinator/shard_policy.h"
#include "server/coordinator/slot_migrator.h"
#include "server/shared/graceful_shutdown.h"
#include "server/shared/serve.h"

namespace ember {
namespace {

struct CoordinatorMainOptions {
  CoordinatorOptions state;
  JobManagerOptions jobs;
  SlotMigratorOptions migration;
  int64_t migration_background_floor_kbps = 1024;  // into migration (FinishFlags)
  ServerFlags server;
  ServerSecurityFlags security;
  AdminPolicy admin;  // from security
  ClusterTokenFlags cluster_token_flags;
  std::string cluster_token;  // from cluster_token_flags
  HotSetOptions hot_set;
  ShardPolicyOptions policy;
};

void DeclareFlags(FlagSet& flags, CoordinatorMainOptions& o) {
  flags.Synopsis("--data_dir=DIR [--flag=value ...]");
  flags.Description(
      "Cluster metadata (tables, shards, slot map, hot set) and worker rendezvous, serving\n"
      "CoordinatorService and AdminService on one port.");
  flags.String("data_dir", &o.state.data_dir, "DIR", "RocksDB directory of the coordinator")
      .Required();
  DeclareListenFlags(flags, &o.server);
  flags
      .Number("expected_shards", &o.state.expected_shards, "N",
              "shards that must register before slots are assigned")
      .Min(1);
  flags
      .Number("heartbeat_timeout_ms", &o.state.heartbeat_timeout_ms, "N",
              "a shard silent this long is reported DEAD")
      .Above(0);
  flags.String("audit_log", &o.state.audit_log_path, "FILE",
               "also append every audit entry (admin changes) to FILE as a JSON line; the "
               "database stays the record");
  flags.String("checkpoint_dir", &o.jobs.checkpoint_dir, "DIR",
               "root of the jobs' checkpoints, reachable by every PS shard at the same path. "
               "Without it jobs take no checkpoints and a failed attempt fails its job");
  flags
      .Number("keep_checkpoints", &o.jobs.keep_checkpoints, "N",
              "checkpoints kept per job (plus the delta chains they need)")
      .Min(1);
  flags
      .Number("checkpoint_full_every", &o.jobs.full_every, "N",
              "every Nth checkpoint of a run is full, the others are deltas against the "
              "previous one (1: all full)")
      .Min(1);
  flags
      .Millis("elastic_settle_ms", &o.jobs.elastic_settle,
              "elastic runs: an attempt's world forms once min workers wait and no other "
              "arrived for this long (or max wait, or every member of the last attempt is back)")
      .Above(0);
  flags
      .Millis("migration_retry_ms", &o.migration.retry_for,
              "a slot migration retries shards that do not answer this long before it stops "
              "as FAILED")
      .Min(0);
  flags
      .Number("migration_background_floor_kbps", &o.migration_background_floor_kbps, "N",
              "a slot migration's snapshot pages are served at the shards' background "
              "priority (ember-ps --migration_copy_priority) while the move's copy averages at "
              "least N KiB/s; below it, at normal priority until it is back above. 0: always "
              "background")
      .Range(0, int64_t{1} << 30);
  flags.Bool("auto_rebalance", &o.policy.auto_rebalance,
             "when a shard registers that owns no slots (a shard added while jobs run), move "
             "about its share of slots to it, balanced by slot count, one migration at a time. "
             "Shards that leave (LeaveCluster, ember-ps --drain_on_sigterm) are drained "
             "either way");
  flags
      .Millis("policy_retry_ms", &o.policy.retry,
              "after a join or drain migration the coordinator could not start or that "
              "FAILED, wait this long before trying again")
      .Above(0);
  DeclareMetricsAndShutdownFlags(flags, &o.server);

  flags.Section("Hot keys (hotkeys.proto; soft state, recomputed from the shards' heartbeats):");
  HotSetOptions& h = o.hot_set;
  flags
      .Number("hot_keys_per_table", &h.keys_per_table, "N",
              "most hot keys per table; 0 disables hot keys (no hot set is published)")
      .Max(1000000);
  flags
      .Number("hot_min_share", &h.min_share, "F",
              "least share of the cluster's load (keys served/s) that makes a key hot; a hot "
              "key stays hot down to half of it")
      .RangeAbove(0, 1);
  flags
      .Millis("hot_publish_interval_ms", &h.publish_interval,
              "time between two hot set computations")
      .Min(1);
  flags
      .Number("hot_replicas", &h.replicas, "N",
              "replica holders per hot key besides its owner; 0: replication off (the set is "
              "still published)")
      .Max(1024);
  flags.Number("hot_refresh_ms", &h.refresh_interval_ms, "N",
               "0: owners refresh replicas synchronously with each push (exact reads); N > 0: "
               "every N ms");
  flags.Number("hot_max_staleness_ms", &h.max_staleness_ms, "N",
               "periodic refresh only: holders refuse copies older than this; 0: 4 x "
               "--hot_refresh_ms");
  flags.Number("hot_max_staleness_steps", &h.max_staleness_steps, "N",
               "periodic refresh only: holders refuse copies more than N steps behind the "
               "reader's step; 0: no bound");

  flags.Section("Admin credential:");
  DeclareServerSecurityFlags(
      flags,
      {.token = "token AdminService calls must carry (metadata ember-admin-token); without it "
                "and --admin_identities, admin is disabled",
       .identities = "client-certificate common names with the admin role (mutual TLS), e.g. "
                     "ember-admin. With TLS, shards register with the token or such a "
                     "certificate"},
      &o.security);
  DeclareClusterTokenFlags(
      flags,
      "plaintext clusters: RegisterShard, Heartbeat, LeaveCluster, CreateTable and KvPut "
      "must carry this token (metadata ember-cluster-token) or the admin token; without it "
      "and without TLS anyone who reaches the port can change the cluster's shape",
      &o.cluster_token_flags);

  flags.Section("Fault tests only:");
  flags.Choice<std::string>("test_crash_migration_at", &o.migration.test_crash_at,
                            {{"copying", "copying"},
                             {"catching_up", "catching_up"},
                             {"fenced", "fenced"},
                             {"switched", "switched"}},
                            "SIGKILL this process when a slot migration reaches this point");
}

// The checks of flags together, after parsing.
absl::Status FinishFlags(CoordinatorMainOptions& o) {
  FinishServerFlags(&o.server);
  o.migration.background_floor_bytes_per_sec =
      static_cast<uint64_t>(o.migration_background_floor_kbps) << 10;
  EMBER_RETURN_IF_ERROR(ValidateHotSetOptions(o.hot_set));
  EMBER_ASSIGN_OR_RETURN(
      o.admin,
      CheckServerSecurityFlags(
          o.security, "any certificate of the CA (a worker's) could register a shard address"));
  EMBER_ASSIGN_OR_RETURN(o.cluster_token,
                         LoadClusterToken(o.cluster_token_flags, o.security.tls.enabled()));
  return absl::OkStatus();
}

absl::Status Run(const CoordinatorMainOptions& o) {
  BlockStopSignals();  // before any thread starts

  EMBER_ASSIGN_OR_RETURN(const TlsCredentials tls, TlsCredentials::Load(o.security.tls));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorState> state, CoordinatorState::Open(o.state));
  CoordinatorServiceOptions service_options;
  service_options.admin_token = o.admin.token;  // shards with a token require it of us
  service_options.channel_credentials = tls.Channel();
  if (tls.enabled()) service_options.shard_registration = o.admin;
  service_options.cluster_token = o.cluster_token;
  service_options.admin = o.admin;
  if (!tls.enabled() && o.cluster_token.empty()) {
    EMBER_LOG(WARNING) << "no --cluster_token_file and no TLS: the cluster's shape is open; "
                          "anyone who reaches this port can register or re-register a shard, "
                          "create tables and write rendezvous keys (docs/SECURITY.md)";
  }
  CoordinatorServiceImpl service(state.get(), service_options);
  AdminServiceImpl admin(state.get(), o.admin);
  auto stubs = [&service](const std::string& address) { return service.StubFor(address); };
  // Checkpoints and restores on one side, migration switches on the other.
  absl::Mutex topology_mu;
  JobManagerOptions job_options = o.jobs;
  job_options.topology_mu = &topology_mu;
  JobManager jobs(state.get(), job_options, stubs);
  EMBER_RETURN_IF_ERROR(jobs.Start());
  service.SetJobManager(&jobs);
  admin.SetJobManager(&jobs);
  SlotMigrator migrator(
      state.get(), o.migration, stubs, &topology_mu,
      [&jobs](uint32_t target, uint64_t incarnation) { jobs.AdoptShard(target, incarnation); });
  admin.SetMigrator(&migrator, stubs);
  ShardPolicy policy(state.get(), &migrator, o.policy);
  service.SetShardPolicy(&policy);
  HotSetPublisher hot_set(o.hot_set);
  service.SetHotSetPublisher(&hot_set);

  // Metrics, when enabled; the server is stopped (scrapes end) before the publisher.
  std::unique_ptr<MetricsServer> metrics_server;
  std::shared_ptr<prometheus::Collectable> hot_set_metrics;
  std::shared_ptr<prometheus::Collectable> cluster_metrics;
  std::shared_ptr<prometheus::Collectable> job_metrics;
  std::shared_ptr<prometheus::Collectable> policy_metrics;
  if (o.server.metrics_port >= 0) {
    EMBER_ASSIGN_OR_RETURN(metrics_server,
                           MetricsServer::Start(o.server.metrics_host, o.server.metrics_port));
    hot_set_metrics = hot_set.MetricsCollector();
    metrics_server->Register(hot_set_metrics);
    cluster_metrics = std::make_shared<CoordinatorCollector>(state.get());
    metrics_server->Register(cluster_metrics);
    job_metrics = std::make_shared<JobCollector>(&jobs);
    metrics_server->Register(job_metrics);
    policy_metrics = policy.MetricsCollector();
    metrics_server->Register(policy_metrics);
  }

  ServeOptions serve = ServeOptionsFrom(o.server);
  serve.credentials = tls.Server();
  serve.services = {&service, &admin};
  serve.health_service = v1::CoordinatorService::service_full_name();
  serve.health_port = o.security.health_port;
  serve.metrics = metrics_server.get();
  // A worker's checkpointed state carries its dense model and optimizer state (3 floats a
  // parameter with Adam): gRPC's default 4 MiB held only ~330k dense parameters. The
  // worker's job client allows 256 MiB (worker/job/job_client.cc); so does this.
  serve.max_receive_message_bytes = 256 << 20;
  serve.max_send_message_bytes = 256 << 20;
  ServeHooks hooks;
  SlotMap map;
  hooks.started = [&](int) -> absl::Status {
    map = state->slot_map();
    // Resumes an interrupted migration once the service can answer its shards' calls.
    EMBER_RETURN_IF_ERROR(migrator.Start());
    policy.Start();  // after the migrator: it starts operations there
    return hot_set.Start([&state] { return state->Shards(); });
  };
  hooks.ready = [&](int port) {
    EMBER_LOG(INFO) << "serving " << o.state.data_dir << " on " << o.server.host << ":" << port
                    << " (epoch " << map.epoch() << ", expecting " << o.state.expected_shards
                    << " shards, " << (tls.enabled() ? "mutual TLS" : "plaintext") << ", admin "
                    << (!o.admin.enabled()
                            ? std::string("disabled")
                            : absl::StrCat(o.admin.token.empty() ? "" : TokenId(o.admin.token),
                                           o.admin.identities.empty() ? "" : " identities ",
                                           absl::StrJoin(o.admin.identities, ",")))
                    << ", "
                    << (o.hot_set.keys_per_table == 0
                            ? std::string("hot keys disabled")
                            : absl::StrCat("hot keys: <= ", o.hot_set.keys_per_table,
                                           " per table at share >= ", o.hot_set.min_share,
                                           ", replicas ", o.hot_set.replicas))
                    << ")";
  };
  hooks.stopping = [&] {
    service.Shutdown();
    policy.Stop();    // starts no more operations
    migrator.Stop();  // an unfinished migration resumes at the next start
    jobs.Stop();      // waiting JoinJobs return UNAVAILABLE
  };
  hooks.stopped = [&] {
    metrics_server.reset();
    hot_set.Stop();
    return absl::OkStatus();
  };
  return ServeUntilStopped(serve, hooks);
}

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  return ember::RunMain<ember::CoordinatorMainOptions>(
      {"ember-coordinator", "coordinator", ember::DeclareFlags, ember::FinishFlags, ember::Run},
      argc, argv);
}
