// Copyright 2026 The Ember Authors.
//
// `emberctl export` (tools/emberctl/commands_export.cc) as a real process against a
// real cluster on loopback (emberctl_fixture.h), its files read back with
// tools/emberctl/export_format.h and compared with what the shards serve; and the file
// format on its own (tombstones, corruption), since no RPC removes rows yet.

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/slot.h"
#include "gtest/gtest.h"
#include "server/store/row_layout.h"
#include "tests/support/deadline.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/usage_errors.h"
#include "tests/tools/emberctl_fixture.h"
#include "tools/emberctl/export_format.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using ctl::ExportFile;
using ctl::ExportFormat;
using ctl::ExportKind;
using ctl::ExportManifest;
using ctl::ExportRecord;
using ctl::RecordOp;
using ctl::ShardPosition;
using Table = std::map<uint64_t, std::vector<float>>;  // id -> embedding

constexpr uint32_t kDim = 4;  // the fixture's table "item" (SGD: no optimizer state)

// The rows of a finished export as id -> embedding (empty: a tombstone), each id once;
// fails the test when a file does not read back or an id repeats.
struct ReadBack {
  ExportManifest manifest;
  Table rows;
  uint64_t tombstones = 0;
};

ReadBack ReadExport(const std::string& dir) {
  ReadBack out;
  absl::StatusOr<ExportManifest> m = ctl::ReadExportManifest(dir);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return out;
  out.manifest = *m;
  for (const ShardPosition& shard : m->shards) {
    absl::StatusOr<ExportFile> f = ctl::ReadRowsFile(dir + "/" + shard.file, m->dim);
    EXPECT_TRUE(f.ok()) << f.status();
    if (!f.ok()) continue;
    EXPECT_EQ(f->records.size(), shard.records) << shard.file;
    for (const ExportRecord& r : f->records) {
      EXPECT_TRUE(out.rows.emplace(r.id, r.embedding).second) << "id " << r.id << " repeats";
      out.tombstones += r.op == RecordOp::kTombstone;
    }
  }
  return out;
}

// The table a serving system holds after applying the finished exports `dirs` in order
// to `start`.
Table Apply(const std::vector<std::string>& dirs, const Table& start = {}) {
  absl::flat_hash_map<uint64_t, std::vector<float>> table(start.begin(), start.end());
  for (const std::string& dir : dirs) {
    absl::StatusOr<ExportManifest> m = ctl::ReadExportManifest(dir);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return {};
    for (const ShardPosition& shard : m->shards) {
      absl::StatusOr<ExportFile> f = ctl::ReadRowsFile(dir + "/" + shard.file, m->dim);
      EXPECT_TRUE(f.ok()) << f.status();
      if (f.ok()) ctl::ApplyRecords(f->records, m->seed, &table);
    }
  }
  return Table(table.begin(), table.end());
}

std::set<uint64_t> IdsOf(const Table& table) {
  std::set<uint64_t> ids;
  for (const auto& [id, embedding] : table) ids.insert(id);
  return ids;
}

std::vector<uint64_t> ItemIds(uint64_t first, int count) {  // as EmberctlTest::PushRows
  std::vector<uint64_t> ids;
  for (int i = 0; i < count; ++i) ids.push_back((first + i) * 7919);
  return ids;
}

std::set<uint64_t> IdSet(uint64_t first, int count) {
  const std::vector<uint64_t> ids = ItemIds(first, count);
  return std::set<uint64_t>(ids.begin(), ids.end());
}

bool IsLastWritten(const std::string& dir, const std::string& name) {
  struct stat last {};
  if (stat((fs::path(dir) / name).c_str(), &last) != 0) return false;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    struct stat st {};
    if (stat(e.path().c_str(), &st) != 0) return false;
    if (st.st_mtim.tv_sec > last.st_mtim.tv_sec ||
        (st.st_mtim.tv_sec == last.st_mtim.tv_sec && st.st_mtim.tv_nsec > last.st_mtim.tv_nsec)) {
      return false;
    }
  }
  return true;
}

