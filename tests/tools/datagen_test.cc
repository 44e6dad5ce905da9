// Copyright 2026 The Ember Authors.
//
// ember-datagen as a real process on small datasets in a temporary directory: the
// output layout and schema, determinism, the planted truth's bookkeeping (cold users,
// item training counts, item -> category/shop, the oracle), realistic skew, gzip, the
// planted conversions of --conversions, the cross term of --cross, and flag errors.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "tests/support/usage_errors.h"

extern char** environ;

namespace ember {
namespace {

namespace fs = std::filesystem;

constexpr int kTimeoutSeconds = 120;  // per ember-datagen run; a run takes < 1 s
constexpr uint64_t kTrain = 20000;
constexpr uint64_t kTest = 5000;
constexpr uint64_t kUsers = 200000;
constexpr uint64_t kItems = 100000;

const std::vector<std::string> kColumns = {
    "label", "user_id", "item_id",      "category_id", "shop_id",  "user_segment",
    "hour",  "device",  "recent_items", "price",       "user_age", "session_depth"};

// Runs ember-datagen with `args`, output to a file; SIGKILL after kTimeoutSeconds. The
// result is tools/harness/process.h's RunResult (exit_code: 128 + signal if killed).
RunResult RunDatagen(const std::vector<std::string>& args) {
  RunResult result;
  const std::string log_path =
      (fs::path(testing::TempDir()) / absl::StrCat("datagen-", getpid(), ".log")).string();
  std::vector<std::string> storage = {EMBER_DATAGEN_BINARY};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return result;
  // A pidfd becomes readable when the child exits: a bounded wait without sleeping.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  pollfd p{pidfd, POLLIN, 0};
  if (pidfd < 0 || poll(&p, 1, kTimeoutSeconds * 1000) != 1) kill(pid, SIGKILL);
  if (pidfd >= 0) close(pidfd);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(log_path);
  result.output.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(log_path);
  return result;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Decompresses with the system's gzip (the test does not link zlib).
std::string Gunzip(const fs::path& path) {
  std::string out;
  FILE* pipe = popen(absl::StrCat("gzip -dc '", path.string(), "'").c_str(), "r");
  if (pipe == nullptr) return out;
  char chunk[1 << 16];
  size_t n;
  while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0) out.append(chunk, n);
  pclose(pipe);
  return out;
}

// A TSV file: the header and the rows, split on tabs.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Table ParseTsv(const std::string& text) {
  Table table;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty()) return table;
  table.header = absl::StrSplit(lines[0], '\t');
  for (size_t i = 1; i < lines.size(); ++i) {
    table.rows.push_back(absl::StrSplit(lines[i], '\t'));
  }
  return table;
}

uint64_t Id(const std::string& s) {
  uint64_t v = 0;
  EXPECT_TRUE(absl::SimpleAtoi(s, &v)) << "'" << s << "'";
  return v;
}

double Number(const std::string& s) {
  double v = 0;
  EXPECT_TRUE(absl::SimpleAtod(s, &v)) << "'" << s << "'";
  return v;
}

// A number field of a flat JSON object such as oracle.json; NaN when absent.
double JsonField(const std::string& json, const std::string& name) {
  const std::string key = absl::StrCat("\"", name, "\": ");
  const size_t at = json.find(key);
  if (at == std::string::npos) return std::nan("");
  const size_t start = at + key.size();
  double v = 0;
  if (!absl::SimpleAtod(json.substr(start, json.find_first_of(",}", start) - start), &v)) {
    return std::nan("");
  }
  return v;
}

