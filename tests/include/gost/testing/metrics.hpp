#pragma once
// Test support: reading Prometheus exposition text (gostd's /metrics, an external stage's) and
// checking it with promtool (Debian's prometheus package, scripts/install-deps.sh).

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "gost/testing/node.hpp"
#include "gost/testing/process.hpp"

namespace gost::testing {

/// The value of a series (`name{labels}` as rendered, labels in the exporter's order) in
/// exposition text; -1 when absent.
inline double metric_sample(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos)
    return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

/// `promtool check metrics` on exposition text: {exit code, promtool's output}.
inline std::pair<int, std::string> promtool_check(const std::string& text) {
  auto file = temp_path("gost-metrics");
  std::ofstream(file) << text;
  child_process p{"/bin/sh", {"-c", "promtool check metrics < " + file}};
  int rc = p.wait(std::chrono::seconds{60});
  std::remove(file.c_str());
  return {rc, p.output()};
}

} // namespace gost::testing