class EmberctlExportTest : public EmberctlTest {
 protected:
  // The shards' current embeddings of `ids` (pulled through the PS client; `client`:
  // another one's, e.g. a job's with a table of its own).
  Table Pulled(const std::set<uint64_t>& id_set, PsClient* client = nullptr) {
    const std::vector<uint64_t> ids(id_set.begin(), id_set.end());
    std::vector<float> values(ids.size() * kDim);
    const absl::Status s =
        (client != nullptr ? client : client_.get())->Pull("item", ids, absl::MakeSpan(values));
    EXPECT_TRUE(s.ok()) << s;
    Table rows;
    for (size_t i = 0; i < ids.size(); ++i) {
      rows[ids[i]].assign(values.begin() + i * kDim, values.begin() + (i + 1) * kDim);
    }
    return rows;
  }

  // Pushes one gradient to `count` ids of `job`'s own "item" from `first` on.
  static void PushJobRows(PsClient& job, uint64_t first, int count, int64_t step) {
    const std::vector<uint64_t> ids = ItemIds(first, count);
    const std::vector<float> grads(ids.size() * kDim, 0.5f);
    const absl::Status pushed = job.Push("item", ids, grads, step);
    ASSERT_TRUE(pushed.ok()) << pushed;
  }

  CtlResult Export(const std::string& dir, std::vector<std::string> more = {}) {
    more.insert(more.begin(), {"export", "--table=item", "--out=" + dir});
    return Ctl(more);
  }
};

