// Copyright 2026 The Ember Authors.
//
// `export`: the rows of one table as files for offline serving systems, a BASE (every
// stored row) or a DELTA (every row changed or removed since a previous export), with
// per-shard positions on the shards' update streams and a _DONE marker written last.
// The files are described in export_format.h and docs/EXPORT_FORMAT.md.
//
// Base, per shard:
//  1. GetShardInfo: the shard's version V0, its process (incarnation) and job attempt.
//  2. WatchUpdates(any_stream, after V0): the first message names the stream S that V0
//     belongs to; (S, V0) is a position the shard accepted.
//  3. ExportRows over each slot range the shard owns, every page checking the process
//     and attempt of step 1 (ABORTED after a restart or restore). The first page records
//     the shard's version V >= V0 and writes dirty rows back; every page then holds each
//     row as of V or newer. So position (S, V of the first range) is at or below every
//     exported row's version: a later delta re-sends rows exported with newer values
//     (harmless) and misses no change.
//  4. WatchUpdates(S, V) again: the position is still resumable, so no restart or
//     restore happened since step 2 and the change log still reaches V.
// Delta, per shard: WatchUpdates(the previous position, stop_when_caught_up, table T):
// every message's rows are the current values of changed rows or tombstones, and a
// slot resync (the shard gained slots in a move) becomes resync records (export_format.h);
// the last message's (stream_id, to_version) is the new position. OUT_OF_RANGE (the shard
// restarted, restored a checkpoint, or its change log moved past the position) fails
// the export: only a new base export can continue.
// Both: shards are read one after another, so the slot map's epoch must be the same at
// the end as at the start (no slot moved in between), or the export fails (ABORTED).

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/admin_auth.h"
#include "common/grpc_status.h"
#include "common/job_name.h"
#include "common/ps_client_cluster.h"
#include "common/slot_ranges.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "server/store/row_layout.h"
#include "server/store/table_config.h"
#include "tools/emberctl/cli.h"
#include "tools/emberctl/export_format.h"

namespace ember::ctl {
namespace {

namespace fs = std::filesystem;

// One ExportRows page or WatchUpdates message aims at this many bytes of rows.
constexpr size_t kMessageBudget = 16 << 20;
constexpr uint32_t kMaxRowsPerMessage = 65536;
constexpr int kMaxReceiveBytes = 64 << 20;
constexpr absl::Duration kProgressInterval = absl::Seconds(1);

struct ExportOptions {
  std::string table;
  std::string job;  // a job's own table (its store on every shard); empty: shared
  std::string out;
  ExportFormat format = ExportFormat::kBinary;
  std::string since_dir;                  // delta from a previous export's positions
  std::optional<uint64_t> since_version;  // delta from one version on every shard
  bool overwrite = false;
  int64_t watch_timeout_ms = 600000;  // deadline of one shard's delta stream
  uint32_t max_rows = 0;              // per page or message; 0: what fits kMessageBudget
};

// What every shard's export needs to know.
struct Plan {
  ExportOptions options;
  ExportHeader header;  // shard_id filled in per shard
  uint32_t rows_per_message = 0;
};

// PsService calls of one shard: ExportRows (with the admin token) and WatchUpdates.
// Errors are the RPC's status, prefixed "shard N (ADDRESS): PsService.Method: ".
class ShardRpc {
 public:
  ShardRpc(const v1::ShardInfo& shard, const ClientOptions& options)
      : options_(options),
        where_(absl::StrCat("shard ", shard.shard_id(), " (", shard.address(), ")")) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
    stub_ = v1::PsService::NewStub(
        grpc::CreateCustomChannel(shard.address(), OrInsecure(options.channel_credentials), args));
  }

  const std::string& where() const { return where_; }

  absl::StatusOr<v1::ExportRowsResponse> ExportRows(const v1::ExportRowsRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
    if (!options_.admin_token.empty()) {
      context.AddMetadata(kAdminTokenMetadataKey, options_.admin_token);
    }
    v1::ExportRowsResponse response;
    const absl::Status s =
        FromGrpcStatus(stub_->ExportRows(&context, request, &response), &context);
    if (s.code() == absl::StatusCode::kUnauthenticated) {
      return Annotate(s, absl::StrCat("ExportRows", options_.admin_token.empty()
                                                        ? " (the shard needs the admin token: pass "
                                                          "--admin_token_file=FILE or "
                                                          "--admin_token=TOKEN, or set "
                                                          "EMBER_ADMIN_TOKEN_FILE)"
                                                        : " (check the admin token)"));
    }
    if (!s.ok()) return Annotate(s, "ExportRows");
    return response;
  }

