// Copyright 2026 The Ember Authors.
//
// Reading a worker run directory's result.json in end-to-end tests.

#ifndef EMBER_TOOLS_HARNESS_RESULT_JSON_H_
#define EMBER_TOOLS_HARNESS_RESULT_JSON_H_

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace ember {

// The whole file ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The raw JSON value of `key` in a flat JSON object ("" when absent).
inline std::string JsonValue(const std::string& json, const std::string& key) {
  const std::regex re("\"" + key + "\": (\"[^\"]*\"|[^,\\n]*)");
  std::smatch m;
  if (!std::regex_search(json, m, re)) return "";
  return m[1].str();
}

}  // namespace ember

#endif  // EMBER_TOOLS_HARNESS_RESULT_JSON_H_