TEST_F(EmberctlExportTest, BaseThenDeltasHoldExactlyTheShardsRows) {
  const std::string base = dir_ + "/base";
  CtlResult r = Export(base, {"--json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"kind\":\"base\"")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"records\":200,")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err, "export: shard 1: ")) << r;
  EXPECT_TRUE(IsLastWritten(base, "_DONE"));
  EXPECT_FALSE(fs::exists(base + "/_DONE.tmp"));

  ReadBack b = ReadExport(base);
  EXPECT_EQ(b.manifest.kind, ExportKind::kBase);
  EXPECT_EQ(b.manifest.dim, kDim);
  EXPECT_EQ(b.manifest.row_meta_bytes, sizeof(RowMeta));
  EXPECT_EQ(b.manifest.state_floats, 0u);
  ASSERT_EQ(b.manifest.shards.size(), size_t{kCtlShards});
  for (int i = 0; i < kCtlShards; ++i) {
    const ShardPosition& p = b.manifest.shards[i];
    EXPECT_EQ(p.shard_id, static_cast<uint32_t>(i));
    EXPECT_EQ(p.address, ps_address_[i]);
    EXPECT_NE(p.stream_id, 0u);
    EXPECT_LE(p.version, ShardInfo(i).version());
    EXPECT_GT(p.records, 0u);  // 200 rows over 2 x 8192 slots
  }
  EXPECT_EQ(b.rows, Pulled(IdSet(1, 200)));
  EXPECT_EQ(b.tombstones, 0u);

  // 51 of the rows change, 49 are new: the delta holds exactly those, as served now.
  ASSERT_NO_FATAL_FAILURE(PushRows(150, 100));
  const std::string delta = dir_ + "/delta1";
  r = Export(delta, {"--since=" + base});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StartsWith(r.out, "delta export of table 'item' in " + delta + ": 100 records"))
      << r;
  ReadBack d = ReadExport(delta);
  EXPECT_EQ(d.manifest.kind, ExportKind::kDelta);
  EXPECT_EQ(d.manifest.since_dir, base);
  EXPECT_EQ(d.rows, Pulled(IdSet(150, 100)));
  EXPECT_EQ(d.tombstones, 0u);
  for (int i = 0; i < kCtlShards; ++i) {
    EXPECT_EQ(d.manifest.shards[i].stream_id, b.manifest.shards[i].stream_id);
    EXPECT_EQ(d.manifest.shards[i].version, ShardInfo(i).version());
  }

  // Nothing changed since: an empty delta at the same positions.
  const std::string delta2 = dir_ + "/delta2";
  r = Export(delta2, {"--since=" + delta, "--format=text"});
  ASSERT_EQ(r.exit_code, 0) << r;
  ReadBack e = ReadExport(delta2);
  EXPECT_TRUE(e.rows.empty());
  for (int i = 0; i < kCtlShards; ++i) {
    EXPECT_EQ(e.manifest.shards[i].version, d.manifest.shards[i].version);
    EXPECT_EQ(e.manifest.shards[i].file, absl::StrCat("rows-shard-", i, ".tsv"));
  }

  // --since=VERSION: every shard from version 0 on (each shard's whole history here).
  r = Export(dir_ + "/from0", {"--since=0"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(ReadExport(dir_ + "/from0").rows, Pulled(IdSet(1, 249)));
}

// Pushes windows of 30 ids of "item" (among the first 430) in a loop on its own thread,
// from construction until Stop.
class Pusher {
 public:
  Pusher(PsClient* client, uint64_t first_step) {
    thread_ = std::thread([this, client, first_step] {
      for (uint64_t k = first_step; !stop_.load(); ++k) {
        const std::vector<uint64_t> ids = ItemIds(1 + (k * 37) % 400, 30);
        const std::vector<float> grads(ids.size() * kDim, 0.01f * static_cast<float>(k % 7 + 1));
        error_ = client->Push("item", ids, grads, static_cast<int64_t>(k));
        if (!error_.ok()) break;
        ids_.insert(ids.begin(), ids.end());
        pushes_.fetch_add(1);
      }
      done_.store(true);
    });
  }
  ~Pusher() { Stop().IgnoreError(); }

  // True once `n` more pushes than `since` are applied, or the pusher failed.
  bool WaitFor(int since, int n) {
    return Eventually([&] { return pushes_.load() >= since + n || done_.load(); });
  }
  int pushes() const { return pushes_.load(); }
  // Joins; the first push error. Then ids() holds every id pushed.
  absl::Status Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    return error_;
  }
  const std::set<uint64_t>& ids() const { return ids_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<int> pushes_{0};
  absl::Status error_;      // written by the thread, read after join
  std::set<uint64_t> ids_;  // likewise
  std::thread thread_;
};

// Exports taken while a worker pushes, with tiny pages and stream messages (--max_rows=7):
// the base plus the deltas applied in order are exactly what the shards serve afterwards.
TEST_F(EmberctlExportTest, BasePlusDeltasTakenDuringPushesEqualTheShards) {
  std::set<uint64_t> pushed = IdSet(1, 200);
  auto check = [&](const std::vector<std::string>& dirs) {
    const Table table = Apply(dirs);
    EXPECT_EQ(IdsOf(table), pushed);
    EXPECT_EQ(table, Pulled(IdsOf(table)));
  };
  const std::string base = dir_ + "/base";
  const std::string d1 = dir_ + "/d1";
  const std::string d2 = dir_ + "/d2";
  const std::string d3 = dir_ + "/d3";

  // A base taken while rows change, then a delta after the pushes stopped: rows changed
  // after their page was read reach the serving side only through the delta, which
  // holds them only if the base's position is early enough.
  Pusher during_base(client_.get(), 2);
  ASSERT_TRUE(during_base.WaitFor(0, 5));
  const int before = during_base.pushes();
  CtlResult r = Export(base, {"--max_rows=7"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_GT(during_base.pushes(), before);
  ASSERT_TRUE(during_base.Stop().ok());
  pushed.insert(during_base.ids().begin(), during_base.ids().end());
  r = Export(d1, {"--since=" + base, "--max_rows=7"});
  ASSERT_EQ(r.exit_code, 0) << r;
  check({base, d1});

  // A delta streamed while rows change, then one more after they stopped.
  Pusher during_delta(client_.get(), 100000);
  ASSERT_TRUE(during_delta.WaitFor(0, 5));
  r = Export(d2, {"--since=" + d1, "--max_rows=7"});
  EXPECT_EQ(r.exit_code, 0) << r;
  ASSERT_TRUE(during_delta.Stop().ok());
  pushed.insert(during_delta.ids().begin(), during_delta.ids().end());
  r = Export(d3, {"--since=" + d2, "--max_rows=7"});
  ASSERT_EQ(r.exit_code, 0) << r;
  check({base, d1, d2, d3});
}

// Rows of slots that move to another shard between two exports reach the delta through
// the new owner's slot resync (ps.proto UpdateBatch.resync): the old owner's stream
// leaves them out once it no longer owns them.
TEST_F(EmberctlExportTest, DeltaAcrossASlotMoveEqualsTheShards) {
  const std::string base = dir_ + "/base";
  ASSERT_EQ(Export(base).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(PushRows(1, 200));  // changes every row, moved ones included
  ASSERT_NO_FATAL_FAILURE(PushRows(300, 30));
  CtlResult r = Ctl({"slots", "move", "--slots=0-4095", "--to=1"});
  ASSERT_EQ(r.exit_code, 0) << r;
  ASSERT_NO_FATAL_FAILURE(PushRows(1, 50));
  const std::string delta = dir_ + "/delta";
  r = Export(delta, {"--since=" + base, "--format=text"});
  ASSERT_EQ(r.exit_code, 0) << r;

  std::set<uint64_t> pushed = IdSet(1, 200);
  for (uint64_t id : IdSet(300, 30)) pushed.insert(id);
  // A row of a moved slot that the shards no longer hold (as if evicted on the old
  // owner while the move ran): the new owner's resync sweep removes it.
  Table served = Apply({base});
  uint64_t stale = 1;
  while (SlotOf(42, stale) > 4095 || served.contains(stale)) ++stale;
  served[stale] = {1, 2, 3, 4};
  const Table table = Apply({delta}, served);
  EXPECT_EQ(IdsOf(table), pushed);
  EXPECT_EQ(table, Pulled(pushed));
  absl::StatusOr<ExportManifest> m = ctl::ReadExportManifest(delta);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->shards[0].sweeps, 0u);
  EXPECT_GE(m->shards[1].sweeps, 1u);  // shard 1 gained 0-4095 (in one or more moves)
}

// The same for a job's own table: the move carries the job's store, and the target's
// stream of that store resyncs the slots it gained.
TEST_F(EmberctlExportTest, AJobsDeltaAcrossASlotMoveEqualsTheShards) {
  std::unique_ptr<PsClient> own = JobWithItemTable("own-job", kDim);
  ASSERT_NE(own, nullptr);
  ASSERT_NO_FATAL_FAILURE(PushJobRows(*own, 1, 200, 1));
  const std::string base = dir_ + "/job-base";
  ASSERT_EQ(Export(base, {"--job=own-job"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(PushJobRows(*own, 1, 200, 2));  // every row, moved ones included
  ASSERT_NO_FATAL_FAILURE(PushJobRows(*own, 300, 30, 3));
  CtlResult r = Ctl({"slots", "move", "--slots=0-4095", "--to=1"});
  ASSERT_EQ(r.exit_code, 0) << r;
  ASSERT_NO_FATAL_FAILURE(PushJobRows(*own, 1, 50, 4));
  const std::string delta = dir_ + "/job-delta";
  r = Export(delta, {"--job=own-job", "--since=" + base});
  ASSERT_EQ(r.exit_code, 0) << r;

  std::set<uint64_t> pushed = IdSet(1, 200);
  for (uint64_t id : IdSet(300, 30)) pushed.insert(id);
  const Table table = Apply({base, delta});
  EXPECT_EQ(IdsOf(table), pushed);
  EXPECT_EQ(table, Pulled(pushed, own.get()));
  absl::StatusOr<ExportManifest> m = ctl::ReadExportManifest(delta);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GE(m->shards[1].sweeps, 1u);  // shard 1 gained 0-4095 in the job's store too
}

// A job's own table (--own_tables) is read from the job's store on every shard, with
// the job's positions; a shard that restored any store since it started still exports
// (the pages name the shard's count of restores that GetShardInfo gave).
TEST_F(EmberctlExportTest, AJobsOwnTableExportsFromTheJobsStore) {
  std::unique_ptr<PsClient> own = JobWithItemTable("own-job", kDim);
  ASSERT_NE(own, nullptr);
  ASSERT_NO_FATAL_FAILURE(PushJobRows(*own, 1000, 60, 1));
  // Another job's fresh start on shard 0: its count of restores is 1 from now on.
  v1::RestoreShardRequest restore;
  restore.set_job("other-job");
  restore.set_attempt(1);
  restore.set_clear(true);
  const v1::GetClusterMapResponse map = ClusterMap();
  restore.set_epoch(map.epoch());
  restore.set_slot_owners(map.slot_owners());
  v1::RestoreShardResponse restored;
  {
    grpc::ClientContext context;
    context.AddMetadata("ember-admin-token", kCtlToken);
    SetDeadline(&context);
    const grpc::Status s = ps_stub_[0]->RestoreShard(&context, restore, &restored);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_GT(ShardInfo(0).restores(), 0u);

  const std::string base = dir_ + "/job-base";
  CtlResult r = Export(base, {"--job=own-job"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StartsWith(
      r.out, "base export of table 'item' of job 'own-job' in " + base + ": 60 records"))
      << r;
  ReadBack b = ReadExport(base);
  EXPECT_EQ(b.manifest.job, "own-job");
  EXPECT_EQ(b.rows, Pulled(IdSet(1000, 60), own.get())) << "the job's rows, not the shared table's";

  ASSERT_NO_FATAL_FAILURE(PushJobRows(*own, 1050, 20, 2));
  const std::string delta = dir_ + "/job-delta";
  r = Export(delta, {"--job=own-job", "--since=" + base});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(ReadExport(delta).rows, Pulled(IdSet(1050, 20), own.get()));
  // The shared table's export is unchanged by the job's rows.
  r = Export(dir_ + "/shared");
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, ": 200 records")) << r;

  // A delta of another table than its base's, and jobs without the table.
  r = Export(dir_ + "/mixed", {"--since=" + base});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "a table of job 'own-job', not a shared table")) << r;
  r = Export(dir_ + "/none", {"--job=no-such-job"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "job 'no-such-job' has no table 'item'")) << r;
  r = Export(dir_ + "/bad", {"--job=.."});
  EXPECT_EQ(r.exit_code, 2) << r;
}

TEST_F(EmberctlExportTest, TextFormatReadsBackAsTheBinary) {
  CtlResult r = Export(dir_ + "/bin");
  ASSERT_EQ(r.exit_code, 0) << r;
  r = Export(dir_ + "/text", {"--format=text"});
  ASSERT_EQ(r.exit_code, 0) << r;
  ReadBack text = ReadExport(dir_ + "/text");
  EXPECT_EQ(text.manifest.format, ExportFormat::kText);
  EXPECT_EQ(text.rows.size(), 200u);
  EXPECT_EQ(text.rows, ReadExport(dir_ + "/bin").rows);  // exact: floats round-trip
  std::ifstream in(dir_ + "/text/rows-shard-0.tsv");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_TRUE(absl::StrContains(line, "\tput\t")) << line;
}

// The example reader of docs/EXPORT_FORMAT.md, as the page has it, plus a main that
// applies the export directories of argv and prints "id v0,v1,..." per row.
std::string DocumentedReader() {
  std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/docs/EXPORT_FORMAT.md");
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t section = page.find("## Example reader");
  const size_t begin = page.find("```python\n", section);
  const size_t end = page.find("\n```", begin);
  if (section == std::string::npos || begin == std::string::npos || end == std::string::npos) {
    return "";
  }
  std::string code = page.substr(begin + 10, end - begin - 10);
  code = code.substr(0, code.find("\ntable = {}"));  // the page's own usage lines
  return code + R"(
import sys
table = {}
for d in sys.argv[1:]:
    apply_export(d, table)
for row_id in sorted(table):
    print(row_id, ",".join(repr(v) for v in table[row_id]))
)";
}

TEST_F(EmberctlExportTest, TheDocumentedPythonReaderReadsBothFormats) {
  const std::string code = DocumentedReader();
  ASSERT_NE(code.find("def apply_export"), std::string::npos) << "the page's reader moved";
  const std::string script = dir_ + "/reader.py";
  std::ofstream(script) << code;
  CtlResult r = Export(dir_ + "/base");
  ASSERT_EQ(r.exit_code, 0) << r;
  ASSERT_NO_FATAL_FAILURE(PushRows(150, 100));
  r = Export(dir_ + "/delta", {"--since=" + dir_ + "/base", "--format=text"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::string command =
      absl::StrCat("/usr/bin/python3 ", script, " ", dir_, "/base ", dir_, "/delta 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << output;
  Table read;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    ASSERT_EQ(parts.size(), 2u) << line;
    std::vector<float>& row = read[std::stoull(parts[0])];
    for (absl::string_view v : absl::StrSplit(parts[1], ',')) {
      row.push_back(static_cast<float>(std::stod(std::string(v))));  // exact: float32 values
    }
  }
  const Table expected = Apply({dir_ + "/base", dir_ + "/delta"});
  EXPECT_EQ(read.size(), 249u);  // ids 1..249
  EXPECT_EQ(read, expected);
}

TEST_F(EmberctlExportTest, RefusesAFinishedExportAndStalePositions) {
  const std::string base = dir_ + "/base";
  ASSERT_EQ(Export(base).exit_code, 0);
  CtlResult r = Export(base);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "holds a finished export (_DONE)")) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "--overwrite")) << r;
  r = Export(base, {"--overwrite"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(ReadExport(base).rows.size(), 200u);

  r = Export(base, {"--since=" + base, "--overwrite"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "same directory")) << r;

  // A position on a stream the shard is not on (as after a restart): a new base needed.
  absl::StatusOr<ExportManifest> m = ctl::ReadExportManifest(base);
  ASSERT_TRUE(m.ok()) << m.status();
  m->shards[1].stream_id ^= 0x5a5a;
  const std::string stale = dir_ + "/stale";
  fs::create_directories(stale);
  ASSERT_TRUE(ctl::WriteFileSynced(stale + "/positions.json", ctl::ManifestJson(*m)).ok());
  ASSERT_TRUE(ctl::WriteDoneMarker(stale, "{}\n").ok());
  r = Export(dir_ + "/after_stale", {"--since=" + stale});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "shard 1")) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "take a new base export")) << r;
  EXPECT_FALSE(fs::exists(dir_ + "/after_stale/_DONE"));

  fs::remove(stale + "/_DONE");
  r = Export(dir_ + "/after_unfinished", {"--since=" + stale});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "is not a finished export")) << r;
}