  // Streams WatchUpdates(request), calling on_batch for each message, until the shard
  // ends the stream or on_batch sets *stop (the call is then cancelled: OK). An error of
  // on_batch cancels the call and is returned as is.
  absl::Status Watch(
      const v1::WatchUpdatesRequest& request, absl::Duration timeout,
      const std::function<absl::Status(const v1::UpdateBatch& batch, bool* stop)>& on_batch) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    std::unique_ptr<grpc::ClientReader<v1::UpdateBatch>> reader =
        stub_->WatchUpdates(&context, request);
    v1::UpdateBatch batch;
    bool stop = false;
    absl::Status callback_status;
    while (!stop && callback_status.ok() && reader->Read(&batch)) {
      callback_status = on_batch(batch, &stop);
    }
    if (stop || !callback_status.ok()) context.TryCancel();
    const absl::Status s = FromGrpcStatus(reader->Finish(), &context);
    if (!callback_status.ok()) return callback_status;
    if (stop) return absl::OkStatus();
    return s.ok() ? s : Annotate(s, "WatchUpdates");
  }

 private:
  absl::Status Annotate(const absl::Status& s, absl::string_view method) const {
    return absl::Status(s.code(), absl::StrCat(where_, ": PsService.", method, ": ", s.message()));
  }

  const ClientOptions options_;
  const std::string where_;
  std::unique_ptr<v1::PsService::Stub> stub_;
};

// "export: shard 0: 40960 records" on stderr, at most once per kProgressInterval.
class Progress {
 public:
  explicit Progress(Session& s) : s_(s) {}
  void Records(uint32_t shard, uint64_t records) {
    if (absl::Now() - last_ < kProgressInterval) return;
    last_ = absl::Now();
    *s_.err << "export: shard " << shard << ": " << records << " records so far" << std::endl;
  }
  void Done(const ShardPosition& p) {
    *s_.err << "export: shard " << p.shard_id << ": " << p.records << " records (" << p.tombstones
            << " tombstones); position stream " << p.stream_id << " version " << p.version
            << std::endl;
  }

 private:
  Session& s_;
  absl::Time last_ = absl::Now();
};

uint32_t RowsPerMessage(const ExportHeader& h) {
  const size_t row = sizeof(uint64_t) + sizeof(uint32_t) + RowBytes(h.dim + h.state_floats);
  return static_cast<uint32_t>(std::clamp<size_t>(kMessageBudget / row, 1, kMaxRowsPerMessage));
}

absl::StatusOr<std::unique_ptr<ExportFileWriter>> NewWriter(const Plan& plan,
                                                            const v1::ShardInfo& shard) {
  ExportHeader header = plan.header;
  header.shard_id = shard.shard_id();
  return ExportFileWriter::Create(
      (fs::path(plan.options.out) / RowsFileName(shard.shard_id(), plan.options.format)).string(),
      plan.options.format, header);
}

// Writes the rows of `block` (which must be of the exported table).
absl::Status AddBlock(const Plan& plan, const ShardRpc& rpc, const v1::RowBlock& block,
                      ExportFileWriter* writer) {
  if (block.table() != plan.options.table) {
    return absl::InternalError(absl::StrCat(rpc.where(), " sent rows of table '", block.table(),
                                            "' for an export of '", plan.options.table, "'"));
  }
  absl::Status s = writer->AddStoredRows(block);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(rpc.where(), ": ", s.message()));
  return s;
}

ShardPosition PositionOf(const v1::ShardInfo& shard, uint64_t stream_id, uint64_t version) {
  ShardPosition p;
  p.shard_id = shard.shard_id();
  p.address = shard.address();
  p.stream_id = stream_id;
  p.version = version;
  return p;
}

// The first message of WatchUpdates(request): the shard accepted the position.
absl::StatusOr<v1::UpdateBatch> FirstBatch(Session& s, ShardRpc& rpc,
                                           v1::WatchUpdatesRequest request) {
  request.set_max_rows(1);
  request.set_stop_when_caught_up(true);
  std::optional<v1::UpdateBatch> first;
  const absl::Status watched = rpc.Watch(request, absl::Milliseconds(s.options.timeout_ms),
                                         [&](const v1::UpdateBatch& batch, bool* stop) {
                                           first = batch;
                                           *stop = true;
                                           return absl::OkStatus();
                                         });
  EMBER_RETURN_IF_ERROR(watched);
  if (!first.has_value()) {
    return absl::UnavailableError(absl::StrCat(rpc.where(), ": WatchUpdates ended at once"));
  }
  return *first;
}

