// Copyright 2026 The Ember Authors.

#include "tests/tools/emberctl_fixture.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tests/support/deadline.h"

#ifndef EMBER_PS_BINARY
#error "EMBER_PS_BINARY must name the ember-ps binary"
#endif
#ifndef EMBER_COORDINATOR_BINARY
#error "EMBER_COORDINATOR_BINARY must name the ember-coordinator binary"
#endif
#ifndef EMBER_CTL_BINARY
#error "EMBER_CTL_BINARY must name the emberctl binary"
#endif

extern char** environ;

namespace ember {
namespace {

constexpr absl::Duration kCtlBound = absl::Seconds(120);  // one emberctl run

v1::TableConfig ItemTable() {
  v1::TableConfig config;
  config.set_name("item");
  config.set_dim(4);
  config.set_seed(42);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
  config.mutable_optimizer()->set_learning_rate(0.5f);
  return config;
}

// ---- A strict JSON well-formedness check (no JSON library is installed) ----

class JsonChecker {
 public:
  explicit JsonChecker(absl::string_view text) : s_(text) {}
  // True if the text is exactly one JSON object (and a trailing newline).
  bool OneObject() {
    Ws();
    if (Peek() != '{' || !Value()) return false;
    Ws();
    return i_ == s_.size();
  }

 private:
  char Peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t')) ++i_;
  }
  bool Lit(absl::string_view lit) {
    if (s_.substr(i_, lit.size()) != lit) return false;
    i_ += lit.size();
    return true;
  }
  bool String() {
    if (!Lit("\"")) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (static_cast<unsigned char>(s_[i_]) < 0x20) return false;
      if (s_[i_] == '\\') ++i_;
      ++i_;
    }
    return Lit("\"");
  }
  bool Number() {
    const size_t start = i_;
    if (Peek() == '-') ++i_;
    if (!isdigit(Peek())) return false;
    while (isdigit(Peek())) ++i_;
    if (Peek() == '.') {
      ++i_;
      if (!isdigit(Peek())) return false;
      while (isdigit(Peek())) ++i_;
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++i_;
      if (Peek() == '+' || Peek() == '-') ++i_;
      if (!isdigit(Peek())) return false;
      while (isdigit(Peek())) ++i_;
    }
    return i_ > start;
  }
  bool Value() {
    Ws();
    switch (Peek()) {
      case '{': {
        ++i_;
        Ws();
        if (Lit("}")) return true;
        do {
          Ws();
          if (!String()) return false;
          Ws();
          if (!Lit(":") || !Value()) return false;
          Ws();
        } while (Lit(","));
        return Lit("}");
      }
      case '[': {
        ++i_;
        Ws();
        if (Lit("]")) return true;
        do {
          if (!Value()) return false;
          Ws();
        } while (Lit(","));
        return Lit("]");
      }
      case '"':
        return String();
      case 't':
        return Lit("true");
      case 'f':
        return Lit("false");
      case 'n':
        return Lit("null");
      default:
        return Number();
    }
  }

  absl::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::ostream& operator<<(std::ostream& os, const CtlResult& r) {
  return os << "exit " << r.exit_code << "\n--- stdout\n" << r.out << "--- stderr\n" << r.err;
}

CtlResult RunCtl(const std::vector<std::string>& args, const std::vector<std::string>& env,
                 const StderrWatch& watch) {
  CtlResult result;
  std::vector<std::string> argv_storage = {EMBER_CTL_BINARY};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "EMBER_")) env_storage.push_back(*e);
  }
  env_storage.insert(env_storage.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return result;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  const absl::Time start = absl::Now();
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (spawned != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  bool killed = false;
  while (open_fds > 0) {
    const int64_t left = absl::ToInt64Milliseconds(start + kCtlBound - absl::Now());
    if (left <= 0) {
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
    if (poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1000))) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, n);
        if (i == 1 && watch) watch(pid, result.err);
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.elapsed = absl::Now() - start;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (killed) result.err += "\n[killed after the test's bound]\n";
  return result;
}

bool IsJsonObject(const std::string& text) { return JsonChecker(text).OneObject(); }

std::vector<std::string> RowOf(const std::string& text, const std::string& first) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!cells.empty() && cells[0] == first) return cells;
  }
  return {};
}