TEST_F(EmberctlExportTest, UsageAndTableErrors) {
  // Each exits 2 with one line and a hint on stderr (the arguments split at spaces).
  ExpectUsageErrors(
      [this](const std::string& args) {
        const CtlResult r = Ctl(absl::StrSplit(args, ' ', absl::SkipEmpty()));
        return RunResult{r.exit_code, r.err};
      },
      {{"export --out=/tmp/x", ""},
       {"export --table=item", ""},
       {"export --table=item --out=/tmp/x --format=parquet", ""},
       {"export --table=item --out=/tmp/x --since=", ""},
       {"export --table=item --out=/tmp/x --bogus=1", ""},
       {"export --table=item --out=/tmp/x positional", ""}},
      UsageErrorChecks().MessageAnywhere().HintOnly("see 'emberctl export --help'"));
  CtlResult r = Ctl({"export", "--table=nope", "--out=" + dir_ + "/nope"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "table 'nope' does not exist")) << r;
  EXPECT_FALSE(fs::exists(dir_ + "/nope"));

  r = Ctl({"export", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "EXPORT_FORMAT.md")) << r;
  r = Ctl({"--help"});
  EXPECT_TRUE(absl::StrContains(r.out, "export --table=T --out=DIR")) << r;
}

// ---- The file format alone ----

