// Copyright 2026 The Ember Authors.
//
// `tables list|describe|create`.

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "google/protobuf/text_format.h"
#include "tools/emberctl/cli.h"

namespace ember::ctl {
namespace {

std::string OptimizerName(const v1::TableConfig& t) {
  return LowerName(v1::OptimizerConfig::Kind_Name(t.optimizer().kind()));
}

std::string DescribeText(const v1::TableConfig& config) {
  std::string out;
  for (const auto& [key, value] : FlattenProto(config)) {
    absl::StrAppend(&out, absl::StrFormat("%-36s%s\n", key, value));
  }
  return out;
}

absl::StatusOr<Runner> ParseList(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  EMBER_RETURN_IF_ERROR(CheckNoFlags(args));
  return Runner([](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::GetClusterMapResponse map, s.client->GetClusterMap());
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("tables").BeginArray();
      for (const v1::TableConfig& t : map.tables()) {
        j.BeginObject()
            .Key("name")
            .String(t.name())
            .Key("dim")
            .Uint(t.dim())
            .Key("optimizer")
            .String(OptimizerName(t))
            .Key("learning_rate")
            .Float(t.optimizer().learning_rate())
            .Key("seed")
            .Uint(t.seed())
            .Key("admission_min_count")
            .Uint(t.admission().min_count())
            .EndObject();
      }
      j.EndArray().EndObject();
      PrintJson(s, j);
      return absl::OkStatus();
    }
    TextTable table({"NAME", "DIM", "OPTIMIZER", "LR", "SEED", "MIN_COUNT"});
    for (const v1::TableConfig& t : map.tables()) {
      table.AddRow({t.name(), absl::StrCat(t.dim()), OptimizerName(t),
                    FloatText(t.optimizer().learning_rate()), absl::StrCat(t.seed()),
                    absl::StrCat(t.admission().min_count())});
    }
    *s.out << table.Render();
    return absl::OkStatus();
  });
}

absl::StatusOr<Runner> ParseDescribe(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 1, 1, "a table NAME"));
  EMBER_RETURN_IF_ERROR(CheckNoFlags(args));
  return Runner([name = std::string(args.positionals[0])](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::DescribeTableResponse response, s.client->DescribeTable(name));
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("table").Proto(response.config()).EndObject();
      PrintJson(s, j);
    } else {
      *s.out << DescribeText(response.config());
    }
    return absl::OkStatus();
  });
}

absl::Status ParseOptimizer(const Flag& f, v1::OptimizerConfig::Kind* kind) {
  EMBER_RETURN_IF_ERROR(RequireValue(f));
  if (f.value == "sgd") {
    *kind = v1::OptimizerConfig::SGD;
  } else if (f.value == "adagrad") {
    *kind = v1::OptimizerConfig::ADAGRAD;
  } else if (f.value == "adam") {
    *kind = v1::OptimizerConfig::ADAM;
  } else if (f.value == "ftrl") {
    *kind = v1::OptimizerConfig::FTRL;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer: expected sgd, adagrad, adam or ftrl, not '", f.value, "'"));
  }
  return absl::OkStatus();
}

