// Copyright 2026 The Ember Authors.
//
// `serving status|lookup|versions|pin|checksum|predict`: a serving follower
// (ember-serving), named with --serving=HOST:PORT or EMBER_SERVING.

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/admin_auth.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "ember/v1/serving.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tools/emberctl/cli.h"

namespace ember::ctl {
namespace {

// A call to the follower at `address` with the session's deadline (and admin token).
class ServingCall {
 public:
  ServingCall(const Session& s, const std::string& address)
      : stub_(v1::ServingService::NewStub(
            grpc::CreateChannel(address, OrInsecure(s.client->options().channel_credentials)))),
        address_(address) {
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(s.options.timeout_ms));
    if (!s.options.admin_token.empty()) {
      context_.AddMetadata(kAdminTokenMetadataKey, s.options.admin_token);
    }
  }
  v1::ServingService::Stub& stub() { return *stub_; }
  grpc::ClientContext* context() { return &context_; }
  absl::Status Check(const grpc::Status& status) const {
    if (status.ok()) return absl::OkStatus();
    const absl::Status s = FromGrpcStatus(status, &context_);
    return absl::Status(s.code(), absl::StrCat("ember-serving at ", address_, ": ", s.message()));
  }

 private:
  std::unique_ptr<v1::ServingService::Stub> stub_;
  grpc::ClientContext context_;
  std::string address_;
};

// --serving (or $EMBER_SERVING), which every serving command takes.
void DeclareServing(FlagSet& flags, std::string* address) {
  flags.String("serving", address, "HOST:PORT", "the follower")
      .Env({"EMBER_SERVING"})
      .Required()
      .NonEmpty();
}

struct ServingOptions {
  std::string address;  // --serving
  std::string table;    // lookup, checksum
  std::string ids;      // lookup
  // predict
  bool header = false;
  std::string columns;
  int64_t batch_rows = 1000;
};

void DeclareAddress(FlagSet& flags, ServingOptions& o) { DeclareServing(flags, &o.address); }

void VersionJson(JsonWriter& j, const v1::ModelVersion& v) {
  j.BeginObject()
      .Key("checkpoint")
      .String(v.checkpoint())
      .Key("dense_step")
      .Uint(v.dense_step())
      .Key("sparse_step")
      .Uint(v.sparse_step())
      .Key("pinned")
      .Bool(v.pinned())
      .EndObject();
}

std::string VersionText(const v1::ModelVersion& v) {
  if (v.checkpoint().empty())
    return absl::StrCat("no dense tower yet, sparse step ", v.sparse_step());
  return absl::StrCat(v.checkpoint(), " (dense step ", v.dense_step(), ", sparse step ",
                      v.sparse_step(), v.pinned() ? ", pinned)" : ")");
}

absl::Status Status(Session& s, const std::string& address) {
  ServingCall call(s, address);
  v1::ServingStatus status;
  EMBER_RETURN_IF_ERROR(call.Check(call.stub().GetServingStatus(call.context(), {}, &status)));
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject()
        .Key("address")
        .String(address)
        .Key("ready")
        .Bool(status.ready())
        .Key("job")
        .String(status.job())
        .Key("bootstrap_checkpoint")
        .String(status.bootstrap_checkpoint())
        .Key("bootstraps")
        .Uint(status.bootstraps())
        .Key("lookups")
        .Uint(status.lookups())
        .Key("stored_rows")
        .Uint(status.stored_rows())
        .Key("bootstrap_error")
        .String(status.bootstrap_error())
        .Key("version");
    VersionJson(j, status.version());
    j.Key("shards").BeginArray();
    for (const v1::ShardFollowState& sh : status.shards()) {
      j.BeginObject()
          .Key("shard")
          .Uint(sh.shard_id())
          .Key("connected")
          .Bool(sh.connected())
          .Key("applied_version")
          .Uint(sh.applied_version())
          .Key("shard_watermark")
          .Uint(sh.shard_watermark())
          .Key("lag_versions")
          .Uint(sh.lag_versions())
          .Key("lag_seconds")
          .Double(sh.lag_seconds())
          .Key("rows_applied")
          .Uint(sh.rows_applied())
          .Key("tombstones_applied")
          .Uint(sh.tombstones_applied())
          .Key("reconnects")
          .Uint(sh.reconnects())
          .Key("held_for_staleness")
          .Bool(sh.held_for_staleness())
          .Key("last_error")
          .String(sh.last_error())
          .EndObject();
    }
    j.EndArray().EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  *s.out << "serving " << address << ": " << (status.ready() ? "ready" : "NOT READY") << ", job '"
         << status.job() << "', bootstrapped from "
         << (status.bootstrap_checkpoint().empty() ? "an empty start"
                                                   : status.bootstrap_checkpoint())
         << ", " << status.stored_rows() << " rows held (estimate), " << status.lookups()
         << " lookups\n";
  if (!status.bootstrap_error().empty()) {
    *s.out << "bootstrap failed: " << status.bootstrap_error() << "\n";
  }
  *s.out << "model version: " << VersionText(status.version()) << "\n";
  TextTable table({"SHARD", "CONNECTED", "APPLIED", "SHARD_VERSION", "LAG", "LAG_S", "ROWS_APPLIED",
                   "TOMBSTONES_APPLIED", "RECONNECTS", "ERROR"});
  for (const v1::ShardFollowState& sh : status.shards()) {
    table.AddRow({absl::StrCat(sh.shard_id()), sh.connected() ? "yes" : "no",
                  absl::StrCat(sh.applied_version()), absl::StrCat(sh.shard_watermark()),
                  absl::StrCat(sh.lag_versions()), DoubleText(sh.lag_seconds()),
                  absl::StrCat(sh.rows_applied()), absl::StrCat(sh.tombstones_applied()),
                  absl::StrCat(sh.reconnects()),
                  sh.held_for_staleness() ? "held: waiting for a newer dense tower"
                                          : (sh.last_error().empty() ? "-" : sh.last_error())});
  }
  *s.out << table.Render();
  return absl::OkStatus();
}

absl::Status Versions(Session& s, const std::string& address) {
  ServingCall call(s, address);
  v1::ListModelVersionsResponse response;
  EMBER_RETURN_IF_ERROR(call.Check(call.stub().ListModelVersions(call.context(), {}, &response)));
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("current");
    VersionJson(j, response.current());
    j.Key("versions").BeginArray();
    for (const v1::ModelVersionInfo& v : response.versions()) {
      j.BeginObject()
          .Key("checkpoint")
          .String(v.checkpoint())
          .Key("step")
          .Uint(v.step())
          .Key("created_unix_ms")
          .Int(v.created_unix_ms())
          .Key("has_dense")
          .Bool(v.has_dense())
          .EndObject();
    }
    j.EndArray().EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  TextTable table({"", "CHECKPOINT", "STEP", "CREATED", "DENSE"});
  for (const v1::ModelVersionInfo& v : response.versions()) {
    const bool current = v.checkpoint() == response.current().checkpoint();
    table.AddRow({current ? (response.current().pinned() ? "pinned" : "*") : "", v.checkpoint(),
                  absl::StrCat(v.step()),
                  absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(v.created_unix_ms()),
                                   absl::UTCTimeZone()),
                  v.has_dense() ? "yes" : "no"});
  }
  *s.out << table.Render();
  *s.out << "serving: " << VersionText(response.current()) << "\n";
  return absl::OkStatus();
}