std::string StoredRow(uint64_t version, const std::vector<float>& embedding, int state_floats) {
  RowMeta meta;
  meta.version = version;
  std::string row(reinterpret_cast<const char*>(&meta), sizeof(meta));
  row.append(reinterpret_cast<const char*>(embedding.data()), embedding.size() * sizeof(float));
  row.append(state_floats * sizeof(float), '\x7f');
  return row;
}

void AddRow(uint64_t id, const std::string& value, v1::RowBlock* block) {  // ps.proto RowBlock
  const uint32_t n = static_cast<uint32_t>(value.size());
  block->mutable_rows()->append(reinterpret_cast<const char*>(&id), sizeof(id));
  block->mutable_rows()->append(reinterpret_cast<const char*>(&n), sizeof(n));
  block->mutable_rows()->append(value);
  block->set_count(block->count() + 1);
}

class ExportFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok()) << scratch_.error();
    dir_ = scratch_.path();
    header_.kind = ExportKind::kDelta;
    header_.table = "item";
    header_.shard_id = 3;
    header_.dim = 2;
    header_.row_meta_bytes = sizeof(RowMeta);
    header_.state_floats = 2;
    header_.seed = 42;
    AddRow(7, StoredRow(5, {1.5f, -0.25f}, 2), &block_);
    AddRow(9, "", &block_);  // a tombstone
    AddRow(uint64_t{1} << 63, StoredRow(6, {3e-8f, 1e30f}, 2), &block_);
  }
  std::string Write(ExportFormat format) {
    const std::string path = dir_ + "/" + ctl::RowsFileName(header_.shard_id, format);
    auto w = ctl::ExportFileWriter::Create(path, format, header_);
    EXPECT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE((*w)->ResyncBegin(5, 9).ok());
    EXPECT_TRUE((*w)->AddStoredRows(block_).ok());
    EXPECT_TRUE((*w)->ResyncSweep(5, 9).ok());
    EXPECT_TRUE((*w)->Finish().ok());
    EXPECT_EQ((*w)->records(), 5u);
    EXPECT_EQ((*w)->tombstones(), 1u);
    EXPECT_EQ((*w)->sweeps(), 1u);
    return path;
  }

  ScratchDir scratch_{"export_format_test"};
  std::string dir_;
  ctl::ExportHeader header_;
  v1::RowBlock block_;
};