// Exact AUC, ties counted half.
double Auc(std::vector<std::pair<double, int>> scored) {
  std::sort(scored.begin(), scored.end());
  double positives = 0, rank_sum = 0;
  for (size_t i = 0; i < scored.size();) {
    size_t j = i;
    double group = 0;
    while (j < scored.size() && scored[j].first == scored[i].first) group += scored[j++].second;
    rank_sum += group * (i + 1 + j) / 2.0;
    positives += group;
    i = j;
  }
  const double negatives = scored.size() - positives;
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

class DatagenTest : public testing::Test {
 protected:
  // Four datasets shared by the tests: seed 1 twice, seed 2, and seed 1 with --gzip.
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::path(testing::TempDir()) / absl::StrCat("datagen_test-", getpid()));
    fs::remove_all(*root_);
    for (const auto& [name, extra] : std::vector<std::pair<std::string, std::string>>{
             {"a", "--seed=1"}, {"b", "--seed=1"}, {"c", "--seed=2"}, {"gz", "--gzip"}}) {
      const RunResult r =
          RunDatagen({absl::StrCat("--out=", (*root_ / name).string()),
                      absl::StrCat("--train_examples=", kTrain),
                      absl::StrCat("--test_examples=", kTest), "--train_files=3", extra});
      ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }

  static fs::path Dir(const std::string& name) { return *root_ / name; }

  static Table Train(const std::string& name) {
    Table all;
    for (int f = 0; f < 3; ++f) {
      Table part = ParseTsv(ReadFile(Dir(name) / "train" / absl::StrCat("part-0000", f, ".tsv")));
      all.header = part.header;
      all.rows.insert(all.rows.end(), part.rows.begin(), part.rows.end());
    }
    return all;
  }
  static Table Test(const std::string& name) {
    return ParseTsv(ReadFile(Dir(name) / "test" / "part-00000.tsv"));
  }

  static fs::path* root_;
};

fs::path* DatagenTest::root_ = nullptr;

TEST_F(DatagenTest, WritesTheDocumentedLayout) {
  for (const char* file : {"train/part-00000.tsv", "train/part-00001.tsv", "train/part-00002.tsv",
                           "test/part-00000.tsv", "oracle.json", "datagen.json"}) {
    EXPECT_TRUE(fs::is_regular_file(Dir("a") / file)) << file;
  }
  EXPECT_FALSE(fs::exists(Dir("a") / "train" / "part-00003.tsv"));
  const std::string flags = ReadFile(Dir("a") / "datagen.json");
  EXPECT_EQ(JsonField(flags, "train_examples"), kTrain) << flags;
  EXPECT_EQ(JsonField(flags, "train_files"), 3) << flags;
  EXPECT_EQ(JsonField(flags, "zipf"), 1.1) << flags;
}

TEST_F(DatagenTest, SameSeedSameBytesOtherSeedOtherData) {
  for (const char* file :
       {"train/part-00000.tsv", "train/part-00002.tsv", "test/part-00000.tsv", "oracle.json"}) {
    const std::string a = ReadFile(Dir("a") / file);
    ASSERT_FALSE(a.empty()) << file;
    EXPECT_TRUE(a == ReadFile(Dir("b") / file)) << file << " differs between equal runs";
    EXPECT_FALSE(a == ReadFile(Dir("c") / file)) << file << " equal for seeds 1 and 2";
  }
}

TEST_F(DatagenTest, GzipHoldsTheSameContent) {
  for (const char* file : {"train/part-00000.tsv", "train/part-00001.tsv", "test/part-00000.tsv"}) {
    const fs::path gz = Dir("gz") / absl::StrCat(file, ".gz");
    ASSERT_TRUE(fs::is_regular_file(gz)) << gz;
    EXPECT_FALSE(fs::exists(Dir("gz") / file)) << "plain file next to the .gz";
    EXPECT_TRUE(Gunzip(gz) == ReadFile(Dir("a") / file)) << file;
    EXPECT_LT(fs::file_size(gz), fs::file_size(Dir("a") / file) / 2) << file;
  }
}

TEST_F(DatagenTest, SchemaHeaderColumnsAndValueRanges) {
  const Table train = Train("a");
  const Table test = Test("a");
  EXPECT_EQ(train.header, kColumns);
  std::vector<std::string> test_columns = kColumns;
  for (const char* c : {"true_prob", "item_train_count", "cold_user"}) test_columns.push_back(c);
  EXPECT_EQ(test.header, test_columns);
  ASSERT_EQ(train.rows.size(), kTrain);
  ASSERT_EQ(test.rows.size(), kTest);
  int bad = 0;  // report a few failures, not thousands
  for (const Table* table : {&train, &test}) {
    for (const std::vector<std::string>& row : table->rows) {
      if (row.size() != table->header.size()) {
        ASSERT_LT(++bad, 5) << "columns " << row.size();
        continue;
      }
      const bool ok = (row[0] == "0" || row[0] == "1") && Id(row[1]) >= 1 && Id(row[2]) >= 1 &&
                      Id(row[2]) <= kItems && Id(row[3]) >= 1 && Id(row[3]) <= 500 &&
                      Id(row[4]) >= 1 && Id(row[4]) <= 5000 && Id(row[5]) >= 1000 &&
                      Id(row[5]) <= 1019 && Id(row[6]) >= 2000 && Id(row[6]) <= 2023 &&
                      Id(row[7]) >= 3000 && Id(row[7]) <= 3003 && Number(row[9]) > 0 &&
                      Number(row[10]) >= 18 && Number(row[10]) <= 70 && Number(row[11]) >= 0 &&
                      Number(row[11]) == static_cast<uint64_t>(Number(row[11]));
      std::vector<std::string> recent;
      if (!row[8].empty()) recent = absl::StrSplit(row[8], '|');
      bool recent_ok = recent.size() <= 5;
      for (const std::string& r : recent) recent_ok &= Id(r) >= 1 && Id(r) <= kItems;
      if (!ok || !recent_ok) {
        ASSERT_LT(++bad, 5) << absl::StrJoin(row, "\t");
      }
    }
  }
  for (const std::vector<std::string>& row : test.rows) {
    const double p = Number(row[12]);
    ASSERT_TRUE(p > 0 && p < 1) << row[12];
    ASSERT_TRUE(row[14] == "0" || row[14] == "1") << row[14];
  }
}

