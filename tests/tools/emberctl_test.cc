// Copyright 2026 The Ember Authors.
//
// emberctl as a real process against a real cluster on loopback (emberctl_fixture.h):
// the text and JSON output of the read-only commands (golden where the output is
// deterministic), usage errors (exit 2), credential and connectivity errors (exit 1
// with the status code), and the environment defaults. The commands that change the
// cluster are in emberctl_admin_test.cc.
//
// Waits on other processes poll with a deadline; nothing sleeps to order events.

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/admin_auth.h"
#include "gtest/gtest.h"
#include "tests/support/usage_errors.h"
#include "tests/tools/emberctl_fixture.h"

namespace ember {
namespace {

constexpr char kFreshSlots[] =
    "epoch 1\n"
    "SHARD  SLOTS  RANGES\n"
    "0      8192   0-8191\n"
    "1      8192   8192-16383\n";

TEST_F(EmberctlTest, SlotsShowGolden) {
  CtlResult r = Ctl({"slots", "show"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, kFreshSlots);
  EXPECT_EQ(r.err, "");

  r = Ctl({"slots", "show", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  EXPECT_EQ(r.out,
            "{\"epoch\":1,\"shards\":[{\"shard_id\":0,\"slots\":8192,\"ranges\":[[0,8191]]},"
            "{\"shard_id\":1,\"slots\":8192,\"ranges\":[[8192,16383]]}],"
            "\"unowned\":{\"slots\":0,\"ranges\":[]}}\n");

  r = Ctl({"slots", "show", "--shard=1"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, "epoch 1\nSHARD  SLOTS  RANGES\n1      8192   8192-16383\n");
}

TEST_F(EmberctlTest, TablesListAndDescribe) {
  CtlResult r = Ctl({"tables", "list"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out,
            "NAME  DIM  OPTIMIZER  LR   SEED  MIN_COUNT\n"
            "item  4    sgd        0.5  42    0\n");
  r = Ctl({"--json", "tables", "list"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out,
            "{\"tables\":[{\"name\":\"item\",\"dim\":4,\"optimizer\":\"sgd\","
            "\"learning_rate\":0.5,\"seed\":42,\"admission_min_count\":0}]}\n");

  r = Ctl({"tables", "describe", "item"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out,
            "name                                item\n"
            "dim                                 4\n"
            "seed                                42\n"
            "initializer.kind                    UNIFORM\n"
            "initializer.scale                   0.05\n"
            "optimizer.kind                      SGD\n"
            "optimizer.learning_rate             0.5\n"
            "optimizer.epsilon                   1e-08\n"
            "optimizer.initial_accumulator       1e-06\n"
            "optimizer.beta1                     0.9\n"
            "optimizer.beta2                     0.999\n"
            "optimizer.ftrl_l1                   0\n"
            "optimizer.ftrl_l2                   0\n"
            "optimizer.ftrl_beta                 1\n"
            "optimizer.freq_power                0\n"
            "optimizer.freq_reference_count      100\n"
            "optimizer.freq_min_scale            1\n"
            "optimizer.freq_max_scale            4\n"
            "admission.min_count                 0\n"
            "admission.sketch_width              1048576\n"
            "admission.sketch_depth              4\n"
            "eviction.ttl_steps                  0\n"
            "eviction.min_count                  0\n"
            "eviction.count_decay                1\n"
            "wire_type                           WIRE_FLOAT32\n");
  r = Ctl({"tables", "describe", "item", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  EXPECT_TRUE(absl::StartsWith(
      r.out,
      "{\"table\":{\"name\":\"item\",\"dim\":4,\"seed\":42,\"initializer\":{\"kind\":"
      "\"UNIFORM\",\"scale\":0.05},\"optimizer\":{\"kind\":\"SGD\",\"learning_rate\":0.5,"))
      << r.out;

  r = Ctl({"tables", "describe", "nope"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "NOT_FOUND")) << r;
}

TEST_F(EmberctlTest, ChecksumMatchesTheShards) {
  const auto sums = ShardDigests();
  ASSERT_EQ(sums.count("item"), 1u);
  const uint64_t rows = sums.at("item").first;
  const uint64_t digest = sums.at("item").second;
  EXPECT_EQ(rows, 200u);
  CtlResult r = Ctl({"checksum"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, absl::StrFormat("TABLE  ROWS  DIGEST\nitem   %-4d  %016x\n", rows, digest));

  r = Ctl({"checksum", "--table=item", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, absl::StrFormat("{\"epoch\":1,\"tables\":[{\"table\":\"item\",\"rows\":%d,"
                                   "\"digest\":\"%016x\"}]}\n",
                                   rows, digest));

  r = Ctl({"checksum", "--per_shard"});
  ASSERT_EQ(r.exit_code, 0) << r;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_EQ(lines[0], "TABLE  SHARD  ROWS  DIGEST");
  EXPECT_TRUE(absl::StartsWith(lines[1], "item   0      ")) << lines[1];
  EXPECT_TRUE(absl::StartsWith(lines[2], "item   1      ")) << lines[2];
  EXPECT_EQ(lines[3], absl::StrFormat("item   all    %-4d  %016x", rows, digest));

  r = Ctl({"checksum", "--table=nope"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "NOT_FOUND")) << r;
}

// A job's own tables (PsClientOptions.job; coordinator.proto JobTables): `tables list`
// and `checksum` show them with --job, apart from the shared ones of the same name.
// The rows in memory that `shards list --json` gives, summed over the shards.
uint64_t RowsInMemory(const std::string& json) {
  uint64_t sum = 0;
  for (absl::string_view part : absl::StrSplit(json, "\"rows_in_memory\":")) {
    if (part.empty() || !absl::ascii_isdigit(part[0])) continue;
    uint64_t n = 0;
    if (absl::SimpleAtoi(part.substr(0, part.find_first_not_of("0123456789")), &n)) sum += n;
  }
  return sum;
}

TEST_F(EmberctlTest, AJobsOwnTablesAreListedAndDigestedWithJob) {
  CtlResult before = Ctl({"shards", "list", "--json"});
  ASSERT_EQ(before.exit_code, 0) << before;
  std::unique_ptr<PsClient> own = JobWithItemTable("own-job", 8);  // the shared "item": dim 4
  ASSERT_NE(own, nullptr);
  std::vector<uint64_t> ids = {3, 5, 7};
  std::vector<float> grads(ids.size() * 8, 1.0f);
  ASSERT_TRUE(own->Push("item", ids, grads, /*step=*/1).ok());
  absl::StatusOr<std::map<std::string, PsClient::TableDigest>> digests = own->Checksum();
  ASSERT_TRUE(digests.ok()) << digests.status();
  ASSERT_EQ(digests->at("item").rows, 3u);
  // A shard's size is every store's: the job's 3 rows count in `shards list`.
  CtlResult after = Ctl({"shards", "list", "--json"});
  ASSERT_EQ(after.exit_code, 0) << after;
  EXPECT_EQ(RowsInMemory(after.out), RowsInMemory(before.out) + 3) << before.out << after.out;

  CtlResult r = Ctl({"tables", "list", "--job=own-job"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(RowOf(r.out, "item").at(1), "8") << r.out;
  r = Ctl({"tables", "list"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(RowOf(r.out, "item").at(1), "4") << r.out;
  r = Ctl({"checksum", "--job=own-job"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, absl::StrFormat("TABLE  ROWS  DIGEST\nitem   %-4d  %016x\n", 3,
                                   digests->at("item").digest));
  r = Ctl({"checksum", "--job=no-such-job"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "NOT_FOUND")) << r;
  r = Ctl({"tables", "list", "--job=.."});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "INVALID_ARGUMENT")) << r;
}

// A checksum is a cut of one slot map: while one shard already counts under a newer
// map (as a move's target does at the switch, before the others), emberctl asks again
// and, when the shards never agree, fails ABORTED naming the epochs.
TEST_F(EmberctlTest, ChecksumRefusesAnswersFromDifferentSlotMaps) {
  const v1::GetClusterMapResponse map = ClusterMap();
  v1::InstallSlotMapRequest install;
  install.set_epoch(map.epoch() + 1);
  install.set_slot_owners(map.slot_owners());
  v1::InstallSlotMapResponse installed;
  grpc::ClientContext context;
  context.AddMetadata(kAdminTokenMetadataKey, kCtlToken);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::Status s = ps_stub_[0]->InstallSlotMap(&context, install, &installed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(installed.epoch(), map.epoch() + 1);

  const CtlResult r = Ctl({"--timeout_ms=1500", "checksum"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StartsWith(r.err, "emberctl: ABORTED")) << r;
  EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("map epoch ", map.epoch()))) << r;
  EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("shard 0 at ", map.epoch() + 1))) << r;
  EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("shard 1 at ", map.epoch()))) << r;
  EXPECT_TRUE(r.out.empty()) << "no digest printed: " << r.out;
}

TEST_F(EmberctlTest, AuditAndSlotsAfterSetSlotOwner) {
  ASSERT_NO_FATAL_FAILURE(SetSlotOwner(5, 1));
  CtlResult r = Ctl({"audit"});
  ASSERT_EQ(r.exit_code, 0) << r;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 2u) << r.out;
  EXPECT_TRUE(absl::StartsWith(lines[0], "SEQ  TIME  ")) << lines[0];
  const std::string& last = lines.back();
  EXPECT_TRUE(absl::EndsWith(last, "set_slot_owner slot=5 shard=1 (was 0)")) << last;
  EXPECT_TRUE(absl::StrContains(last, "  1 -> 2  peer=")) << last;
  EXPECT_TRUE(absl::StrContains(last, "token=tok-")) << last;
  EXPECT_FALSE(absl::StrContains(r.out, kCtlToken));

  r = Ctl({"audit", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out,
                                "\"what\":\"set_slot_owner slot=5 shard=1 (was 0)\","
                                "\"epoch_before\":1,\"epoch_after\":2}]}"))
      << r.out;

  r = Ctl({"slots", "show"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out,
            "epoch 2\n"
            "SHARD  SLOTS  RANGES\n"
            "0      8191   0-4,6-8191\n"
            "1      8193   5,8192-16383\n");
}

TEST_F(EmberctlTest, StatusAndShardsList) {
  CtlResult r = Ctl({"status", "--sample_ms=200"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StartsWith(r.out, absl::StrCat("coordinator ", address_,
                                                   "  epoch 1  shards 2 (2 alive)\n\n"
                                                   "SHARD  ADDRESS")))
      << r.out;
  for (int i = 0; i < kCtlShards; ++i) {
    const std::vector<std::string> row = RowOf(r.out, absl::StrCat(i));
    ASSERT_GE(row.size(), 4u) << r.out;
    EXPECT_EQ(row[1], ps_address_[i]);
    EXPECT_EQ(row[2], "ALIVE");
    EXPECT_EQ(row[3], "8192");
  }
  EXPECT_TRUE(absl::StrContains(r.out, "\nmigration: none running\n")) << r.out;

  r = Ctl({"status", "--json", "--sample_ms=0"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  for (const char* key : {"\"coordinator\":", "\"epoch\":1,", "\"shards\":[",
                          "\"jobs\":", "\"migration\":", "\"qps\":null", "\"p99_ms\":null",
                          "\"state\":\"ALIVE\"", "\"memory_bytes\":", "\"disk_bytes\":"}) {
    EXPECT_TRUE(absl::StrContains(r.out, key)) << key << " in " << r.out;
  }
  for (int i = 0; i < kCtlShards; ++i) {
    EXPECT_TRUE(absl::StrContains(
        r.out, absl::StrCat("{\"shard_id\":", i, ",\"address\":\"", ps_address_[i],
                            "\",\"state\":\"ALIVE\","
                            "\"slots\":8192,")))
        << r.out;
  }

  r = Ctl({"shards", "list"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StartsWith(r.out, "epoch 1\nSHARD  ADDRESS")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, ps_address_[1])) << r.out;

  // A shard that does not answer is shown with "-" and its error; status still works.
  ASSERT_TRUE(cluster_->shard(1)->Stop(absl::Seconds(10)).ok());
  r = Ctl({"status", "--sample_ms=0"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "shard 1: UNAVAILABLE")) << r.out;
}

TEST_F(EmberctlTest, UsageErrorsExit2) {
  // Each: the arguments (split at spaces) and what stderr must contain.
  const std::vector<UsageErrorCase> cases = {
      {"frobnicate", "unknown command 'frobnicate'"},
      {"", "missing command"},
      {"slots", "'slots' needs a subcommand: show, move"},
      {"slots shuffle", "unknown subcommand 'shuffle' for 'slots'"},
      {"slots show --bogus=1", "unknown flag --bogus for 'slots show'"},
      {"slots move --slots=5-3 --to=1", "bad slot range '5-3'"},
      {"slots move --slots=16384 --to=1", "bad slot '16384'"},
      {"slots move --slots=1,,2 --to=1", "empty item"},
      {"slots move --slots=x --to=1", "bad slot 'x'"},
      {"slots move --slots=0-99", "'slots move' needs --to"},
      {"slots move --to=1", "'slots move' needs --slots"},
      {"slots move --slots=1 --to=one", "--to: bad number 'one'"},
      {"tables describe", "'tables describe' needs a table NAME"},
      {"tables create --dim=4", "'tables create' needs --name"},
      {"tables create --name=t --dim=4 --optimizer=rmsprop", "--optimizer"},
      {"rebalance --by=moon", "--by: expected rows, load or slots"},
      {"status --sample_ms=-1", "--sample_ms"},
      {"shards drain", "'shards drain' needs --id"},
      {"checkpoint list", "'checkpoint list' needs --job"},
      {"migrations cancel", "'migrations cancel' needs an OP id"},
      {"audit extra", "unexpected argument 'extra'"},
      {"--timeout_ms=0 status", "--timeout_ms"},
      {"--admin_token=a --admin_token_file=/x status", "not both"},
      {"--admin_token_file=/nonexistent/token status",
       "cannot read admin token file '/nonexistent/token'"},
  };
  ExpectUsageErrors(
      [](const std::string& args) {
        const CtlResult r = RunCtl(absl::StrSplit(args, ' ', absl::SkipEmpty()));
        EXPECT_EQ(r.out, "") << args << "\n" << r;
        return RunResult{r.exit_code, r.err};
      },
      cases, UsageErrorChecks().MessageAnywhere().HintOnly("see 'emberctl"));
  // --help at every level: exit 0, usage on stdout.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--help"}, {"slots", "--help"}, {"slots", "move", "--help"}, {"-h", "status"}}) {
    const CtlResult r = RunCtl(args);
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_TRUE(absl::StartsWith(r.out, "usage: emberctl")) << r;
  }
  EXPECT_TRUE(absl::StrContains(RunCtl({"slots", "move", "--help"}).out, "--slots=LIST"));
}

TEST_F(EmberctlTest, CredentialErrorsExit1) {
  CtlResult r = RunCtl({absl::StrCat("--coordinator=", address_), "shards", "list"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StartsWith(r.err, "emberctl: UNAUTHENTICATED")) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "--admin_token_file")) << r;

  r = RunCtl({absl::StrCat("--coordinator=", address_), "--admin_token=wrong", "audit"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "UNAUTHENTICATED")) << r;

  // Read-only CoordinatorService commands need no token.
  r = RunCtl({absl::StrCat("--coordinator=", address_), "slots", "show"});
  EXPECT_EQ(r.exit_code, 0) << r;

  // The token from a file, given by flag or by EMBER_ADMIN_TOKEN_FILE.
  const std::string token_file = dir_ + "/token";
  std::ofstream(token_file) << kCtlToken << "\n";
  r = RunCtl({absl::StrCat("--coordinator=", address_),
              absl::StrCat("--admin_token_file=", token_file), "audit"});
  EXPECT_EQ(r.exit_code, 0) << r;
  r = RunCtl({"audit"}, {absl::StrCat("EMBER_COORDINATOR=", address_),
                         absl::StrCat("EMBER_ADMIN_TOKEN_FILE=", token_file)});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StartsWith(r.out, "SEQ  TIME")) << r;
}

TEST_F(EmberctlTest, CoordinatorDownExit1Unavailable) {
  const std::string down = absl::StrCat("127.0.0.1:", FreePort());
  for (const char* command : {"status", "slots"}) {
    std::vector<std::string> args = {absl::StrCat("--coordinator=", down),
                                     absl::StrCat("--admin_token=", kCtlToken), "--timeout_ms=3000",
                                     command};
    if (std::string(command) == "slots") args.push_back("show");
    const CtlResult r = RunCtl(args);
    EXPECT_EQ(r.exit_code, 1) << r;
    EXPECT_TRUE(absl::StartsWith(r.err, "emberctl: UNAVAILABLE")) << r;
    EXPECT_LT(r.elapsed, absl::Seconds(10)) << r;
  }
}

TEST_F(EmberctlTest, SlotsMoveClientSideChecks) {
  // Slots already on the target are skipped; with nothing left nothing starts.
  CtlResult r = Ctl({"slots", "move", "--slots=8192-8199", "--to=1"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, "8 slots already on shard 1, skipped: 8192-8199\nnothing to move\n");
  // An unknown target fails before anything starts.
  r = Ctl({"slots", "move", "--slots=1", "--to=7"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "NOT_FOUND: shard 7 is not registered")) << r;
  // --dry_run groups by owner and starts nothing.
  r = Ctl({"slots", "move", "--slots=8190-8193", "--to=1", "--dry_run"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out,
            "2 slots already on shard 1, skipped: 8192-8193\n"
            "move 2 slots 0 -> 1: 8190-8191\n"
            "dry run: nothing started\n");
  r = Ctl({"--json", "slots", "move", "--slots=8190-8193", "--to=1", "--dry_run"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out,
            "{\"target\":1,\"skipped\":[[8192,8193]],\"moves\":[{\"source\":0,\"slots\":2,"
            "\"ranges\":[[8190,8191]]}],\"dry_run\":true,\"migration\":null}\n");
}

TEST_F(EmberctlTest, CheckpointCreateOfUnknownJob) {
  const CtlResult r = Ctl({"checkpoint", "create", "--job=nope"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "NOT_FOUND")) << r;
}

}  // namespace
}  // namespace ember