void EmberctlTest::SetUp() {
  const std::string tmpl = absl::StrCat(::testing::TempDir(), "/emberctl_test.XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  ASSERT_NE(mkdtemp(buf.data()), nullptr);
  dir_ = buf.data();
  LocalClusterOptions cluster_options;
  cluster_options.dir = dir_;
  cluster_options.shards = kCtlShards;
  cluster_options.coordinator_flags = {"--heartbeat_timeout_ms=2000",
                                       absl::StrCat("--admin_token=", kCtlToken)};
  cluster_options.shard_flags = {"--heartbeat_ms=100", "--memory_budget_mb=64"};
  cluster_ = std::make_unique<LocalCluster>(std::move(cluster_options));
  const absl::Status started = cluster_->Start();
  ASSERT_TRUE(started.ok()) << started;
  address_ = cluster_->coordinator_address();
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  coordinator_stub_ = v1::CoordinatorService::NewStub(channel);
  admin_stub_ = v1::AdminService::NewStub(channel);
  for (int i = 0; i < kCtlShards; ++i) {
    ps_address_[i] = cluster_->shard_address(i);
    ps_stub_[i] = v1::PsService::NewStub(
        grpc::CreateChannel(ps_address_[i], grpc::InsecureChannelCredentials()));
  }
  const absl::Status assigned = cluster_->WaitForSlots();
  ASSERT_TRUE(assigned.ok()) << assigned;

  PsClientOptions options;
  options.coordinator_address = address_;
  options.worker_id = 1;
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  client_ = std::move(*client);
  const absl::Status created = client_->CreateTableEverywhere(ItemTable());
  ASSERT_TRUE(created.ok()) << created;
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < kCtlShards; ++i) {
      if (ShardInfo(i).tables_size() == 0) return false;
    }
    return true;
  }));
  ASSERT_NO_FATAL_FAILURE(PushRows(1, 200));
}

void EmberctlTest::TearDown() {
  client_.reset();
  coordinator_stub_.reset();
  admin_stub_.reset();
  if (cluster_ != nullptr) cluster_->StopAll().IgnoreError();
  cluster_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::unique_ptr<PsClient> EmberctlTest::JobWithItemTable(const std::string& job, uint32_t dim) {
  PsClientOptions options;
  options.coordinator_address = address_;
  options.worker_id = 2;
  options.job = job;
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  v1::TableConfig item;
  item.set_name("item");
  item.set_dim(dim);
  item.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
  item.mutable_optimizer()->set_learning_rate(0.25f);
  const absl::Status created = (*client)->CreateTableEverywhere(item);
  EXPECT_TRUE(created.ok()) << created;
  return created.ok() ? std::move(*client) : nullptr;
}

void EmberctlTest::PushRows(uint64_t first_id, int count) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < count; ++i) ids.push_back((first_id + i) * 7919);
  std::vector<float> grads(ids.size() * 4);
  for (size_t k = 0; k < grads.size(); ++k) grads[k] = 0.01f * static_cast<float>(k % 13);
  const absl::Status pushed = client_->Push("item", ids, grads, /*step=*/1);
  ASSERT_TRUE(pushed.ok()) << pushed;
}

v1::GetClusterMapResponse EmberctlTest::ClusterMap() {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::GetClusterMapResponse response;
  coordinator_stub_->GetClusterMap(&context, v1::GetClusterMapRequest(), &response);
  return response;  // empty (epoch 0) on error
}

v1::GetShardInfoResponse EmberctlTest::ShardInfo(int shard) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::GetShardInfoResponse response;
  ps_stub_[shard]->GetShardInfo(&context, v1::GetShardInfoRequest(), &response);
  return response;  // empty (epoch 0) on error
}

std::map<std::string, std::pair<uint64_t, uint64_t>> EmberctlTest::ShardDigests() {
  std::map<std::string, std::pair<uint64_t, uint64_t>> sums;
  for (int i = 0; i < kCtlShards; ++i) {
    if (ps_stub_[i] == nullptr) continue;
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::ChecksumResponse response;
    EXPECT_TRUE(ps_stub_[i]->Checksum(&context, v1::ChecksumRequest(), &response).ok());
    for (const auto& t : response.tables()) {
      sums[t.table()].first += t.rows();
      sums[t.table()].second += t.digest();
    }
  }
  return sums;
}

void EmberctlTest::SetSlotOwner(uint32_t slot, uint32_t shard) {
  grpc::ClientContext context;
  SetDeadline(&context);
  context.AddMetadata("ember-admin-token", kCtlToken);
  v1::SetSlotOwnerRequest request;
  request.set_slot(slot);
  request.set_shard_id(shard);
  v1::SetSlotOwnerResponse response;
  const grpc::Status s = admin_stub_->SetSlotOwner(&context, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
}

CtlResult EmberctlTest::Ctl(std::vector<std::string> args, const StderrWatch& watch) {
  args.insert(args.begin(), {absl::StrCat("--coordinator=", address_),
                             absl::StrCat("--admin_token=", kCtlToken)});
  return RunCtl(args, {}, watch);
}

}  // namespace ember
