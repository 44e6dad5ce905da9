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

// Which tables: a job's own (--job) or the shared ones.
struct TablesOptions {
  std::string job;
};

void DeclareTables(FlagSet& flags, TablesOptions& o) {
  flags.String("job", &o.job, "J", "job J's own tables (--own_tables); default: the shared ones")
      .NonEmpty();
}

absl::StatusOr<Runner> FinishList(const Args& args, const TablesOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([o](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::GetClusterMapResponse map, s.client->GetClusterMap(o.job));
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

absl::StatusOr<Runner> FinishDescribe(const Args& args, const TablesOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 1, 1, "a table NAME"));
  return Runner([name = std::string(args.positionals[0]), o](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::DescribeTableResponse response,
                           s.client->DescribeTable(name, o.job));
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

absl::Status ReadConfig(const std::string& path, v1::TableConfig* config) {
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

// The flags given; the config file's fields are the rest.
struct CreateOptions {
  std::optional<std::string> name;
  std::optional<uint32_t> dim;
  std::optional<v1::OptimizerConfig::Kind> optimizer;
  std::optional<double> learning_rate;
  std::optional<uint64_t> seed;
  std::optional<uint32_t> admission_min_count;
  std::optional<uint64_t> ttl_steps;
  std::optional<std::string> config;
};

void DeclareCreate(FlagSet& flags, CreateOptions& o) {
  flags.String("name", &o.name, "N",
               "table name ([a-zA-Z0-9_.-]{1,64}); required unless --config gives it");
  flags.Number("dim", &o.dim, "D", "embedding dimension; required unless --config gives it")
      .Range(1, 4096);
  flags
      .Choice<v1::OptimizerConfig::Kind>("optimizer", &o.optimizer,
                                         {{"sgd", v1::OptimizerConfig::SGD},
                                          {"adagrad", v1::OptimizerConfig::ADAGRAD},
                                          {"adam", v1::OptimizerConfig::ADAM},
                                          {"ftrl", v1::OptimizerConfig::FTRL}},
                                         "the optimizer")
      .DefaultText("sgd");
  flags.Number("learning_rate", &o.learning_rate, "F", "").Above(0.0).DefaultText("0.01");
  flags.Number("seed", &o.seed, "S", "").DefaultText("a hash of the name");
  flags
      .Number("admission_min_count", &o.admission_min_count, "N",
              "sightings before an ID gets a row")
      .DefaultText("0");
  flags.Number("ttl_steps", &o.ttl_steps, "N", "evict rows not pushed for N steps")
      .DefaultText("0 (never)");
  flags.String("config", &o.config, "FILE",
               "a text-format ember.v1.TableConfig; the flags above override its fields");
}

absl::StatusOr<Runner> FinishCreate(const Args& args, const CreateOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  v1::TableConfig config;
  if (o.config.has_value()) EMBER_RETURN_IF_ERROR(ReadConfig(*o.config, &config));
  if (o.name.has_value()) config.set_name(*o.name);
  if (o.dim.has_value()) config.set_dim(*o.dim);
  if (o.optimizer.has_value()) config.mutable_optimizer()->set_kind(*o.optimizer);
  if (o.learning_rate.has_value()) {
    config.mutable_optimizer()->set_learning_rate(static_cast<float>(*o.learning_rate));
  }
  if (o.seed.has_value()) config.set_seed(*o.seed);
  if (o.admission_min_count.has_value()) {
    config.mutable_admission()->set_min_count(*o.admission_min_count);
  }
  if (o.ttl_steps.has_value()) config.mutable_eviction()->set_ttl_steps(*o.ttl_steps);
  // --name and --dim are required unless the file gives them.
  const bool from_file = o.config.has_value();
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
      Command("tables", "list", "",
              "Every table: name, dim, optimizer, learning rate, seed, admission min_count.\n",
              DeclareTables, FinishList),
      Command("tables", "describe", "NAME", "Every field of the table's normalized config.\n",
              DeclareTables, FinishDescribe),
      Command("tables", "create", "",
              "Creates a table on the coordinator and every alive shard; prints the normalized\n"
              "config and the shards that did not confirm yet.\n",
              DeclareCreate, FinishCreate),
  };
}

}  // namespace ember::ctl
