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
// --shutdown_grace_ms) and exits 0. Bad flags exit 2 with a message and the usage.

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
#include "common/flags.h"
#include "common/health.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "server/coordinator/admin_service.h"
#include "server/coordinator/coordinator_metrics.h"
#include "server/coordinator/coordinator_service.h"
#include "server/coordinator/coordinator_state.h"
#include "server/coordinator/hot_set_publisher.h"
#include "server/coordinator/job_manager.h"
#include "server/coordinator/slot_migrator.h"
#include "server/shared/graceful_shutdown.h"

namespace ember {
namespace {

constexpr char kUsage[] = R"(usage: ember-coordinator --data_dir=DIR [--flag=value ...]

  --data_dir=DIR             RocksDB directory of the coordinator. Required.
  --host=ADDR                address to bind. Default: 127.0.0.1
  --port=N                   port to bind; 0 picks a free one. Default: 0
  --expected_shards=N        shards that must register before slots are assigned.
                             Default: 1
  --heartbeat_timeout_ms=N   a shard silent this long is reported DEAD. Default: 3000
  --admin_token=TOKEN        token AdminService calls must carry (metadata
                             ember-admin-token). Default: none (admin disabled)
  --admin_token_file=FILE    read the token from FILE (surrounding whitespace dropped)
  --admin_identities=A,B     client-certificate common names with the admin role
                             (mutual TLS), e.g. ember-admin. With TLS, shards
                             register with the token or such a certificate.
  --audit_log=FILE           also append every audit entry (admin changes) to FILE
                             as a JSON line; the database stays the record.
                             Default: none
  --checkpoint_dir=DIR       root of the jobs' checkpoints, reachable by every PS
                             shard at the same path. Without it jobs take no
                             checkpoints and a failed attempt fails its job.
                             Default: none
  --keep_checkpoints=N       checkpoints kept per job (plus the delta chains they
                             need). Default: 3
  --checkpoint_full_every=N  every Nth checkpoint of a run is full, the others are
                             deltas against the previous one (1: all full). Default: 4
  --migration_retry_ms=N     a slot migration retries shards that do not answer
                             this long before it stops as FAILED. Default: 60000
  --shutdown_grace_ms=N      time calls in flight get at shutdown. Default: 5000
  --metrics_port=N           serve Prometheus metrics at /metrics on this port; 0
                             picks a free one, -1 disables. Default: -1 (disabled)
  --metrics_host=ADDR        address the metrics server binds. Default: --host

Hot keys (hotkeys.proto; soft state, recomputed from the shards' heartbeats):
  --hot_keys_per_table=N     most hot keys per table; 0 disables hot keys (no hot
                             set is published). Default: 32
  --hot_min_share=F          least share of the cluster's load (keys served/s) that
                             makes a key hot, in (0, 1]; a hot key stays hot down to
                             half of it. Default: 0.01
  --hot_publish_interval_ms=N
                             time between two hot set computations. Default: 1000
  --hot_replicas=N           replica holders per hot key besides its owner, <= 1024;
                             0: replication off (the set is still published).
                             Default: 0
  --hot_refresh_ms=N         0: owners refresh replicas synchronously with each push
                             (exact reads); N > 0: every N ms. Default: 0
  --hot_max_staleness_ms=N   periodic refresh only: holders refuse copies older
                             than this; 0: 4 x --hot_refresh_ms. Default: 0
  --hot_max_staleness_steps=N
                             periodic refresh only: holders refuse copies more than
                             N steps behind the reader's step; 0: no bound. Default: 0
  --test_crash_migration_at=POINT
                             fault tests only: SIGKILL this process when a slot
                             migration reaches POINT: copying, catching_up, fenced or
                             switched. Default: none
  --help                     this text
)";

struct CoordinatorMainOptions {
  CoordinatorOptions state;
  JobManagerOptions jobs;
  SlotMigratorOptions migration;
  std::string host = "127.0.0.1";
  uint32_t port = 0;
  ServerSecurityFlags security;
  AdminPolicy admin;  // from security
  int64_t shutdown_grace_ms = 5000;
  int32_t metrics_port = -1;  // -1: no metrics server
  std::string metrics_host;   // empty: `host`
  HotSetOptions hot_set;
};

// One --hot_* flag into *o. INVALID_ARGUMENT for an unknown one or a bad number.
absl::Status ParseHotSetFlag(const Flag& flag, HotSetOptions* o) {
  const absl::string_view name = flag.name;
  if (name == "hot_min_share") return ParseNumber(flag, &o->min_share);
  if (name == "hot_publish_interval_ms") {
    int64_t ms = 0;
    EMBER_RETURN_IF_ERROR(ParseNumber(flag, &ms));
    if (ms < 1) return absl::InvalidArgumentError("--hot_publish_interval_ms must be >= 1");
    o->publish_interval = absl::Milliseconds(ms);
    return absl::OkStatus();
  }
  uint32_t* out = name == "hot_keys_per_table"         ? &o->keys_per_table
                  : name == "hot_replicas"             ? &o->replicas
                  : name == "hot_refresh_ms"           ? &o->refresh_interval_ms
                  : name == "hot_max_staleness_ms"     ? &o->max_staleness_ms
                  : name == "hot_max_staleness_steps"  ? &o->max_staleness_steps
                                                       : nullptr;
  if (out == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
  if (absl::StartsWith(flag.value, "-")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be >= 0, not ", flag.value));
  }
  return ParseNumber(flag, out);
}

absl::StatusOr<CoordinatorMainOptions> ParseFlags(const std::vector<Flag>& flags) {
  CoordinatorMainOptions o;
  for (const Flag& flag : flags) {
    const absl::string_view name = flag.name;
    if (name == "data_dir") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.state.data_dir));
    } else if (name == "host") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.host));
    } else if (name == "port") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.port));
    } else if (name == "expected_shards") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.state.expected_shards));
    } else if (name == "heartbeat_timeout_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.state.heartbeat_timeout_ms));
    } else if (absl::Status s; ParseServerSecurityFlag(flag, &o.security, &s)) {
      EMBER_RETURN_IF_ERROR(s);
    } else if (name == "audit_log") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.state.audit_log_path));
    } else if (name == "checkpoint_dir") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.jobs.checkpoint_dir));
    } else if (name == "keep_checkpoints") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.jobs.keep_checkpoints));
    } else if (name == "checkpoint_full_every") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.jobs.full_every));
    } else if (name == "migration_retry_ms") {
      int64_t ms = 0;
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &ms));
      if (ms < 0) return absl::InvalidArgumentError("--migration_retry_ms must be >= 0");
      o.migration.retry_for = absl::Milliseconds(ms);
    } else if (name == "test_crash_migration_at") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.migration.test_crash_at));
      const std::string& at = o.migration.test_crash_at;
      if (at != "copying" && at != "catching_up" && at != "fenced" && at != "switched") {
        return absl::InvalidArgumentError(absl::StrCat(
            "--test_crash_migration_at: '", at, "' is not copying, catching_up, fenced or switched"));
      }
    } else if (name == "shutdown_grace_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.shutdown_grace_ms));
    } else if (name == "metrics_port") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.metrics_port));
    } else if (name == "metrics_host") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.metrics_host));
    } else if (absl::StartsWith(name, "hot_")) {
      EMBER_RETURN_IF_ERROR(ParseHotSetFlag(flag, &o.hot_set));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  if (o.state.data_dir.empty()) return absl::InvalidArgumentError("--data_dir is required");
  if (o.port > 65535) return absl::InvalidArgumentError("--port must be <= 65535");
  if (o.state.expected_shards == 0) {
    return absl::InvalidArgumentError("--expected_shards must be >= 1");
  }
  if (o.state.heartbeat_timeout_ms <= 0) {
    return absl::InvalidArgumentError("--heartbeat_timeout_ms must be > 0");
  }
  if (o.shutdown_grace_ms < 0) return absl::InvalidArgumentError("--shutdown_grace_ms < 0");
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return absl::InvalidArgumentError("--metrics_port must be in [-1, 65535]");
  }
  if (o.metrics_host.empty()) o.metrics_host = o.host;
  EMBER_RETURN_IF_ERROR(ValidateHotSetOptions(o.hot_set));
  if (o.jobs.keep_checkpoints < 1) return absl::InvalidArgumentError("--keep_checkpoints must be >= 1");
  if (o.jobs.full_every < 1) {
    return absl::InvalidArgumentError("--checkpoint_full_every must be >= 1");
  }
  EMBER_ASSIGN_OR_RETURN(
      o.admin,
      CheckServerSecurityFlags(
          o.security, "any certificate of the CA (a worker's) could register a shard address"));
  return o;
}

