// Shard groups through gostd and gostctl (issue 28, ADR 0023 build step 1): `gostctl groups`
// lists the catalog's map, `gostctl group add NAME DSN` declares a group on a second
// PostgreSQL server of the test's own, whose database the node migrates and gives the
// installation's shard count before the catalog's row is written; the refusals (a name taken,
// no name, a server that cannot be reached, a database of another shard count) each with its
// gRPC status and what to fix, the DSN's password never shown.
#include <doctest/doctest.h>

#include <grpcpp/grpcpp.h>

#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/v1/admin.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

/// A gostd on its own catalog database, and its AdminService.
struct group_node {
  testing::temp_db db;
  std::string port_file = testing::temp_path("gostd-groups");
  child_process proc;
  std::string addr;
  std::unique_ptr<v1::AdminService::Stub> admin;

  explicit group_node(std::vector<std::string> extra = {})
    : proc{GOSTD_PATH, testing::node_args(db, port_file, std::move(extra))} {
    auto [grpc_port, http_port] = testing::read_ports(proc, port_file);
    (void)http_port;
    addr = "127.0.0.1:" + std::to_string(grpc_port);
    admin =
      v1::AdminService::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  }

  /// gostctl against this node; {exit code, output}.
  std::pair<int, std::string> ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {"--addr", addr});
    child_process p{GOSTCTL_PATH, std::move(args)};
    int rc = p.wait(60s);
    return {rc, p.output()};
  }

  grpc::Status add(const std::string& name, const std::string& dsn) {
    grpc::ClientContext ctx;
    v1::AddGroupRequest req;
    req.set_name(name);
    req.set_dsn(dsn);
    v1::AddGroupResponse resp;
    return admin->AddGroup(&ctx, req, &resp);
  }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("gostctl groups and group add: a second server's database is migrated and given the "
          "installation's shard count; the refusals say what to fix") {
  group_node n; // 8 shards (testing::node_args)
  testing::private_server second{std::string{GOST_SOURCE_DIR} + "/scripts/pg.sh"};
  // The test servers trust loopback: the password is carried, never checked, never shown.
  auto east_dsn = second.dsn() + " password=s3cret";

  auto [rc, out] = n.ctl({"groups"});
  REQUIRE_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(has(out, "shard map version 1, 8 shards"), out);
  CHECK_MESSAGE(has(out, "    0 main                   8  0-7"), out);

  std::tie(rc, out) = n.ctl({"group", "add", "east", east_dsn, "--who", "ops"});
  REQUIRE_MESSAGE(rc == 0, out << n.proc.output());
  CHECK_MESSAGE(has(out, "group 1 `east` added"), out);
  CHECK_MESSAGE(has(out, "its installation row created"), out);
  // Migrated: the schema is there, and the installation's shard count.
  CHECK(second.scalar("SELECT to_regclass('offers') IS NOT NULL") == "t");
  CHECK(second.scalar("SELECT to_regclass('shard_leases') IS NOT NULL") == "t");
  CHECK(second.scalar("SELECT count(*) > 20 FROM schema_migrations") == "t");
  CHECK(second.scalar("SELECT shard_count FROM installation") == "8");
  CHECK(n.db.scalar("SELECT dsn FROM shard_groups WHERE name = 'east'") == east_dsn);
  auto log = n.proc.output();
  CHECK_MESSAGE(has(log, "group added group=1 name=east"), log);
  CHECK_MESSAGE(has(log, "by=ops"), log);
  CHECK_MESSAGE(!has(log, "s3cret"), log);

  std::tie(rc, out) = n.ctl({"groups"});
  REQUIRE_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(has(out, "shard map version 2, 8 shards"), out);
  CHECK_MESSAGE(has(out, "    1 east                   0  -"), out);
  CHECK_MESSAGE(has(out, "password=***"), out);
  CHECK_MESSAGE(!has(out, "s3cret"), out);
  std::tie(rc, out) = n.ctl({"groups", "--json"});
  REQUIRE_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(has(out, "\"name\": \"east\""), out);
  CHECK_MESSAGE(!has(out, "s3cret"), out);

  // Taken: the name, and the database (its DSN).
  std::tie(rc, out) = n.ctl({"group", "add", "east", "host=127.0.0.1 dbname=elsewhere"});
  CHECK(rc == 1);
  CHECK_MESSAGE(has(out, "gostctl: 6: "), out); // ALREADY_EXISTS
  CHECK_MESSAGE(has(out, "a group named `east` exists"), out);
  auto s = n.add("west", east_dsn);
  CHECK(s.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK(s.error_message() == "group `east` has this connection string");
  // Nothing to name it by, or no database.
  CHECK(n.add("", east_dsn).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  s = n.add("west", "");
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(has(s.error_message(), "needs the connection string of its database"));
  std::tie(rc, out) = n.ctl({"group", "add", "west"});
  CHECK(rc == 2);
  CHECK_MESSAGE(has(out, "usage: gostctl group add NAME DSN"), out);

  // A server that is not there: libpq's reason, the password masked, nothing declared.
  second.stop(false);
  std::tie(rc, out) = n.ctl({"group", "add", "west",
                             "host=127.0.0.1 port=" + std::to_string(second.port())
                               + " user=gost dbname=west password=hunter2"});
  CHECK(rc == 1);
  CHECK_MESSAGE(has(out, "gostctl: 14: "), out); // UNAVAILABLE
  CHECK_MESSAGE(has(out, "cannot reach group `west`'s database"), out);
  CHECK_MESSAGE(has(out, "password=***"), out);
  CHECK_MESSAGE(has(out, "refused"), out); // libpq's reason
  CHECK_MESSAGE(!has(out + n.proc.output(), "hunter2"), out);
  second.start();

  // The database of an installation of 8 shards offered to one of 16: refused, not declared.
  group_node wide{{"--shard.count=16"}};
  s = wide.add("east", east_dsn);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_MESSAGE(has(s.error_message(), "belongs to an installation of 8 shards, this one has 16"),
                s.error_message());
  CHECK(!has(s.error_message(), "s3cret"));
  CHECK(wide.db.scalar("SELECT count(*) FROM shard_groups") == "1");
  CHECK(n.db.scalar("SELECT version FROM shard_map") == "2");
}
