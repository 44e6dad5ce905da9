// Copyright 2026 The Ember Authors.
//
// End-to-end tests of ember-ps's Prometheus metrics: a real ember-ps (--metrics_port=0)
// serves pulls and pushes over gRPC; one test reads its /metrics text directly, the
// other starts a real Prometheus server (/usr/bin/prometheus, installed by
// tools/install-deps.sh; skipped when absent) that scrapes it every second, and queries
// Prometheus' HTTP API until the shard's series arrive.
//
// HTTP is spoken over a raw loopback socket (HTTP/1.0, Connection: close): no new
// dependencies.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/deadline.h"
#include "tests/support/http_get.h"
#include "tests/support/ports.h"
#include "tools/harness/process.h"

#ifndef EMBER_PS_BINARY
#error "EMBER_PS_BINARY must name the ember-ps binary"
#endif

namespace ember {
namespace {

constexpr char kPrometheusBinary[] = "/usr/bin/prometheus";
constexpr uint32_t kDim = 4;

// Percent-encodes a URL query value.
std::string UrlEncode(absl::string_view text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// The value of the first sample in a Prometheus instant-query response
// ({"status":"success","data":{"resultType":"vector","result":[{"metric":{..},
// "value":[TIME,"VALUE"]}]}}), or nullopt if the result is empty.
std::optional<double> FirstSampleValue(const std::string& json) {
  if (json.find("\"status\":\"success\"") == std::string::npos) return std::nullopt;
  const size_t value = json.find("\"value\":[");
  if (value == std::string::npos) return std::nullopt;
  const size_t open = json.find(",\"", value);
  if (open == std::string::npos) return std::nullopt;
  const size_t close = json.find('"', open + 2);
  if (close == std::string::npos) return std::nullopt;
  double v = 0;
  if (!absl::SimpleAtod(json.substr(open + 2, close - open - 2), &v)) return std::nullopt;
  return v;
}

// The value of the sample of `name` in Prometheus text `exposition` whose labels
// include every one of `labels` (each like `method="Pull"`), or nullopt.
std::optional<double> TextSampleValue(const std::string& exposition, absl::string_view name,
                                      const std::vector<std::string>& labels) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, name)) continue;
    const absl::string_view rest = line.substr(name.size());
    if (rest.empty() || (rest[0] != '{' && rest[0] != ' ')) continue;  // a longer name
    bool all = true;
    for (const std::string& label : labels) all = all && rest.find(label) != rest.npos;
    if (!all) continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    if (space != line.npos && absl::SimpleAtod(line.substr(space + 1), &v)) return v;
  }
  return std::nullopt;
}

std::string PackIds(const std::vector<uint64_t>& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
}

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tmpl = absl::StrCat(::testing::TempDir(), "/prometheus_test.XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = buf.data();
  }

  void TearDown() override {
    stub_.reset();
    if (prometheus_ != nullptr) {
      absl::StatusOr<int> code = prometheus_->Stop(absl::Seconds(30));
      EXPECT_TRUE(code.ok() && *code == 0) << "prometheus did not exit cleanly";
    }
    if (ps_ != nullptr) {
      absl::StatusOr<int> code = ps_->Stop(absl::Seconds(10));
      EXPECT_TRUE(code.ok() && *code == 0) << "ember-ps did not exit cleanly";
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Starts ember-ps with metrics on a free port. Process reports one ready line only,
  // so the gRPC port is chosen here and the test waits for the later "metrics on" line.
  void StartPs() {
    absl::Status last;
    for (int attempt = 0; attempt < 5; ++attempt) {
      absl::StatusOr<int> port = FreeLoopbackPort();
      ASSERT_TRUE(port.ok()) << port.status();
      absl::StatusOr<std::unique_ptr<Process>> p =
          Process::Start(EMBER_PS_BINARY,
                         {absl::StrCat("--data_dir=", dir_, "/db"), absl::StrCat("--port=", *port),
                          "--metrics_port=0", "--memory_budget_mb=64", "--shutdown_grace_ms=1000"},
                         "metrics on ", absl::Seconds(30));
      if (!p.ok()) {
        last = p.status();  // e.g. the port was taken in between: try another
        continue;
      }
      ps_ = std::move(*p);
      const std::string metrics_address = ps_->ready_text();  // "127.0.0.1:PORT"
      ASSERT_TRUE(
          absl::SimpleAtoi(metrics_address.substr(metrics_address.rfind(':') + 1), &metrics_port_))
          << metrics_address;
      stub_ = v1::PsService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port),
                                                         grpc::InsecureChannelCredentials()));
      return;
    }
    FAIL() << "ember-ps did not start: " << last;
  }

  // Creates table "item", pushes 3 rows and pulls them twice; one bad pull.
  void Traffic() {
    {
      grpc::ClientContext context;
      SetDeadline(&context);
      v1::CreateTableRequest request;
      request.mutable_config()->set_name("item");
      request.mutable_config()->set_dim(kDim);
      request.mutable_config()->mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
      request.mutable_config()->mutable_optimizer()->set_learning_rate(0.5f);
      v1::CreateTableResponse response;
      ASSERT_TRUE(stub_->CreateTable(&context, request, &response).ok());
    }
    const std::vector<uint64_t> ids = {3, 5, 9};
    {
      grpc::ClientContext context;
      SetDeadline(&context);
      v1::PushRequest request;
      request.set_table("item");
      request.set_ids(PackIds(ids));
      std::string grads;
      AppendFloat32Bytes(std::vector<float>(ids.size() * kDim, 1.0f), &grads);
      request.set_grads(grads);
      request.set_step(1);
      request.set_worker_id(1);
      request.set_sequence(1);
      request.set_epoch(1);
      v1::PushResponse response;
      const grpc::Status s = stub_->Push(&context, request, &response);
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
    for (int i = 0; i < 2; ++i) {
      grpc::ClientContext context;
      SetDeadline(&context);
      v1::PullRequest request;
      request.set_table("item");
      request.set_ids(PackIds(ids));
      request.set_epoch(1);
      v1::PullResponse response;
      const grpc::Status s = stub_->Pull(&context, request, &response);
      ASSERT_TRUE(s.ok()) << s.error_message();
      ASSERT_EQ(response.values().size(), ids.size() * kDim * 4);
    }
    {
      grpc::ClientContext context;
      SetDeadline(&context);
      v1::PullRequest request;
      request.set_table("nope");
      request.set_ids(PackIds(ids));
      request.set_epoch(1);
      v1::PullResponse response;
      ASSERT_EQ(stub_->Pull(&context, request, &response).error_code(), grpc::NOT_FOUND);
    }
  }

  std::string dir_;
  std::unique_ptr<Process> ps_;
  int metrics_port_ = 0;
  std::unique_ptr<v1::PsService::Stub> stub_;
  std::unique_ptr<Process> prometheus_;
};