TEST_F(ExportFormatTest, EveryRecordKindRoundTripsInBothFormats) {
  for (ExportFormat format : {ExportFormat::kBinary, ExportFormat::kText}) {
    absl::StatusOr<ExportFile> f = ctl::ReadRowsFile(Write(format), 2);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_EQ(f->records.size(), 5u);
    EXPECT_EQ(f->records[0].op, RecordOp::kResyncBegin);
    EXPECT_EQ(ctl::FirstSlot(f->records[0]), 5u);
    EXPECT_EQ(ctl::LastSlot(f->records[0]), 9u);
    EXPECT_EQ(f->records[1].id, 7u);
    EXPECT_EQ(f->records[1].op, RecordOp::kPut);
    EXPECT_EQ(f->records[1].embedding, (std::vector<float>{1.5f, -0.25f}));
    EXPECT_EQ(f->records[2].id, 9u);
    EXPECT_EQ(f->records[2].op, RecordOp::kTombstone);
    EXPECT_TRUE(f->records[2].embedding.empty());
    EXPECT_EQ(f->records[3].id, uint64_t{1} << 63);
    EXPECT_EQ(f->records[3].embedding, (std::vector<float>{3e-8f, 1e30f}));
    EXPECT_EQ(f->records[4].op, RecordOp::kResyncSweep);
    EXPECT_EQ(f->records[4].id, ctl::SlotRangeId(5, 9));
    if (format == ExportFormat::kBinary) {
      EXPECT_EQ(f->header.kind, ExportKind::kDelta);
      EXPECT_EQ(f->header.table, "item");
      EXPECT_EQ(f->header.shard_id, 3u);
      EXPECT_EQ(f->header.row_meta_bytes, sizeof(RowMeta));
      EXPECT_EQ(f->header.state_floats, 2u);
      EXPECT_EQ(f->header.seed, 42u);
    }
  }
}