TEST_F(DatagenTest, ColdUsersNeverTrainWarmUsersDo) {
  std::unordered_set<uint64_t> train_users;
  for (const auto& row : Train("a").rows) {
    train_users.insert(Id(row[1]));
    ASSERT_LE(Id(row[1]), kUsers);
  }
  uint64_t cold = 0;
  for (const auto& row : Test("a").rows) {
    const uint64_t user = Id(row[1]);
    if (row[14] == "1") {
      ++cold;
      ASSERT_EQ(train_users.count(user), 0u) << user;
      ASSERT_GT(user, kUsers);
    } else {
      ASSERT_EQ(train_users.count(user), 1u) << user;
    }
  }
  // --cold_user_fraction 0.1 of 5000: 500 +- 4 standard deviations.
  EXPECT_NEAR(cold, 500.0, 4 * 21.2);
  EXPECT_NEAR(JsonField(ReadFile(Dir("a") / "oracle.json"), "cold_user_fraction"),
              static_cast<double>(cold) / kTest, 1e-6);
}

TEST_F(DatagenTest, ItemTrainCountIsARecountOfTraining) {
  std::unordered_map<uint64_t, uint64_t> counts;
  for (const auto& row : Train("a").rows) ++counts[Id(row[2])];
  int zero = 0;
  for (const auto& row : Test("a").rows) {
    const uint64_t item = Id(row[2]);
    ASSERT_EQ(Id(row[13]), counts.count(item) ? counts[item] : 0) << item;
    zero += counts.count(item) == 0;
  }
  EXPECT_GT(zero, 0) << "some test items should be unseen in training (long tail)";
}

TEST_F(DatagenTest, CategoryAndShopAreFunctionsOfTheItem) {
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> of_item;
  std::set<uint64_t> categories;
  for (const Table& table : {Train("a"), Test("a")}) {
    for (const auto& row : table.rows) {
      const auto [it, inserted] = of_item.try_emplace(Id(row[2]), Id(row[3]), Id(row[4]));
      ASSERT_EQ(it->second, std::make_pair(Id(row[3]), Id(row[4]))) << "item " << row[2];
      categories.insert(Id(row[3]));
    }
  }
  EXPECT_GT(categories.size(), 100u);  // items spread over the 500 categories
}

TEST_F(DatagenTest, OracleMatchesTheTestFile) {
  const std::string oracle = ReadFile(Dir("a") / "oracle.json");
  const double auc = JsonField(oracle, "test_auc");
  EXPECT_GT(auc, 0.5) << oracle;
  EXPECT_LT(auc, 1.0) << oracle;
  // The tuned truth (world.h Truth): about 0.77-0.79 for the default universe.
  EXPECT_GT(auc, 0.72) << oracle;
  EXPECT_LT(auc, 0.86) << oracle;
  EXPECT_EQ(JsonField(oracle, "test_examples"), kTest) << oracle;
  EXPECT_EQ(JsonField(oracle, "train_examples"), kTrain) << oracle;
  std::vector<std::pair<double, int>> scored;
  double logloss = 0;
  for (const auto& row : Test("a").rows) {
    const double p = Number(row[12]);
    scored.emplace_back(p, row[0] == "1");
    logloss -= row[0] == "1" ? std::log(p) : std::log1p(-p);
  }
  EXPECT_NEAR(Auc(scored), auc, 2e-6);
  EXPECT_NEAR(logloss / kTest, JsonField(oracle, "test_logloss"), 2e-6);
  double label_sum = 0;
  for (const auto& row : Train("a").rows) label_sum += row[0] == "1";
  EXPECT_NEAR(JsonField(oracle, "base_ctr"), label_sum / kTrain, 2e-6);
}

