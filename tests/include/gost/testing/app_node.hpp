#pragma once
// Test support for an application's PostgreSQL tier: the application's node (its
// gost::node_builder, with its stages and actor types) running inside the test's process on a
// fresh database of the test server (scripts/pg.sh; GOST_TEST_PG names another), on free
// loopback ports. Talk to it as a client would: gRPC on `channel()` (gost::entity_client, the
// OfferService and StateService stubs), HTTP on `http_port()` (/metrics, the console).
// Link gost::runtime and gost::testing.
//
//   gost::node_builder app;
//   app.add_entity_type<watchlist::watchlist>();
//   gost::testing::app_node node{app};
//   gost::entity_client<watchlist::watchlist> lists{node.channel()};
//   CHECK(lists.ask("buyer-1", add("offer-9")).ok());
//   node.restart();   // drained and stopped as a deploy stops it, started on the same database
//
// Waiting: a test waits on what it can observe (`eventually(timeout, predicate)` from
// gost/testing/process.hpp), never on the clock.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <grpcpp/grpcpp.h>

#include "gost/runtime/node.hpp"
#include "gost/runtime/node_builder.hpp"
#include "gost/testing/pg.hpp"

namespace gost::testing {

class app_node {
public:
  /// Starts `app`'s node: 8 shards, two scheduler threads, loopback on free ports, no outbox
  /// relay, warnings and errors logged; `extra` arguments after these (a later key wins:
  /// `--shard.count=2`, `--log.level=info`). The builder is copied: the test may let its own go.
  explicit app_node(node_builder app, std::vector<std::string> extra = {}) : app_(std::move(app)) {
    args_ = {
      "--pg.dsn=" + db_.dsn(),     "--grpc.listen=127.0.0.1:0", "--caf.listen=127.0.0.1:0",
      "--http.listen=127.0.0.1:0", "--shard.count=8",           "--scheduler.threads=2",
      "--outbox.relay=false",      "--log.level=warn",          "--node.id=app-node-" + db_.name()};
    args_.insert(args_.end(), extra.begin(), extra.end());
    start();
  }

  app_node(const app_node&) = delete;
  app_node& operator=(const app_node&) = delete;
  ~app_node() { stop(); }

  /// Starts the node (again) on the same database; fails the test with the reason if it
  /// cannot.
  void start() {
    REQUIRE_FALSE(node_);
    try {
      node_ = app_.start(args_);
    } catch (const std::exception& e) {
      FAIL(e.what());
    }
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(node_->grpc_port()),
                                   grpc::InsecureChannelCredentials());
  }

  /// Stops the node as a deploy does: unready, drained, leases released.
  void stop() {
    if (!node_)
      return;
    node_->stop();
    node_.reset();
    channel_.reset();
  }

  /// stop() then start(): what a handler wrote must be there after it.
  void restart() {
    stop();
    start();
  }

  /// A channel to the node's gRPC port (a new one after each start).
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  uint16_t grpc_port() const { return node_->grpc_port(); }
  uint16_t http_port() const { return node_->http_port(); }
  /// The node's database, for a test that checks what is stored (`db().scalar(sql)`).
  const temp_db& db() const noexcept { return db_; }

private:
  node_builder app_;
  temp_db db_; ///< before the node, dropped after it
  std::vector<std::string> args_;
  std::unique_ptr<runtime::node> node_;
  std::shared_ptr<grpc::Channel> channel_;
};

} // namespace gost::testing
