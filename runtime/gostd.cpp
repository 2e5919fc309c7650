// gostd: one gost node. See `gostd --help` and docs/config.md.
#include <cstdio>

#include "gost/config/node_config.hpp"
#include "gost/runtime/node.hpp"

extern char** environ;

int main(int argc, char** argv) {
  auto r = gost::config::load_node_config(argc, argv, environ);
  if (!r.output.empty()) {
    std::fputs(r.output.c_str(), stdout);
    return 0;
  }
  if (!r.config) {
    std::fprintf(stderr, "gostd: %s\n", r.error.c_str());
    return 2;
  }
  return gost::runtime::run_node(std::move(*r.config));
}