TEST_F(PrometheusTest, MetricsEndpointServesPsMetrics) {
  StartPs();
  Traffic();
  absl::StatusOr<std::string> text = HttpGet(metrics_port_, "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  for (const char* name : {"ember_rpc_latency_seconds",
                           "ember_rpc_total",
                           "ember_rpc_received_bytes_total",
                           "ember_rpc_sent_bytes_total",
                           "ember_rows_pulled_total",
                           "ember_rows_pushed_total",
                           "ember_slot_map_epoch",
                           "ember_store_version",
                           "ember_memory_bytes",
                           "ember_memory_budget_bytes",
                           "ember_memory_rows",
                           "ember_memory_hit_ratio",
                           "ember_memory_hits_total",
                           "ember_memory_misses_total",
                           "ember_memory_not_admitted_total",
                           "ember_admitted_rows_total",
                           "ember_evicted_rows_total",
                           "ember_writeback_errors_total",
                           "ember_rejected_unadmitted_keys_total",
                           "ember_disk_bytes",
                           "ember_rocksdb_estimate_num_keys",
                           "ember_rocksdb_pending_compaction_bytes",
                           "ember_rocksdb_block_cache_usage_bytes"}) {
    EXPECT_NE(text->find(absl::StrCat("\n# TYPE ", name)), std::string::npos)
        << "no family " << name;
  }
  EXPECT_NE(text->find("\nember_rpc_latency_seconds_bucket{"), std::string::npos);
  EXPECT_EQ(TextSampleValue(*text, "ember_rpc_total", {"method=\"Pull\"", "code=\"OK\""}), 2.0);
  EXPECT_EQ(TextSampleValue(*text, "ember_rpc_total", {"method=\"Pull\"", "code=\"NOT_FOUND\""}),
            1.0);
  EXPECT_EQ(TextSampleValue(*text, "ember_rpc_total", {"method=\"Push\"", "code=\"OK\""}), 1.0);
  EXPECT_EQ(TextSampleValue(*text, "ember_rpc_latency_seconds_count", {"method=\"Pull\""}), 3.0);
  EXPECT_EQ(TextSampleValue(*text, "ember_rows_pulled_total", {"table=\"item\""}), 6.0);
  EXPECT_EQ(TextSampleValue(*text, "ember_rows_pushed_total", {"table=\"item\""}), 3.0);
  EXPECT_EQ(TextSampleValue(*text, "ember_slot_map_epoch", {}), 1.0);
  EXPECT_GT(TextSampleValue(*text, "ember_store_version", {}).value_or(0), 0.0);
  EXPECT_GT(
      TextSampleValue(*text, "ember_rpc_received_bytes_total", {"method=\"Push\""}).value_or(0),
      3.0 * kDim * 4);
  EXPECT_GE(TextSampleValue(*text, "ember_rpc_sent_bytes_total", {"method=\"Pull\""}).value_or(0),
            2 * 3.0 * kDim * 4);
  EXPECT_EQ(TextSampleValue(*text, "ember_memory_budget_bytes", {}), 64.0 * (1 << 20));
  EXPECT_EQ(TextSampleValue(*text, "ember_memory_rows", {"table=\"item\""}).value_or(-1), 3.0);
  EXPECT_EQ(TextSampleValue(*text, "ember_evicted_rows_total", {"reason=\"memory\""}), 0.0);
}

