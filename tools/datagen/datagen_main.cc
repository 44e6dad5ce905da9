// Copyright 2026 The Ember Authors.
//
// ember-datagen: synthetic e-commerce click data with realistic skew and a planted
// truth (tools/datagen/world.h), in the layout of tools/datagen/generator.h.
//
//   ember-datagen --out=run/quickstart/data
//
// Progress lines and a final summary go to stdout. Exit codes (common/flags.h): 0 done,
// 1 the output could not be written, 2 bad flags.

#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "tools/datagen/generator.h"

namespace ember::datagen {
namespace {

constexpr char kUsage[] = R"(usage: ember-datagen --out=DIR [--flag=value ...]

Writes DIR/train/part-NNNNN.tsv, DIR/test/part-00000.tsv, DIR/oracle.json (AUC and
logloss of the true click probabilities on the test set) and DIR/datagen.json (the
flags). The same flags always give the same files.

  --out=DIR                 output directory (created). Required.
  --train_examples=N        training examples. Default: 1000000
  --test_examples=N         test examples. Default: 100000
  --train_files=N           training files. Default: 8
  --users=N                 users of the training population. Default: 200000
  --items=N                 items. Default: 100000
  --categories=N            item categories. Default: 500
  --shops=N                 shops. Default: 5000
  --zipf=S                  popularity exponent of users and items. Default: 1.1
  --cold_user_fraction=F    share of test examples whose user never appears in
                            training (IDs above --users). Default: 0.1
  --seed=N                  random seed. Default: 1
  --gzip                    write .tsv.gz files (zlib). Default: false
  --help                    this text
)";

absl::StatusOr<DatagenOptions> ParseFlags(const std::vector<Flag>& flags) {
  DatagenOptions o;
  for (const Flag& flag : flags) {
    const absl::string_view name = flag.name;
    if (name == "out") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.out));
    } else if (name == "train_examples") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.train_examples));
    } else if (name == "test_examples") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.test_examples));
    } else if (name == "train_files") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.train_files));
    } else if (name == "users") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.users));
    } else if (name == "items") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.items));
    } else if (name == "categories") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.categories));
    } else if (name == "shops") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.shops));
    } else if (name == "zipf") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.zipf));
    } else if (name == "cold_user_fraction") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.cold_user_fraction));
    } else if (name == "seed") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.seed));
    } else if (name == "gzip") {
      EMBER_RETURN_IF_ERROR(ParseBool(flag, &o.gzip));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  EMBER_RETURN_IF_ERROR(Validate(o));
  return o;
}

absl::Status Run(const DatagenOptions& options) {
  EMBER_ASSIGN_OR_RETURN(const DatagenSummary s, Generate(options, std::cout));
  std::cout << "done in " << s.seconds << " s: " << s.train_examples << " train examples (ctr "
            << s.train_ctr << ", top 1% items hold " << s.top1pct_item_share << " of them), "
            << s.test_examples << " test examples (ctr " << s.test_ctr << ", cold users "
            << s.cold_user_fraction << "); oracle test AUC " << s.oracle_auc << ", logloss "
            << s.oracle_logloss << std::endl;
  return absl::OkStatus();
}

}  // namespace
}  // namespace ember::datagen

int main(int argc, char** argv) {
  return ember::RunMain<ember::datagen::DatagenOptions>("ember-datagen", ember::datagen::kUsage,
                                                        argc, argv, ember::datagen::ParseFlags,
                                                        ember::datagen::Run);
}
