// Copyright 2026 The Ember Authors.

#include "common/proto_diff.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace ember {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::util::MessageDifferencer;

constexpr size_t kMaxValueChars = 40;

// A field path of the differencer as "a.b[2].c".
std::string PathText(const std::vector<MessageDifferencer::SpecificField>& path) {
  std::string out;
  for (const MessageDifferencer::SpecificField& f : path) {
    if (f.field == nullptr) continue;  // an unknown field: never in Ember's messages
    absl::StrAppend(&out, out.empty() ? "" : ".", f.field->name());
    if (f.field->is_repeated() && f.index >= 0) absl::StrAppend(&out, "[", f.index, "]");
  }
  return out;
}

// The value at the end of `path` in `message` (a scalar or a sub-message), short.
std::string ValueText(const Message& message,
                      const std::vector<MessageDifferencer::SpecificField>& path, bool here) {
  const MessageDifferencer::SpecificField& last = path.back();
  const Message* parent = &message;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const FieldDescriptor* field = path[i].field;
    if (field == nullptr || field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return "?";
    const int index = here ? path[i].index : path[i].new_index;
    parent = field->is_repeated()
                 ? &parent->GetReflection()->GetRepeatedMessage(*parent, field, index)
                 : &parent->GetReflection()->GetMessage(*parent, field);
  }
  const FieldDescriptor* field = last.field;
  if (field == nullptr) return "?";
  const int index = here ? last.index : last.new_index;
  if (field->is_repeated()
          ? index < 0 || index >= parent->GetReflection()->FieldSize(*parent, field)
          : !parent->GetReflection()->HasField(*parent, field) &&
                field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    return "unset";
  }
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintFieldValueToString(*parent, field, field->is_repeated() ? index : -1, &text);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  if (text.size() > kMaxValueChars) text = absl::StrCat(text.substr(0, kMaxValueChars - 3), "...");
  return text;
}

// Collects one line per differing field.
class Collector : public MessageDifferencer::Reporter {
 public:
  Collector(const Message& here, const Message& there, std::string here_label,
            std::string there_label)
      : here_(here),
        there_(there),
        here_label_(std::move(here_label)),
        there_label_(std::move(there_label)) {}

  // Added: only `there` has the field; deleted: only `here`.
  void ReportAdded(const Message&, const Message&,
                   const std::vector<MessageDifferencer::SpecificField>& path) override {
    Add(path, /*in_here=*/false, /*in_there=*/true);
  }
  void ReportDeleted(const Message&, const Message&,
                     const std::vector<MessageDifferencer::SpecificField>& path) override {
    Add(path, /*in_here=*/true, /*in_there=*/false);
  }
  void ReportModified(const Message&, const Message&,
                      const std::vector<MessageDifferencer::SpecificField>& path) override {
    // A modified sub-message is reported after the fields inside it that differ.
    const FieldDescriptor* field = path.empty() ? nullptr : path.back().field;
    if (field != nullptr && field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) return;
    Add(path, true, true);
  }

  std::vector<std::string> lines;

 private:
  void Add(const std::vector<MessageDifferencer::SpecificField>& path, bool in_here,
           bool in_there) {
    if (path.empty()) return;
    lines.push_back(absl::StrCat(
        PathText(path), " (", in_here ? ValueText(here_, path, true) : "unset", " ", here_label_,
        ", ", in_there ? ValueText(there_, path, false) : "unset", " ", there_label_, ")"));
  }
  const Message& here_;
  const Message& there_;
  const std::string here_label_;
  const std::string there_label_;
};

}  // namespace

std::string DescribeDifference(const Message& here, const Message& there, int max_fields,
                               const std::string& here_label, const std::string& there_label) {
  Collector collector(here, there, here_label, there_label);
  MessageDifferencer differencer;
  differencer.set_report_matches(false);
  differencer.ReportDifferencesTo(&collector);
  if (differencer.Compare(here, there)) return "";
  std::vector<std::string>& lines = collector.lines;
  const size_t shown = std::min<size_t>(lines.size(), static_cast<size_t>(std::max(max_fields, 1)));
  std::string out = absl::StrJoin(lines.begin(), lines.begin() + shown, ", ");
  if (lines.size() > shown) absl::StrAppend(&out, " and ", lines.size() - shown, " more");
  return out;
}

}  // namespace ember