TEST_F(ExportFormatTest, BinaryLayoutIsTheDocumentedOne) {
  std::ifstream in(Write(ExportFormat::kBinary), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t header = 40 + 4;  // fixed part + "item"
  ASSERT_EQ(bytes.size(), header + 9 + (9 + 8) + 9 + (9 + 8) + 9 + 16);
  EXPECT_EQ(bytes.substr(0, 8), "EMBEXPT1");
  EXPECT_EQ(bytes[8], static_cast<char>(header));
  EXPECT_EQ(bytes[12], 2);   // delta
  EXPECT_EQ(bytes[32], 42);  // seed
  EXPECT_EQ(bytes.substr(40, 4), "item");
  EXPECT_EQ(bytes[header], 9);                     // the range 5 << 32 | 9: last (low half)
  EXPECT_EQ(bytes[header + 4], 5);                 // first (high half)
  EXPECT_EQ(bytes[header + 8], 3);                 // resync begin
  EXPECT_EQ(bytes[header + 9], 7);                 // the put's id, little-endian
  EXPECT_EQ(bytes[header + 9 + 8], 1);             // put
  EXPECT_EQ(bytes[header + 9 + 17 + 8], 2);        // tombstone
  EXPECT_EQ(bytes[bytes.size() - 16 - 9 + 8], 4);  // resync sweep
  EXPECT_EQ(bytes[bytes.size() - 16], 5);          // record count
  EXPECT_EQ(bytes.substr(bytes.size() - 4), "EXND");
}

TEST_F(ExportFormatTest, CorruptionAndBadRowsAreErrors) {
  const std::string path = Write(ExportFormat::kBinary);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  auto read_with = [&](const std::string& content) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    return ctl::ReadRowsFile(path).status();
  };
  for (size_t at : {size_t{32}, size_t{50}}) {  // the header's seed; the first record
    std::string flipped = bytes;
    flipped[at] ^= 1;
    EXPECT_EQ(read_with(flipped).code(), absl::StatusCode::kDataLoss) << at;
  }
  EXPECT_EQ(read_with(bytes.substr(0, bytes.size() - 5)).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read_with("EMBEXPT2" + bytes.substr(8)).code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(read_with(bytes).ok());
  EXPECT_EQ(ctl::ReadRowsFile(path, /*dim=*/3).status().code(), absl::StatusCode::kDataLoss);

  v1::RowBlock bad;
  AddRow(1, StoredRow(1, {1, 2}, 1), &bad);  // one state float short
  auto w = ctl::ExportFileWriter::Create(dir_ + "/bad.bin", ExportFormat::kBinary, header_);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->AddStoredRows(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*w)->records(), 0u);
}