absl::Status Pin(Session& s, const std::string& address, const std::string& checkpoint) {
  ServingCall call(s, address);
  v1::PinModelVersionRequest request;
  request.set_checkpoint(checkpoint);
  v1::PinModelVersionResponse response;
  EMBER_RETURN_IF_ERROR(
      call.Check(call.stub().PinModelVersion(call.context(), request, &response)));
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("current");
    VersionJson(j, response.current());
    j.EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  *s.out << "serving: " << VersionText(response.current()) << "\n";
  return absl::OkStatus();
}

absl::Status Checksum(Session& s, const std::string& address, const std::string& table) {
  ServingCall call(s, address);
  v1::ChecksumRequest request;
  request.set_table(table);
  v1::ChecksumResponse response;
  EMBER_RETURN_IF_ERROR(call.Check(call.stub().Checksum(call.context(), request, &response)));
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("tables").BeginArray();
    for (const auto& t : response.tables()) {
      j.BeginObject()
          .Key("table")
          .String(t.table())
          .Key("rows")
          .Uint(t.rows())
          .Key("digest")
          .String(absl::StrCat(absl::Hex(t.digest(), absl::kZeroPad16)))
          .EndObject();
    }
    j.EndArray().EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  TextTable out({"TABLE", "ROWS", "DIGEST"});
  for (const auto& t : response.tables()) {
    out.AddRow(
        {t.table(), absl::StrCat(t.rows()), absl::StrCat(absl::Hex(t.digest(), absl::kZeroPad16))});
  }
  *s.out << out.Render();
  return absl::OkStatus();
}

