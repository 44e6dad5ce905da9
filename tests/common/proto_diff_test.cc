// Copyright 2026 The Ember Authors.
//
// DescribeDifference names the fields that differ, with both values.

#include "common/proto_diff.h"

#include "ember/v1/model.pb.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

v1::ModelConfig Config() {
  v1::ModelConfig config;
  config.set_name("ctr");
  config.mutable_training()->set_batch_size(128);
  v1::TableConfig* table = config.add_tables();
  table->set_name("item");
  table->set_dim(16);
  config.add_tables()->set_name("user");
  return config;
}

TEST(ProtoDiffTest, EqualMessagesHaveNoDifference) {
  EXPECT_EQ(DescribeDifference(Config(), Config()), "");
}

TEST(ProtoDiffTest, NamesEachDifferingFieldWithBothValues) {
  v1::ModelConfig other = Config();
  other.mutable_training()->set_batch_size(256);
  other.mutable_tables(0)->set_dim(8);
  EXPECT_EQ(DescribeDifference(other, Config()),
            "tables[0].dim (8 here, 16 there), training.batch_size (256 here, 128 there)");
}

TEST(ProtoDiffTest, AnElementOnlyOneSideHasIsUnsetOnTheOther) {
  v1::ModelConfig fewer = Config();
  fewer.mutable_tables()->RemoveLast();
  const std::string diff = DescribeDifference(fewer, Config());
  EXPECT_NE(diff.find("tables[1]"), std::string::npos) << diff;
  EXPECT_NE(diff.find("unset here"), std::string::npos) << diff;
  EXPECT_NE(diff.find("user"), std::string::npos) << diff;
  EXPECT_EQ(DescribeDifference(Config(), fewer), "tables[1] (name: \"user\" here, unset there)");
}

TEST(ProtoDiffTest, ManyDifferencesAreCappedWithACount) {
  v1::ModelConfig other = Config();
  other.set_name("other");
  other.mutable_training()->set_batch_size(1);
  other.mutable_training()->set_epochs(9);
  other.mutable_tables(0)->set_dim(2);
  const std::string diff = DescribeDifference(other, Config(), 2, "this worker", "the run");
  EXPECT_NE(diff.find(" and 2 more"), std::string::npos) << diff;
  EXPECT_NE(diff.find("name (\"other\" this worker, \"ctr\" the run)"), std::string::npos) << diff;
}

}  // namespace
}  // namespace ember