TEST(ApplyRecordsTest, PutsTombstonesAndSweeps) {
  const uint64_t seed = 42;
  const uint32_t s2 = SlotOf(seed, 2);
  ASSERT_NE(SlotOf(seed, 1), s2);
  ASSERT_NE(SlotOf(seed, 3), s2);
  absl::flat_hash_map<uint64_t, std::vector<float>> table = {{1, {1}}, {2, {2}}, {3, {3}}};
  const std::vector<ExportRecord> records = {
      {4, RecordOp::kPut, {4}},
      {3, RecordOp::kTombstone, {}},
      {ctl::SlotRangeId(s2, s2), RecordOp::kResyncBegin, {}},
      {1, RecordOp::kPut, {10}},
      {ctl::SlotRangeId(s2, s2), RecordOp::kResyncSweep, {}},  // 2 was not re-sent: gone
  };
  ctl::ApplyRecords(records, seed, &table);
  EXPECT_EQ(Table(table.begin(), table.end()), (Table{{1, {10}}, {4, {4}}}));
  // A resync that re-sent the row keeps it.
  table = {{2, {2}}};
  ctl::ApplyRecords({{ctl::SlotRangeId(s2, s2), RecordOp::kResyncBegin, {}},
                     {2, RecordOp::kPut, {20}},
                     {ctl::SlotRangeId(0, kNumSlots - 1), RecordOp::kResyncSweep, {}}},
                    seed, &table);
  EXPECT_EQ(Table(table.begin(), table.end()), (Table{{2, {20}}}));
}

TEST(ExportManifestTest, JsonRoundTripKeepsLargeStreamIds) {
  ExportManifest m;
  m.table = "item";
  m.kind = ExportKind::kDelta;
  m.format = ExportFormat::kText;
  m.dim = 8;
  m.row_meta_bytes = 24;
  m.state_floats = 16;
  m.since_dir = "/exports/base \"1\"";
  m.seed = ~uint64_t{0};
  m.shards.push_back({0, "10.0.0.1:7000", 0xfedcba9876543210ull, 123456789, 10, 2, 1, "f0"});
  m.shards.push_back({5, "10.0.0.2:7000", 1, 0, 0, 0, 0, "f5"});
  const std::string json = ctl::ManifestJson(m);
  EXPECT_TRUE(absl::StrContains(json, "\"stream_id\":\"18364758544493064720\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"seed\":\"18446744073709551615\"")) << json;
  absl::StatusOr<ExportManifest> back = ctl::ParseManifestJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ctl::ManifestJson(*back), json);
  EXPECT_FALSE(back->since_version.has_value());
  EXPECT_EQ(ctl::ParseManifestJson("{\"format\":\"EMBEXPT1\"}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ctl::ParseManifestJson("not json").ok());
}

}  // namespace
}  // namespace ember