absl::Status Lookup(Session& s, const std::string& address, const std::string& table,
                    const std::vector<uint64_t>& ids) {
  ServingCall call(s, address);
  v1::LookupRequest request;
  request.set_table(table);
  request.set_ids(std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8));
  v1::LookupResponse response;
  EMBER_RETURN_IF_ERROR(call.Check(call.stub().Lookup(call.context(), request, &response)));
  const size_t dim = response.values().size() / sizeof(float) / ids.size();
  std::vector<float> values(ids.size() * dim);
  std::memcpy(values.data(), response.values().data(), values.size() * sizeof(float));
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("table").String(table).Key("unknown_ids").Uint(response.unknown_ids());
    j.Key("version");
    VersionJson(j, response.version());
    j.Key("rows").BeginArray();
    for (size_t i = 0; i < ids.size(); ++i) {
      j.BeginObject().Key("id").Uint(ids[i]).Key("embedding").BeginArray();
      for (size_t k = 0; k < dim; ++k) j.Float(values[i * dim + k]);
      j.EndArray().EndObject();
    }
    j.EndArray().EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    *s.out << ids[i];
    for (size_t k = 0; k < dim; ++k) *s.out << " " << FloatText(values[i * dim + k]);
    *s.out << "\n";
  }
  *s.out << "(" << response.unknown_ids() << " of " << ids.size()
         << " ids without a stored row; model version " << VersionText(response.version()) << ")\n";
  return absl::OkStatus();
}

void DeclareLookup(FlagSet& flags, ServingOptions& o) {
  DeclareServing(flags, &o.address);
  flags.String("table", &o.table, "T", "the table").Required().NonEmpty();
  flags.String("ids", &o.ids, "LIST", "comma-separated ids, e.g. 7,42,1001").Required().NonEmpty();
}

absl::StatusOr<Runner> FinishLookup(const Args& args, const ServingOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  std::vector<uint64_t> ids;
  for (absl::string_view part : absl::StrSplit(o.ids, ',')) {
    uint64_t id = 0;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat(args.command, ": --ids: bad id '", part, "' (expected e.g. 1,2,3)"));
    }
    ids.push_back(id);
  }
  return Runner([address = o.address, table = o.table, ids](Session& s) {
    return Lookup(s, address, table, ids);
  });
}

absl::StatusOr<Runner> FinishStatus(const Args& args, const ServingOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([address = o.address](Session& s) { return Status(s, address); });
}

absl::StatusOr<Runner> FinishVersions(const Args& args, const ServingOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([address = o.address](Session& s) { return Versions(s, address); });
}

absl::StatusOr<Runner> FinishPin(const Args& args, const ServingOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 1, 1, "a CHECKPOINT name or 'latest'"));
  return Runner([address = o.address, checkpoint = std::string(args.positionals[0])](Session& s) {
    return Pin(s, address, checkpoint);
  });
}

void DeclareChecksum(FlagSet& flags, ServingOptions& o) {
  DeclareServing(flags, &o.address);
  flags.String("table", &o.table, "T", "one table").DefaultText("all");
}

absl::StatusOr<Runner> FinishChecksum(const Args& args, const ServingOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner(
      [address = o.address, table = o.table](Session& s) { return Checksum(s, address, table); });
}

// ---- predict

// The rows to score: every line of `path` ("-": stdin), the first taken as the header
// when `header`. A trailing '\r' is dropped (files written on Windows).
absl::Status ReadRows(const std::string& path, bool header, std::vector<std::string>* columns,
                      std::vector<std::string>* lines) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path);
    if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
    in = &file;
  }
  std::string line;
  bool first = true;
  while (std::getline(*in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (first && header) {
      *columns = absl::StrSplit(line, '\t');
    } else {
      lines->push_back(line);
    }
    first = false;
  }
  if (in->bad()) return absl::DataLossError(absl::StrCat("reading ", path, " failed"));
  return absl::OkStatus();
}

