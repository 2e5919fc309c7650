#pragma once
// Test support: gostd as a child process on a temporary database, on free ports.

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"

namespace gost::testing {

/// A fresh path under /tmp for this process (a port file, a scratch file).
inline std::string temp_path(const std::string& stem) {
  return "/tmp/" + stem + "-" + std::to_string(getpid()) + "-"
         + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

/// A one-node gostd on `db`: loopback on free ports (written to `port_file`), 8 shards, two
/// scheduler threads; `extra` after these (a later key wins).
inline std::vector<std::string> node_args(const temp_db& db, const std::string& port_file,
                                          std::vector<std::string> extra = {}) {
  std::vector<std::string> args{
    "--pg.dsn=" + db.dsn(),     "--grpc.listen=127.0.0.1:0", "--grpc.port_file=" + port_file,
    "--caf.listen=127.0.0.1:0", "--shard.count=8",           "--scheduler.threads=2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

/// Waits for the node's port file; returns {gRPC port, admin HTTP port}.
inline std::pair<int, int> read_ports(child_process& p, const std::string& port_file) {
  int grpc_port = 0;
  int http_port = 0;
  bool up = eventually(std::chrono::seconds{30}, [&] {
    std::ifstream in(port_file);
    return static_cast<bool>(in >> grpc_port >> http_port) || !p.running();
  });
  REQUIRE_MESSAGE(up, p.output());
  REQUIRE_MESSAGE(grpc_port > 0, p.output());
  return {grpc_port, http_port};
}

} // namespace gost::testing