absl::Status ReadConfig(const Flag& f, v1::TableConfig* config) {
  EMBER_RETURN_IF_ERROR(RequireValue(f));
  const std::string path(f.value);
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--config: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (!google::protobuf::TextFormat::ParseFromString(text.str(), config)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config: ", path, " is not a text-format ember.v1.TableConfig"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Runner> ParseCreate(const Args& args) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  v1::TableConfig config;
  bool from_file = false;
  // Flags override the file, whatever their order.
  for (const Flag& f : args.flags) {
    if (f.name == "config") {
      EMBER_RETURN_IF_ERROR(ReadConfig(f, &config));
      from_file = true;
    }
  }
  for (const Flag& f : args.flags) {
    if (f.name == "config") continue;
    if (f.name == "name") {
      EMBER_RETURN_IF_ERROR(ParseString(f, config.mutable_name()));
    } else if (f.name == "dim") {
      uint32_t dim = 0;
      EMBER_RETURN_IF_ERROR(ParseNumber(f, &dim));
      if (dim < 1 || dim > 4096) return absl::InvalidArgumentError("--dim must be in [1, 4096]");
      config.set_dim(dim);
    } else if (f.name == "optimizer") {
      v1::OptimizerConfig::Kind kind = v1::OptimizerConfig::SGD;
      EMBER_RETURN_IF_ERROR(ParseOptimizer(f, &kind));
      config.mutable_optimizer()->set_kind(kind);
    } else if (f.name == "learning_rate") {
      double lr = 0;
      EMBER_RETURN_IF_ERROR(ParseDouble(f, &lr));
      if (!(lr > 0)) return absl::InvalidArgumentError("--learning_rate must be > 0");
      config.mutable_optimizer()->set_learning_rate(static_cast<float>(lr));
    } else if (f.name == "seed") {
      uint64_t seed = 0;
      EMBER_RETURN_IF_ERROR(ParseNumber(f, &seed));
      config.set_seed(seed);
    } else if (f.name == "admission_min_count") {
      uint32_t n = 0;
      EMBER_RETURN_IF_ERROR(ParseNumber(f, &n));
      config.mutable_admission()->set_min_count(n);
    } else if (f.name == "ttl_steps") {
      uint64_t n = 0;
      EMBER_RETURN_IF_ERROR(ParseNumber(f, &n));
      config.mutable_eviction()->set_ttl_steps(n);
    } else {
      return UnknownFlag(args, f);
    }
  }
  if (config.name().empty())
    return MissingFlag(args, from_file ? "name (or name in --config)" : "name");
  if (config.dim() == 0) return MissingFlag(args, from_file ? "dim (or dim in --config)" : "dim");
  return Runner([config](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::AdminCreateTableResponse response, s.client->CreateTable(config));
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("table").Proto(response.config()).Key("pending_shards").BeginArray();
      for (uint32_t id : response.pending_shards()) j.Uint(id);
      j.EndArray().EndObject();
      PrintJson(s, j);
      return absl::OkStatus();
    }
    std::vector<uint32_t> pending(response.pending_shards().begin(),
                                  response.pending_shards().end());
    *s.out << "created table " << response.config().name() << "\n"
           << DescribeText(response.config()) << "pending shards: "
           << (pending.empty() ? std::string("none") : absl::StrJoin(pending, ","))
           << (pending.empty() ? "" : " (they get the table with their next heartbeat)") << "\n";
    return absl::OkStatus();
  });
}

}  // namespace

std::vector<CommandSpec> TableCommands() {
  return {
      {"tables", "list", "tables list",
       "Every table: name, dim, optimizer, learning rate, seed, admission min_count.\n", ParseList},
      {"tables", "describe", "tables describe NAME",
       "Every field of the table's normalized config.\n", ParseDescribe},
      {"tables", "create", "tables create --name=N --dim=D [--optimizer=...] [...] | --config=FILE",
       "Creates a table on the coordinator and every alive shard; prints the normalized\n"
       "config and the shards that did not confirm yet.\n\n"
       "  --name=N                  table name ([a-zA-Z0-9_.-]{1,64}). Required\n"
       "  --dim=D                   embedding dimension (1..4096). Required\n"
       "  --optimizer=KIND          sgd, adagrad, adam or ftrl. Default: sgd\n"
       "  --learning_rate=F         Default: 0.01\n"
       "  --seed=S                  Default: a hash of the name\n"
       "  --admission_min_count=N   sightings before an ID gets a row. Default: 0\n"
       "  --ttl_steps=N             evict rows not pushed for N steps. Default: 0 (never)\n"
       "  --config=FILE             a text-format ember.v1.TableConfig; the flags above\n"
       "                            override its fields\n",
       ParseCreate},
  };
}

}  // namespace ember::ctl