absl::Status Predict(Session& s, const std::string& address, const std::string& path,
                     const ServingOptions& o) {
  std::vector<std::string> columns, lines;
  if (!o.columns.empty()) columns = absl::StrSplit(o.columns, ',');
  EMBER_RETURN_IF_ERROR(ReadRows(path, o.header, &columns, &lines));
  // One call per batch_rows rows, each with the session's deadline.
  std::vector<float> probabilities(lines.size());
  std::vector<std::string> errors(lines.size());
  v1::ModelVersion version;
  uint64_t unknown_ids = 0, refused = 0;
  for (size_t first = 0; first < lines.size(); first += o.batch_rows) {
    const size_t n = std::min<size_t>(o.batch_rows, lines.size() - first);
    v1::PredictRequest request;
    for (const std::string& c : columns) request.add_columns(c);
    for (size_t i = 0; i < n; ++i) request.add_rows()->set_line(lines[first + i]);
    ServingCall call(s, address);
    v1::PredictResponse response;
    EMBER_RETURN_IF_ERROR(call.Check(call.stub().Predict(call.context(), request, &response)));
    for (size_t i = 0; i < n; ++i) probabilities[first + i] = response.probabilities(i);
    for (const v1::RowError& e : response.errors()) {
      errors[first + e.index()] = e.reason();
      ++refused;
    }
    unknown_ids += response.unknown_ids();
    version = response.version();
  }
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("version");
    VersionJson(j, version);
    j.Key("scored")
        .Uint(lines.size() - refused)
        .Key("refused")
        .Uint(refused)
        .Key("unknown_ids")
        .Uint(unknown_ids)
        .Key("rows")
        .BeginArray();
    for (size_t i = 0; i < lines.size(); ++i) {
      j.BeginObject().Key("row").Uint(i);
      if (errors[i].empty()) {
        j.Key("probability").Float(probabilities[i]);
      } else {
        j.Key("error").String(errors[i]);
      }
      j.EndObject();
    }
    j.EndArray().EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  // One line per input row, in order: the probability (%.9g: the float's exact bits)
  // or the reason it was refused.
  for (size_t i = 0; i < lines.size(); ++i) {
    if (errors[i].empty()) {
      *s.out << absl::StrFormat("%.9g", probabilities[i]) << "\n";
    } else {
      *s.out << "error: row " << i << ": " << errors[i] << "\n";
    }
  }
  *s.err << lines.size() - refused << " rows scored, " << refused << " refused, " << unknown_ids
         << " ids without a stored row; model version " << VersionText(version) << "\n";
  return absl::OkStatus();
}

void DeclarePredict(FlagSet& flags, ServingOptions& o) {
  DeclareServing(flags, &o.address);
  flags.Bool("header", &o.header,
             "the first line is a header naming the columns (as a schema TSV data file begins)");
  flags.String("columns", &o.columns, "LIST", "comma-separated names of the fields of a line")
      .DefaultText("the header with --header, else the training data's layout");
  flags.Number("batch_rows", &o.batch_rows, "N", "rows per Predict call").Range(1, 1000000);
}

absl::StatusOr<Runner> FinishPredict(const Args& args, const ServingOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 1, "a FILE of rows ('-' or none: stdin)"));
  if (o.header && !o.columns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.command, ": --header and --columns both name the columns: pass one"));
  }
  const std::string path = args.positionals.empty() ? "-" : std::string(args.positionals[0]);
  return Runner(
      [address = o.address, path, o](Session& s) { return Predict(s, address, path, o); });
}

}  // namespace

std::vector<CommandSpec> ServingCommands() {
  return {
      Command("serving", "status", "",
              "Per shard: stream connected, applied version, the shard's version, lag in versions\n"
              "and seconds, rows and tombstones applied, reconnects, last error; the model\n"
              "version served.\n",
              DeclareAddress, FinishStatus),
      Command("serving", "lookup", "",
              "The embeddings a follower serves for the ids (an id without a stored row reads\n"
              "as its init vector, or zeros with ember-serving --unknown_ids=zeros).\n",
              DeclareLookup, FinishLookup),
      Command("serving", "versions", "",
              "The job's checkpoints a follower can serve the dense tower of; * marks the one\n"
              "served now.\n",
              DeclareAddress, FinishVersions),
      Command(
          "serving", "pin", "CHECKPOINT|latest",
          "Serve CHECKPOINT's dense tower until unpinned ('latest': follow the newest\n"
          "checkpoint again). Sends the admin token (--admin_token / EMBER_ADMIN_TOKEN_FILE).\n",
          DeclareAddress, FinishPin),
      Command("serving", "checksum", "",
              "Per-table row count and digest of the follower's rows: equal to `emberctl\n"
              "checksum` of the PS cluster once the follower caught up with a stopped job.\n",
              DeclareChecksum, FinishChecksum),
      Command("serving", "predict", "[FILE]",
              "Click probabilities of the rows of FILE (or stdin) from the follower's served\n"
              "model version (ServingService.Predict). One row per line, tab-separated, in the\n"
              "training data's layout (data.columns in order; Criteo: label, I1..I13, C1..C26),\n"
              "or in the order --header / --columns name (label, weight and eval columns may be\n"
              "left out). Prints one line per row: the probability (%.9g), or `error: row N:\n"
              "REASON` for a refused row (the others are still scored); a summary on stderr.\n"
              "Exit 1 when a call fails.\n",
              DeclarePredict, FinishPredict),
  };
}

}  // namespace ember::ctl
