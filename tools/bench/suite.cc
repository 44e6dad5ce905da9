// Copyright 2026 The Ember Authors.

#include "tools/bench/suite.h"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace ember::bench {
namespace {

// Function-local so registration from any translation unit's static initializers
// sees a constructed map regardless of initialization order.
std::map<std::string, Suite, std::less<>>& Registry() {
  static auto* registry = new std::map<std::string, Suite, std::less<>>();
  return *registry;
}

}  // namespace

bool RegisterSuite(Suite suite) {
  const std::string name = suite.name;
  if (!Registry().emplace(name, std::move(suite)).second) {
    std::fprintf(stderr, "ember-bench: suite '%s' registered twice\n", name.c_str());
    std::abort();
  }
  return true;
}

const Suite* FindSuite(std::string_view name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : &it->second;
}

std::vector<const Suite*> AllSuites() {
  std::vector<const Suite*> out;
  for (const auto& [name, suite] : Registry()) out.push_back(&suite);
  return out;
}

}  // namespace ember::bench
