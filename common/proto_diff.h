// Copyright 2026 The Ember Authors.
//
// DescribeDifference: which fields of two messages of one type differ, for errors that
// must say more than "another config" (a worker joining a run, a checkpoint restored
// into a job): "tables[0].dim (16 here, 8 there), training.batch_size (256 here, 128
// there)".

#ifndef EMBER_COMMON_PROTO_DIFF_H_
#define EMBER_COMMON_PROTO_DIFF_H_

#include <string>

#include "google/protobuf/message.h"

namespace ember {

// The fields where `here` and `there` differ, in field-number order, as dotted paths
// with both values labelled `here_label` and `there_label`, at most `max_fields` of
// them (then "and N more"); "" when they are equal. Repeated fields compare element by
// element; a missing element or sub-message reads "unset". REQUIRES: both of one
// message type.
std::string DescribeDifference(const google::protobuf::Message& here,
                               const google::protobuf::Message& there, int max_fields = 3,
                               const std::string& here_label = "here",
                               const std::string& there_label = "there");

}  // namespace ember

#endif  // EMBER_COMMON_PROTO_DIFF_H_