absl::StatusOr<ShardPosition> BaseShard(Session& s, const Plan& plan, const v1::ShardInfo& shard,
                                        const std::vector<v1::SlotRange>& ranges,
                                        Progress& progress) {
  ShardRpc rpc(shard, s.client->options());
  EMBER_ASSIGN_OR_RETURN(const v1::GetShardInfoResponse info,
                         s.client->GetShardInfo(shard.address(), plan.options.job));
  v1::WatchUpdatesRequest watch;
  watch.set_job(plan.options.job);
  watch.set_any_stream(true);
  watch.set_after_version(info.version());
  watch.add_tables(plan.options.table);
  EMBER_ASSIGN_OR_RETURN(const v1::UpdateBatch first, FirstBatch(s, rpc, watch));
  ShardPosition p = PositionOf(shard, first.stream_id(), info.version());

  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ExportFileWriter> writer, NewWriter(plan, shard));
  bool first_page = true;
  for (const v1::SlotRange& range : ranges) {
    v1::ExportRowsRequest request;
    request.set_job(plan.options.job);
    request.set_table(plan.options.table);
    *request.mutable_range() = range;
    request.set_max_rows(plan.rows_per_message);
    request.set_incarnation(info.incarnation());
    request.set_attempt(info.attempt());
    request.set_restores(info.restores());
    do {
      absl::StatusOr<v1::ExportRowsResponse> page = rpc.ExportRows(request);
      if (page.status().code() == absl::StatusCode::kFailedPrecondition ||
          page.status().code() == absl::StatusCode::kAborted) {
        return absl::Status(page.status().code(),
                            absl::StrCat(page.status().message(),
                                         " (the slot map changed, or the shard restarted or "
                                         "was restored, during the export: run it again)"));
      }
      EMBER_RETURN_IF_ERROR(page.status());
      if (first_page) p.version = page->version();
      first_page = false;
      EMBER_RETURN_IF_ERROR(AddBlock(plan, rpc, page->block(), writer.get()));
      progress.Records(shard.shard_id(), writer->records());
      request.set_cursor(page->next_cursor());
    } while (!request.cursor().empty());
  }

  v1::WatchUpdatesRequest check;
  check.set_job(plan.options.job);
  check.set_stream_id(p.stream_id);
  check.set_after_version(p.version);
  check.add_tables(plan.options.table);
  absl::StatusOr<v1::UpdateBatch> resumed = FirstBatch(s, rpc, check);
  if (!resumed.ok()) {
    return absl::Status(resumed.status().code(),
                        absl::StrCat(resumed.status().message(),
                                     " (the export's position cannot be resumed: "
                                     "run the export again)"));
  }
  // A restore of the shard's own checkpoint at exactly this version continues the
  // position on a new stream id: record the stream the shard answers on.
  p.stream_id = resumed->stream_id();
  EMBER_RETURN_IF_ERROR(writer->Finish());
  p.records = writer->records();
  return p;
}