TEST_F(PrometheusTest, PrometheusScrapesPsMetrics) {
  if (access(kPrometheusBinary, X_OK) != 0) {
    GTEST_SKIP() << kPrometheusBinary
                 << " not found: install the Debian 'prometheus' package "
                    "(tools/install-deps.sh does) to run this test";
  }
  StartPs();
  Traffic();

  const std::string config_path = absl::StrCat(dir_, "/prometheus.yml");
  {
    std::ofstream config(config_path);
    config << "global:\n"
           << "  scrape_interval: 1s\n"
           << "  evaluation_interval: 1s\n"
           << "scrape_configs:\n"
           << "  - job_name: ember-ps\n"
           << "    scrape_interval: 1s\n"
           << "    scrape_timeout: 1s\n"
           << "    static_configs:\n"
           << "      - targets: ['127.0.0.1:" << metrics_port_ << "']\n";
    ASSERT_TRUE(config.good());
  }
  // Prometheus logs to stderr only; a shell prints the ready line, then execs it (same
  // PID, so Stop signals Prometheus itself).
  int web_port = 0;
  absl::Status last;
  for (int attempt = 0; attempt < 5 && prometheus_ == nullptr; ++attempt) {
    absl::StatusOr<int> port = FreeLoopbackPort();
    ASSERT_TRUE(port.ok()) << port.status();
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Start("/bin/sh",
                       {"-c", "echo started; exec \"$0\" \"$@\"", kPrometheusBinary,
                        absl::StrCat("--config.file=", config_path),
                        absl::StrCat("--storage.tsdb.path=", dir_, "/tsdb"),
                        absl::StrCat("--web.listen-address=127.0.0.1:", *port), "--log.level=warn"},
                       "started", absl::Seconds(30));
    if (!p.ok()) {
      last = p.status();
      continue;
    }
    // Wait for the API; if Prometheus exits instead (its port was taken), try another.
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    bool ready = false;
    while (absl::Now() < deadline) {
      if (HttpGet(*port, "/-/ready").ok()) {
        ready = true;
        break;
      }
      // Exited (its port was taken)? WNOWAIT: leave the reaping to Process.
      siginfo_t info{};
      if (waitid(P_PID, (*p)->pid(), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(100));  // poll interval, bounded by the deadline
    }
    if (ready) {
      prometheus_ = std::move(*p);
      web_port = *port;
    } else {
      last = absl::UnavailableError("prometheus never became ready");
      (void)(*p)->Kill();
    }
  }
  ASSERT_NE(prometheus_, nullptr) << "prometheus did not start: " << last;

  // Poll the query API until the first scrape has landed (scrapes run every second).
  const std::string query =
      absl::StrCat("/api/v1/query?query=",
                   UrlEncode("sum(ember_rpc_total{job=\"ember-ps\",method=\"Pull\",code=\"OK\"})"));
  std::optional<double> pulls;
  std::string last_body;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    absl::StatusOr<std::string> body = HttpGet(web_port, query);
    if (body.ok()) {
      last_body = *body;
      pulls = FirstSampleValue(*body);
      if (pulls.has_value()) break;
    }
    absl::SleepFor(absl::Milliseconds(200));  // poll interval, bounded by the deadline
  }
  ASSERT_TRUE(pulls.has_value()) << "no ember_rpc_total series in Prometheus; last answer: "
                                 << last_body;
  EXPECT_GE(*pulls, 1.0);
  EXPECT_EQ(*pulls, 2.0);

  // Other families arrived in the same scrape.
  absl::StatusOr<std::string> up =
      HttpGet(web_port, absl::StrCat("/api/v1/query?query=", UrlEncode("up{job=\"ember-ps\"}")));
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(FirstSampleValue(*up), 1.0) << *up;
  absl::StatusOr<std::string> rows =
      HttpGet(web_port,
              absl::StrCat("/api/v1/query?query=",
                           UrlEncode("ember_rows_pulled_total{job=\"ember-ps\",table=\"item\"}")));
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(FirstSampleValue(*rows), 6.0) << *rows;
}

}  // namespace
}  // namespace ember