TEST_F(DatagenTest, ClickRateIsRealistic) {
  for (const Table& table : {Train("a"), Test("a")}) {
    double clicks = 0;
    for (const auto& row : table.rows) clicks += row[0] == "1";
    const double ctr = clicks / table.rows.size();
    EXPECT_GT(ctr, 0.1);  // Truth::base_ctr is 0.15
    EXPECT_LT(ctr, 0.2);
  }
}

// The share of examples on the most popular 1% of `items` items.
double Top1PercentShare(const Table& train, uint64_t items) {
  std::unordered_map<uint64_t, uint64_t> counts;
  for (const auto& row : train.rows) ++counts[Id(row[2])];
  std::vector<uint64_t> sorted;
  for (const auto& [item, n] : counts) sorted.push_back(n);
  std::sort(sorted.rbegin(), sorted.rend());
  sorted.resize(std::min<size_t>(sorted.size(), items / 100));
  return static_cast<double>(std::accumulate(sorted.begin(), sorted.end(), uint64_t{0})) /
         train.rows.size();
}

TEST_F(DatagenTest, PopularityIsZipfSkewed) {
  // Zipf(1.1) over 100000 items: the top 1000 hold about 3/4 of the examples.
  EXPECT_GT(Top1PercentShare(Train("a"), kItems), 0.6);
  // And --zipf=0 is uniform: over 1000 items, the top 10 hold little more than 1%.
  const fs::path flat = Dir("flat");
  const RunResult r =
      RunDatagen({absl::StrCat("--out=", flat.string()), "--train_examples=20000",
                  "--test_examples=100", "--train_files=3", "--items=1000", "--zipf=0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LT(Top1PercentShare(Train("flat"), 1000), 0.03);
}

TEST_F(DatagenTest, RegeneratingRemovesStaleParts) {
  const fs::path dir = Dir("regen");
  ASSERT_EQ(RunDatagen({absl::StrCat("--out=", dir.string()), "--train_examples=100",
                        "--test_examples=10", "--train_files=4"})
                .exit_code,
            0);
  const RunResult r = RunDatagen({absl::StrCat("--out=", dir.string()), "--train_examples=100",
                                  "--test_examples=10", "--train_files=2", "--gzip"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir / "train")) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"part-00000.tsv.gz", "part-00001.tsv.gz"}));
}