absl::StatusOr<ShardPosition> DeltaShard(Session& s, const Plan& plan, const v1::ShardInfo& shard,
                                         v1::WatchUpdatesRequest request, const std::string& from,
                                         Progress& progress) {
  ShardRpc rpc(shard, s.client->options());
  request.set_job(plan.options.job);
  request.add_tables(plan.options.table);
  request.set_max_rows(plan.rows_per_message);
  request.set_stop_when_caught_up(true);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ExportFileWriter> writer, NewWriter(plan, shard));
  std::optional<ShardPosition> p;
  bool in_resync = false;
  const absl::Status streamed = rpc.Watch(
      request, absl::Milliseconds(plan.options.watch_timeout_ms),
      [&](const v1::UpdateBatch& batch, bool*) -> absl::Status {
        // Invariant 4: messages are contiguous. A gap would silently lose changes.
        const uint64_t expected = p.has_value() ? p->version : request.after_version();
        if (batch.from_version() != expected || batch.to_version() < batch.from_version()) {
          return absl::DataLossError(absl::StrCat(
              rpc.where(), ": WatchUpdates sent versions (", batch.from_version(), ", ",
              batch.to_version(), "] after version ", expected, " (a gap in the stream)"));
        }
        // A slot resync (the shard gained slots): its rows, then maybe a sweep.
        const v1::SlotRange& resync = batch.resync();
        if (batch.has_resync() && !in_resync) {
          EMBER_RETURN_IF_ERROR(writer->ResyncBegin(resync.first(), resync.last()));
          in_resync = true;
        }
        for (const v1::RowBlock& block : batch.blocks()) {
          EMBER_RETURN_IF_ERROR(AddBlock(plan, rpc, block, writer.get()));
        }
        if (batch.resync_done()) {
          if (batch.resync_sweep()) {
            EMBER_RETURN_IF_ERROR(writer->ResyncSweep(resync.first(), resync.last()));
          }
          in_resync = false;
        }
        p = PositionOf(shard, batch.stream_id(), batch.to_version());
        progress.Records(shard.shard_id(), writer->records());
        return absl::OkStatus();
      });
  if (streamed.code() == absl::StatusCode::kOutOfRange) {
    return absl::OutOfRangeError(
        absl::StrCat(streamed.message(), "; the delta cannot continue from ", from,
                     ": take a new base export (emberctl export --table=", plan.options.table,
                     plan.options.job.empty() ? "" : absl::StrCat(" --job=", plan.options.job),
                     " --out=NEW_DIR, without --since)"));
  }
  EMBER_RETURN_IF_ERROR(streamed);
  if (!p.has_value() || in_resync) {
    return absl::UnavailableError(absl::StrCat(rpc.where(), ": WatchUpdates ended ",
                                               p.has_value() ? "inside a slot resync" : "at once"));
  }
  EMBER_RETURN_IF_ERROR(writer->Finish());
  p->records = writer->records();
  p->tombstones = writer->tombstones();
  p->sweeps = writer->sweeps();
  return *p;
}

// Where the delta of `shard` starts, and how to name that position in messages.
struct DeltaStart {
  v1::WatchUpdatesRequest request;
  std::string from;
};

DeltaStart StartOf(Session& s, const ExportOptions& o, const ExportManifest* since,
                   uint32_t shard_id) {
  DeltaStart start;
  if (since == nullptr) {
    start.request.set_any_stream(true);
    start.request.set_after_version(*o.since_version);
    start.from = absl::StrCat("version ", *o.since_version);
    return start;
  }
  for (const ShardPosition& p : since->shards) {
    if (p.shard_id != shard_id) continue;
    start.request.set_stream_id(p.stream_id);
    start.request.set_after_version(p.version);
    start.from = absl::StrCat(o.since_dir, "'s position (stream ", p.stream_id, ", version ",
                              p.version, ")");
    return start;
  }
  // A shard that joined after the previous export: its whole history, which the shard
  // accepts only if it started empty (stream 0, version 0).
  *s.err << "export: shard " << shard_id << " has no position in " << o.since_dir
         << ": reading its whole history" << std::endl;
  start.from = absl::StrCat("the start of its history (it has no position in ", o.since_dir, ")");
  return start;
}