absl::Status Run(const CoordinatorMainOptions& o) {
  BlockStopSignals();  // before any thread starts

  EMBER_ASSIGN_OR_RETURN(const TlsCredentials tls, TlsCredentials::Load(o.security.tls));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorState> state, CoordinatorState::Open(o.state));
  CoordinatorServiceOptions service_options;
  service_options.admin_token = o.admin.token;  // shards with a token require it of us
  service_options.channel_credentials = tls.Channel();
  if (tls.enabled()) service_options.shard_registration = o.admin;
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
  SlotMigrator migrator(state.get(), o.migration, stubs, &topology_mu,
                        [&jobs](uint32_t target, uint64_t incarnation) {
                          jobs.AdoptShard(target, incarnation);
                        });
  admin.SetMigrator(&migrator, stubs);
  HotSetPublisher hot_set(o.hot_set);
  service.SetHotSetPublisher(&hot_set);

  // Metrics, when enabled; the server is stopped (scrapes end) before the publisher.
  std::unique_ptr<MetricsServer> metrics_server;
  std::shared_ptr<prometheus::Collectable> hot_set_metrics;
  std::shared_ptr<prometheus::Collectable> cluster_metrics;
  if (o.metrics_port >= 0) {
    EMBER_ASSIGN_OR_RETURN(metrics_server, MetricsServer::Start(o.metrics_host, o.metrics_port));
    hot_set_metrics = hot_set.MetricsCollector();
    metrics_server->Register(hot_set_metrics);
    cluster_metrics = std::make_shared<CoordinatorCollector>(state.get());
    metrics_server->Register(cluster_metrics);
  }

  ServerCallTracker calls;
  EnableHealthService();
  grpc::ServerBuilder builder;
  calls.Install(&builder);
  int port = 0;
  builder.AddListeningPort(absl::StrCat(o.host, ":", o.port), tls.Server(), &port);
  builder.RegisterService(&service);
  builder.RegisterService(&admin);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", o.host, ":", o.port));
  }
  HealthReporter health(server.get(), v1::CoordinatorService::service_full_name());
  EMBER_ASSIGN_OR_RETURN(const int health_port, health.ServeProbes(o.host, o.security.health_port));
  const SlotMap map = state->slot_map();
  // Resumes an interrupted migration once the service can answer its shards' calls.
  EMBER_RETURN_IF_ERROR(migrator.Start());
  EMBER_RETURN_IF_ERROR(hot_set.Start([&state] { return state->Shards(); }));
  health.SetReady(true);
  std::cout << "listening on " << o.host << ":" << port << std::endl;
  if (metrics_server != nullptr) {
    std::cout << "metrics on " << metrics_server->address() << std::endl;
  }
  if (health_port >= 0) std::cout << "health on " << o.host << ":" << health_port << std::endl;
  EMBER_LOG(INFO) << "serving " << o.state.data_dir << " on " << o.host << ":" << port << " (epoch "
                  << map.epoch() << ", expecting " << o.state.expected_shards << " shards, "
                  << (tls.enabled() ? "mutual TLS" : "plaintext") << ", admin "
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

  const int signal_number = WaitForStopSignal();
  EMBER_LOG(INFO) << "signal " << signal_number << ", shutting down";
  health.Shutdown();
  service.Shutdown();
  migrator.Stop();  // an unfinished migration resumes at the next start
  jobs.Stop();      // waiting JoinJobs return UNAVAILABLE
  // Calls in flight get the grace period; idle client connections do not hold it.
  ShutdownServer(server.get(), &calls, absl::Now() + absl::Milliseconds(o.shutdown_grace_ms));
  metrics_server.reset();
  hot_set.Stop();
  return absl::OkStatus();
}

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  static const std::string* const usage =
      new std::string(absl::StrCat(ember::kUsage, ember::SecurityUsage(/*server=*/true)));
  return ember::RunMain<ember::CoordinatorMainOptions>("ember-coordinator", usage->c_str(), argc,
                                                       argv, ember::ParseFlags, ember::Run);
}