// --conversions: the click data stays exactly that of a run without it (dataset "a"),
// the conversions are post-click and realistic, and oracle.json's conversion oracle
// is the one of the files.
TEST_F(DatagenTest, ConversionsKeepTheClicksAndPlantALearnableCvr) {
  const fs::path dir = Dir("conversions");
  const RunResult r = RunDatagen(
      {absl::StrCat("--out=", dir.string()), absl::StrCat("--train_examples=", kTrain),
       absl::StrCat("--test_examples=", kTest), "--train_files=3", "--seed=1", "--conversions"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Table clicks_train = Train("a");
  const Table clicks_test = Test("a");
  const Table train = Train("conversions");
  const Table test = Test("conversions");
  std::vector<std::string> train_columns = kColumns;
  for (const char* c : {"true_prob", "converted", "true_cvr_prob"}) train_columns.push_back(c);
  EXPECT_EQ(train.header, train_columns);
  std::vector<std::string> test_columns = clicks_test.header;
  for (const char* c : {"converted", "true_cvr_prob"}) test_columns.push_back(c);
  EXPECT_EQ(test.header, test_columns);
  ASSERT_EQ(train.rows.size(), clicks_train.rows.size());
  ASSERT_EQ(test.rows.size(), clicks_test.rows.size());

  // Line by line: the click columns are the same; converted only after a click.
  struct Counts {
    double clicks = 0, conversions = 0;
  };
  auto check = [](const Table& with, const Table& without, Counts* counts) {
    const size_t n = without.header.size();
    const size_t converted = with.header.size() - 2;
    for (size_t i = 0; i < with.rows.size(); ++i) {
      const std::vector<std::string>& row = with.rows[i];
      ASSERT_EQ(row.size(), with.header.size()) << "line " << i + 2;
      ASSERT_EQ(std::vector<std::string>(row.begin(), row.begin() + n), without.rows[i])
          << "line " << i + 2;
      const std::string& c = row[converted];
      ASSERT_TRUE(c == "0" || c == "1") << "line " << i + 2 << ": " << c;
      if (row[0] == "0") {
        ASSERT_EQ(c, "0") << "a conversion without a click, line " << i + 2;
      }
      const double p = Number(row[converted + 1]);
      ASSERT_TRUE(p > 0 && p < 1) << "line " << i + 2 << ": " << row[converted + 1];
      counts->clicks += row[0] == "1";
      counts->conversions += c == "1";
    }
  };
  Counts train_counts, test_counts;
  check(train, clicks_train, &train_counts);
  check(test, clicks_test, &test_counts);
  for (size_t i = 0; i < train.rows.size(); ++i) {  // training files' true_prob
    const double p = Number(train.rows[i][12]);
    ASSERT_TRUE(p > 0 && p < 1) << train.rows[i][12];
  }
  // ConversionTruth::base_cvr is 0.1: about 3000 training clicks (sd of the rate
  // 0.006), about 750 test clicks (sd 0.011).
  const double train_cvr = train_counts.conversions / train_counts.clicks;
  const double test_cvr = test_counts.conversions / test_counts.clicks;
  EXPECT_GT(train_cvr, 0.07);
  EXPECT_LT(train_cvr, 0.13);
  EXPECT_GT(test_cvr, 0.05);
  EXPECT_LT(test_cvr, 0.15);

  // The oracle: the written probabilities against the written conversions.
  const std::string oracle = ReadFile(dir / "oracle.json");
  EXPECT_EQ(ReadFile(Dir("a") / "oracle.json"),
            oracle.substr(0, oracle.find(", \"cvr_test_auc\"")) + "}\n")
      << "the click oracle differs: " << oracle;
  std::vector<std::pair<double, int>> cvr, ctcvr;
  double logloss = 0;
  for (const auto& row : test.rows) {
    const double p = Number(row[16]);
    const int converted = row[15] == "1";
    ctcvr.emplace_back(static_cast<float>(Number(row[12])) * static_cast<float>(p), converted);
    if (row[0] != "1") continue;
    cvr.emplace_back(p, converted);
    logloss -= converted ? std::log(p) : std::log1p(-p);
  }
  const double cvr_auc = JsonField(oracle, "cvr_test_auc");
  EXPECT_NEAR(Auc(cvr), cvr_auc, 2e-6) << oracle;
  EXPECT_NEAR(logloss / cvr.size(), JsonField(oracle, "cvr_test_logloss"), 2e-6) << oracle;
  EXPECT_EQ(JsonField(oracle, "cvr_test_examples"), test_counts.clicks) << oracle;
  EXPECT_NEAR(Auc(ctcvr), JsonField(oracle, "ctcvr_test_auc"), 2e-6) << oracle;
  EXPECT_NEAR(JsonField(oracle, "base_cvr"), train_cvr, 2e-6) << oracle;
  // A CVR a model must learn: well above chance, short of certainty (about 0.77 on
  // the default universe; 0.83 here, from 67 test conversions).
  EXPECT_GT(cvr_auc, 0.68) << oracle;
  EXPECT_LT(cvr_auc, 0.9) << oracle;
  EXPECT_GT(JsonField(oracle, "ctcvr_test_auc"), cvr_auc) << "clicks explain conversions too";
  EXPECT_TRUE(absl::StrContains(ReadFile(dir / "datagen.json"), "\"conversions\": true"));
  EXPECT_FALSE(absl::StrContains(ReadFile(Dir("a") / "datagen.json"), "conversions"));
}

// --cross plants a third-order cross (user x item x hour by default) in the click truth:
// the features of every line stay the same, the labels and true_prob follow the new truth,
// and the oracle matches the file.
TEST_F(DatagenTest, CrossTermChangesOnlyTheTruth) {
  const fs::path dir = Dir("cross");
  const RunResult r = RunDatagen(
      {absl::StrCat("--out=", dir.string()), absl::StrCat("--train_examples=", kTrain),
       absl::StrCat("--test_examples=", kTest), "--train_files=3", "--seed=1", "--cross=1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Table plain = Test("a");
  const Table test = Test("cross");
  ASSERT_EQ(test.header, plain.header);
  ASSERT_EQ(test.rows.size(), plain.rows.size());
  const size_t true_prob = 12;
  ASSERT_EQ(test.header[true_prob], "true_prob");
  size_t labels_changed = 0;
  std::vector<std::pair<double, int>> scored;
  double moved = 0;  // sum of |logit change|
  for (size_t i = 0; i < test.rows.size(); ++i) {
    const std::vector<std::string>& row = test.rows[i];
    const std::vector<std::string>& base = plain.rows[i];
    ASSERT_EQ(std::vector<std::string>(row.begin() + 1, row.begin() + 12),
              std::vector<std::string>(base.begin() + 1, base.begin() + 12))
        << "features of line " << i + 2;
    EXPECT_EQ(std::vector<std::string>(row.begin() + 13, row.end()),
              std::vector<std::string>(base.begin() + 13, base.end()))
        << "item_train_count and cold_user of line " << i + 2;
    const double p = Number(row[true_prob]), q = Number(base[true_prob]);
    ASSERT_TRUE(p > 0 && p < 1) << row[true_prob];
    moved += std::fabs(std::log(p / (1 - p)) - std::log(q / (1 - q)));
    labels_changed += row[0] != base[0];
    scored.emplace_back(static_cast<float>(p), row[0] == "1");
  }
  // With weight 1 the term's mean |value| is (2 / pi)^(3/2) ~ 0.51 (plus the shift of b0).
  EXPECT_GT(moved / test.rows.size(), 0.3);
  EXPECT_GT(labels_changed, test.rows.size() / 50);
  const std::string oracle = ReadFile(dir / "oracle.json");
  EXPECT_NEAR(Auc(scored), JsonField(oracle, "test_auc"), 2e-6) << oracle;
  EXPECT_EQ(JsonField(ReadFile(dir / "datagen.json"), "cross"), 1.0);
  EXPECT_TRUE(
      absl::StrContains(ReadFile(dir / "datagen.json"), "\"cross_fields\": \"user,item,hour\""));
  EXPECT_FALSE(absl::StrContains(ReadFile(Dir("a") / "datagen.json"), "cross"));
}

TEST(DatagenFlagsTest, HelpBadFlagsAndUnwritableOutput) {
  const RunResult help = RunDatagen({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(help.output, "usage: ember-datagen")) << help.output;
  EXPECT_TRUE(absl::StrContains(help.output, "--conversions")) << help.output;
  EXPECT_TRUE(absl::StrContains(help.output, "--cross")) << help.output;
  // Each: the arguments (split at spaces for RunDatagen) and what the first line says.
  const std::vector<UsageErrorCase> cases = {
      {"", "--out is required"},
      {"--out=/tmp/x --train_examples=abc", "--train_examples: bad number 'abc'"},
      {"--out=/tmp/x --train_examples=0", "--train_examples must be >= 1"},
      {"--out=/tmp/x --train_files=0", "--train_files must be in"},
      {"--out=/tmp/x --users=0", "--users must be in"},
      {"--out=/tmp/x --items=200000000", "--items must be in [1, 100000000]"},
      {"--out=/tmp/x --zipf=abc", "--zipf: bad number 'abc'"},
      {"--out=/tmp/x --zipf=-1", "--zipf must be in [0, 10]"},
      {"--out=/tmp/x --cold_user_fraction=1.5", "--cold_user_fraction must be in [0, 1]"},
      {"--out=/tmp/x --cross=-1", "--cross must be in [0, 10]"},
      {"--out=/tmp/x --cross=1 --cross_fields=user,planet",
       "--cross_fields: unknown field 'planet'"},
      {"--out=/tmp/x --cross=1 --cross_fields=user", "--cross_fields: want two or more fields"},
      {"--out=/tmp/x --cross=1 --cross_fields=hour,hour",
       "--cross_fields: field 'hour' appears twice"},
      {"--out=/tmp/x --gzip=maybe", "--gzip: expected true or false"},
      {"--out=/tmp/x --no_such_flag=1", "unknown flag --no_such_flag"},
      {"--out=/tmp/x stray", "unexpected argument 'stray'"},
  };
  ExpectUsageErrors(
      [](const std::string& args) {
        return RunDatagen(absl::StrSplit(args, ' ', absl::SkipEmpty()));
      },
      cases, UsageErrorChecks().FirstLinePrefix("ember-datagen: "));
  // A directory below a regular file cannot be created: exit 1, naming the path.
  const fs::path file = fs::path(testing::TempDir()) / absl::StrCat("datagen-file-", getpid());
  std::ofstream(file) << "x";
  const RunResult r = RunDatagen({absl::StrCat("--out=", (file / "data").string())});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, (file / "data").string())) << r.output;
  fs::remove(file);
}

}  // namespace
}  // namespace ember