// Creates `dir` and removes what an earlier export left there (only export files).
absl::Status PrepareDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("create ", dir, ": ", ec.message()));
  // _DONE goes first: a crash from here on leaves a directory readers ignore.
  for (const char* name : {kDoneFile, "_DONE.tmp", kPositionsFile}) {
    fs::remove(fs::path(dir) / name, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("remove ", name, ": ", ec.message()));
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "rows-shard-") &&
        (absl::EndsWith(name, ".bin") || absl::EndsWith(name, ".tsv"))) {
      fs::remove(e.path(), ec);
      if (ec) return absl::UnavailableError(absl::StrCat("remove ", name, ": ", ec.message()));
    }
  }
  if (ec) return absl::UnavailableError(absl::StrCat("list ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

bool SamePath(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

absl::StatusOr<Plan> MakePlan(Session& s, const ExportOptions& o, const ExportManifest* since) {
  absl::StatusOr<v1::DescribeTableResponse> table = s.client->DescribeTable(o.table, o.job);
  if (table.status().code() == absl::StatusCode::kNotFound) {
    if (!o.job.empty()) {
      return absl::NotFoundError(absl::StrCat("job '", o.job, "' has no table '", o.table,
                                              "' of its own (`emberctl tables list --job=", o.job,
                                              "` shows them)"));
    }
    return absl::NotFoundError(absl::StrCat("table '", o.table,
                                            "' does not exist (`emberctl tables list` shows "
                                            "the tables; a job's own: --job)"));
  }
  EMBER_RETURN_IF_ERROR(table.status());
  Plan plan;
  plan.options = o;
  ExportHeader& h = plan.header;
  h.kind = since != nullptr || o.since_version.has_value() ? ExportKind::kDelta : ExportKind::kBase;
  h.table = o.table;
  h.dim = table->config().dim();
  h.row_meta_bytes = sizeof(RowMeta);
  h.state_floats = OptimizerStateFloats(table->config().optimizer(), h.dim);
  h.seed = table->config().seed();
  if (since != nullptr && (since->dim != h.dim || since->state_floats != h.state_floats ||
                           since->row_meta_bytes != h.row_meta_bytes || since->seed != h.seed)) {
    return absl::FailedPreconditionError(
        absl::StrCat("table '", o.table, "' has a different row layout than in ", o.since_dir,
                     " (was it recreated?): take a new base export"));
  }
  plan.rows_per_message = o.max_rows != 0 ? o.max_rows : RowsPerMessage(h);
  return plan;
}

void PrintSummary(Session& s, const std::string& dir, const ExportManifest& m, uint64_t records,
                  uint64_t tombstones, absl::Duration took) {
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("dir").String(dir);
    AppendManifestFields(m, &j);
    j.Key("records")
        .Uint(records)
        .Key("tombstones")
        .Uint(tombstones)
        .Key("seconds")
        .Double(absl::ToDoubleSeconds(took));
    j.EndObject();
    PrintJson(s, j);
    return;
  }
  *s.out << KindName(m.kind) << " export of table '" << m.table << "'"
         << (m.job.empty() ? "" : absl::StrCat(" of job '", m.job, "'")) << " in " << dir << ": "
         << records << " records (" << tombstones << " tombstones) from " << m.shards.size()
         << " shards in " << Fixed(absl::ToDoubleSeconds(took), 1) << " s\n";
  TextTable t({"SHARD", "ADDRESS", "STREAM", "VERSION", "RECORDS", "TOMBSTONES", "SWEEPS", "FILE"});
  for (const ShardPosition& p : m.shards) {
    t.AddRow({absl::StrCat(p.shard_id), p.address, absl::StrCat(p.stream_id),
              absl::StrCat(p.version), absl::StrCat(p.records), absl::StrCat(p.tombstones),
              absl::StrCat(p.sweeps), p.file});
  }
  *s.out << t.Render();
}

// The export named by --since (none without it). INVALID_ARGUMENT when it is --out
// itself or exports another table; its manifest's errors.
absl::StatusOr<std::optional<ExportManifest>> ReadSince(const ExportOptions& o) {
  std::optional<ExportManifest> since;
  if (!o.since_dir.empty()) {
    if (SamePath(o.since_dir, o.out)) {
      return absl::InvalidArgumentError("--since and --out name the same directory");
    }
    EMBER_ASSIGN_OR_RETURN(since, ReadExportManifest(o.since_dir));
    if (since->table != o.table) {
      return absl::InvalidArgumentError(
          absl::StrCat(o.since_dir, " exports table '", since->table, "', not '", o.table, "'"));
    }
    if (since->job != o.job) {
      auto of = [](const std::string& job) {
        return job.empty() ? std::string("a shared table")
                           : absl::StrCat("a table of job '", job, "'");
      };
      return absl::InvalidArgumentError(
          absl::StrCat(o.since_dir, " exports ", of(since->job), ", not ", of(o.job), " (--job)"));
    }
  }
  return since;
}

// The slots of each owner in `owners`. FAILED_PRECONDITION when an owner is not among
// the map's registered shards.
absl::StatusOr<std::map<uint32_t, std::vector<uint32_t>>> SlotsByOwner(
    const v1::GetClusterMapResponse& map, const SlotMap& owners) {
  std::map<uint32_t, std::vector<uint32_t>> slots;
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) slots[owners.OwnerOf(slot)].push_back(slot);
  for (uint32_t owner : owners.Shards()) {
    if (!std::any_of(map.shards().begin(), map.shards().end(),
                     [&](const v1::ShardInfo& sh) { return sh.shard_id() == owner; })) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", owner, " owns slots but is not registered"));
    }
  }
  return slots;
}

