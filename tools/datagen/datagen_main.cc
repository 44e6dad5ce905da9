// Copyright 2026 The Ember Authors.
//
// ember-datagen: synthetic e-commerce click data with realistic skew and a planted
// truth (tools/datagen/world.h), in the layout of tools/datagen/generator.h.
//
//   ember-datagen --out=run/quickstart/data
//   ember-datagen --out=run/quickstart_cvr/data --conversions   # + post-click conversions
//   ember-datagen --out=run/cross/data --cross=1   # + a user x item x hour cross in the truth
//
// --conversions (default off: the files are then exactly those of a run without it)
// adds a planted post-click conversion to every example: columns converted (0/1, 0
// without a click) and true_cvr_prob (the true P(conversion | click, features), from a
// CVR model of the same features with its own weights), training files also get
// true_prob, and oracle.json the conversion oracle (cvr_test_auc over clicked test
// examples, ctcvr_test_auc over all). Every click column of every line is the same as
// without it (the conversions have their own random streams). tools/datagen/generator.h
// has the layout.
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

void DeclareFlags(FlagSet& flags, DatagenOptions& o) {
  flags.Synopsis("--out=DIR [--flag=value ...]");
  flags.Description(
      "Writes DIR/train/part-NNNNN.tsv, DIR/test/part-00000.tsv, DIR/oracle.json (AUC and\n"
      "logloss of the true click probabilities on the test set) and DIR/datagen.json (the\n"
      "flags). The same flags always give the same files. --conversions adds post-click\n"
      "conversions (columns converted, true_cvr_prob; train files also true_prob) and\n"
      "their oracle (cvr_test_auc over clicked test examples, ctcvr_test_auc over all);\n"
      "the click columns stay exactly those of a run without it.");
  constexpr uint64_t kMaxEntities = 100000000;  // the world keeps ~50 bytes per entity
  flags.String("out", &o.out, "DIR", "output directory (created)").Required();
  flags.Number("train_examples", &o.train_examples, "N", "training examples").Min(1);
  flags.Number("test_examples", &o.test_examples, "N", "test examples");
  flags.Number("train_files", &o.train_files, "N", "training files").Range(1, 100000);
  flags.Number("users", &o.users, "N", "users of the training population").Range(1, kMaxEntities);
  flags.Number("items", &o.items, "N", "items").Range(1, kMaxEntities);
  flags.Number("categories", &o.categories, "N", "item categories").Range(1, kMaxEntities);
  flags.Number("shops", &o.shops, "N", "shops").Range(1, kMaxEntities);
  flags.Number("zipf", &o.zipf, "S", "popularity exponent of users and items").Range(0, 10);
  flags
      .Number("cold_user_fraction", &o.cold_user_fraction, "F",
              "share of test examples whose user never appears in training (IDs above "
              "--users)")
      .Range(0, 1);
  flags.Number("seed", &o.seed, "N", "random seed");
  flags.Bool("gzip", &o.gzip, "write .tsv.gz files (zlib)");
  flags.Bool("conversions", &o.conversions,
             "add planted post-click conversions (converted, true_cvr_prob; default off)");
  flags
      .Number("cross", &o.cross, "W",
              "weight of a planted cross term in the click truth: W x the product of the "
              "--cross_fields' traits (0 = none, the default)")
      .Range(0, 10);
  flags.String("cross_fields", &o.cross_fields, "F,F,...",
               "the fields --cross multiplies: two or more of user, item, category, shop, "
               "segment, hour, device");
}

absl::Status Run(const DatagenOptions& options) {
  EMBER_ASSIGN_OR_RETURN(const DatagenSummary s, Generate(options, std::cout));
  std::cout << "done in " << s.seconds << " s: " << s.train_examples << " train examples (ctr "
            << s.train_ctr << ", top 1% items hold " << s.top1pct_item_share << " of them), "
            << s.test_examples << " test examples (ctr " << s.test_ctr << ", cold users "
            << s.cold_user_fraction << "); oracle test AUC " << s.oracle_auc << ", logloss "
            << s.oracle_logloss << std::endl;
  if (options.conversions) {
    std::cout << "conversions: cvr among clicks " << s.train_cvr << " (train), " << s.test_cvr
              << " (test, " << s.test_clicks << " clicks); oracle cvr AUC " << s.cvr_oracle_auc
              << ", ctcvr AUC " << s.ctcvr_oracle_auc << std::endl;
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ember::datagen

int main(int argc, char** argv) {
  // Validate (generator.h) checks the options again for callers of Generate.
  return ember::RunMain<ember::datagen::DatagenOptions>(
      {"ember-datagen", "datagen", ember::datagen::DeclareFlags, ember::datagen::Validate,
       ember::datagen::Run},
      argc, argv);
}