// Writes the marker that says the export in `dir` is finished (kDoneFile).
absl::Status WriteDone(const std::string& dir, const ExportManifest& m, uint64_t records,
                       uint64_t tombstones) {
  JsonWriter done;
  done.BeginObject()
      .Key("format")
      .String(kExportMagic)
      .Key("table")
      .String(m.table)
      .Key("kind")
      .String(KindName(m.kind))
      .Key("shards")
      .Uint(m.shards.size())
      .Key("records")
      .Uint(records)
      .Key("tombstones")
      .Uint(tombstones)
      .Key("finished_at")
      .String(UtcMicros(absl::ToUnixMicros(absl::Now())))
      .EndObject();
  EMBER_RETURN_IF_ERROR(WriteDoneMarker(dir, done.str() + "\n"));
  return absl::OkStatus();
}

absl::Status RunExport(Session& s, const ExportOptions& o) {
  const absl::Time start = absl::Now();
  if (fs::exists(fs::path(o.out) / kDoneFile) && !o.overwrite) {
    return absl::AlreadyExistsError(
        absl::StrCat(o.out, " holds a finished export (", kDoneFile,
                     "): choose another --out, or pass --overwrite to replace it"));
  }
  EMBER_ASSIGN_OR_RETURN(const std::optional<ExportManifest> since, ReadSince(o));
  EMBER_ASSIGN_OR_RETURN(const Plan plan, MakePlan(s, o, since.has_value() ? &*since : nullptr));
  EMBER_ASSIGN_OR_RETURN(const v1::GetClusterMapResponse map, s.client->GetClusterMap());
  if (map.epoch() == 0) return absl::FailedPreconditionError("slots are not assigned yet");
  EMBER_ASSIGN_OR_RETURN(const SlotMap owners, DecodeSlotOwners(map.slot_owners(), map.epoch()));
  EMBER_ASSIGN_OR_RETURN(const auto slots, SlotsByOwner(map, owners));
  EMBER_RETURN_IF_ERROR(PrepareDir(o.out));

  ExportManifest m;
  m.table = o.table;
  m.job = o.job;
  m.kind = plan.header.kind;
  m.format = o.format;
  m.dim = plan.header.dim;
  m.row_meta_bytes = plan.header.row_meta_bytes;
  m.state_floats = plan.header.state_floats;
  m.seed = plan.header.seed;
  m.since_dir = o.since_dir;
  m.since_version = o.since_version;
  Progress progress(s);
  uint64_t records = 0;
  uint64_t tombstones = 0;
  for (const v1::ShardInfo& shard : map.shards()) {
    const auto owned = slots.find(shard.shard_id());
    if (owned == slots.end() && shard.state() != v1::ShardInfo::ALIVE) {
      *s.err << "export: skipping shard " << shard.shard_id() << ": it owns no slots and is "
             << StateName(shard.state()) << std::endl;
      continue;
    }
    absl::StatusOr<ShardPosition> p;
    if (m.kind == ExportKind::kBase) {
      p = BaseShard(s, plan, shard,
                    owned == slots.end() ? std::vector<v1::SlotRange>() : ToRanges(owned->second),
                    progress);
    } else {
      DeltaStart from = StartOf(s, o, since.has_value() ? &*since : nullptr, shard.shard_id());
      p = DeltaShard(s, plan, shard, std::move(from.request), from.from, progress);
    }
    EMBER_RETURN_IF_ERROR(p.status());
    p->file = RowsFileName(shard.shard_id(), o.format);
    progress.Done(*p);
    records += p->records;
    tombstones += p->tombstones;
    m.shards.push_back(std::move(*p));
  }
  if (since.has_value()) {
    for (const ShardPosition& old : since->shards) {
      if (!std::any_of(m.shards.begin(), m.shards.end(),
                       [&](const ShardPosition& p) { return p.shard_id == old.shard_id; })) {
        *s.err << "export: shard " << old.shard_id << " of " << o.since_dir
               << " left the cluster; its slots' changes come from their new owners" << std::endl;
      }
    }
  }

  // Shards were read one after another: a slot move in between could leave a moved
  // slot's changes on neither side (the old owner leaves them out once it lost the slot,
  // the new owner's resync can precede its position). Unchanged epoch: no move happened.
  EMBER_ASSIGN_OR_RETURN(const v1::GetClusterMapResponse after, s.client->GetClusterMap());
  if (after.epoch() != map.epoch()) {
    return absl::AbortedError(absl::StrCat("the slot map changed during the export (epoch ",
                                           map.epoch(), " -> ", after.epoch(),
                                           "; a slot move?): run the export again"));
  }
  EMBER_RETURN_IF_ERROR(
      WriteFileSynced((fs::path(o.out) / kPositionsFile).string(), ManifestJson(m)));
  EMBER_RETURN_IF_ERROR(WriteDone(o.out, m, records, tombstones));
  PrintSummary(s, o.out, m, records, tombstones, absl::Now() - start);
  return absl::OkStatus();
}

void DeclareExport(FlagSet& flags, ExportOptions& o) {
  flags.String("table", &o.table, "T", "the table").Required().NonEmpty();
  flags
      .Custom("job", "J", "export job J's own table T (a job started with --own_tables)",
              [&o](const Flag& f) -> absl::Status {
                EMBER_RETURN_IF_ERROR(CheckJobName(f.value));
                o.job = std::string(f.value);
                return absl::OkStatus();
              })
      .DefaultText("the shared tables");
  flags
      .String("out", &o.out, "DIR",
              "the export directory (created). Refused (exit 1) when it holds a finished export "
              "(_DONE), unless --overwrite")
      .Required()
      .NonEmpty();
  flags
      .Custom("since", "DIR|VERSION", "make a delta (see above)",
              [&o](const Flag& f) -> absl::Status {
                if (f.value.empty()) return absl::InvalidArgumentError("--since is empty");
                // Digits only: a version; anything else (./123 for a directory named 123): a
                // dir.
                if (std::all_of(f.value.begin(), f.value.end(), absl::ascii_isdigit)) {
                  uint64_t version = 0;
                  EMBER_RETURN_IF_ERROR(ParseNumber(f, &version));
                  o.since_version = version;
                } else {
                  o.since_dir = std::string(f.value);
                }
                return absl::OkStatus();
              })
      .DefaultText("a base export");
  flags.Choice<ExportFormat>("format", &o.format,
                             {{"binary", ExportFormat::kBinary}, {"text", ExportFormat::kText}},
                             "rows-shard-<id>.bin or tab-separated rows-shard-<id>.tsv");
  flags.Bool("overwrite", &o.overwrite, "replace a finished export in DIR");
  flags.Number("watch_timeout_ms", &o.watch_timeout_ms, "N", "deadline of one shard's delta stream")
      .Min(1);
  flags.Number("max_rows", &o.max_rows, "N", "rows per ExportRows page or WatchUpdates message")
      .Range(1, kMaxRowsPerMessage)
      .DefaultText("as many as fit 16 MiB");
}

absl::StatusOr<Runner> FinishExport(const Args& args, const ExportOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([o](Session& s) { return RunExport(s, o); });
}

}  // namespace

std::vector<CommandSpec> ExportCommands() {
  return {
      Command(
          nullptr, "export", "",
          "Exports the rows of table T into DIR for offline serving systems: one rows file per\n"
          "shard, positions.json, and _DONE written last (a directory without _DONE holds\n"
          "nothing usable). Files: docs/EXPORT_FORMAT.md.\n\n"
          "Without --since: a BASE export, every stored row of T, and per shard the position on\n"
          "its update stream that the next delta continues from.\n"
          "With --since=DIR (a previous finished export of T): a DELTA, per shard every row of T\n"
          "changed since DIR's position (its current value) and every row removed since (a\n"
          "tombstone). A shard that restarted, restored a checkpoint or whose change log moved\n"
          "past the position fails the export (exit 1): take a new base export then. Rows of\n"
          "slots a move gave a shard come as a slot resync (resync records, then a sweep).\n"
          "With --since=VERSION (digits only; ./123 names a directory): a delta after VERSION on\n"
          "every shard, whatever stream the shard is on. Versions are per shard, so this is only\n"
          "meaningful for a cluster of one shard.\n\n"
          "A slot move while the export runs fails it (exit 1): run it again.\n"
          "Progress goes to stderr; --json prints positions.json's fields plus totals.\n"
          "Shards that need the admin token for ExportRows get --admin_token as metadata.\n"
          "With --job=J: job J's own table T (a job started with --own_tables), read from the\n"
          "job's store on every shard; a delta continues an export of the same job's table.\n",
          DeclareExport, FinishExport),
  };
}

}  // namespace ember::ctl
