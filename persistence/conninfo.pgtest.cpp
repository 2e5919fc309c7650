#include <doctest/doctest.h>

#include <chrono>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <pqxx/pqxx>

#include "gost/persistence/conninfo.hpp"
#include "gost/testing/pg.hpp"

using namespace std::chrono_literals;
using gost::persistence::masked_dsn;
using gost::persistence::masked_password;
using gost::persistence::with_conninfo_defaults;
using gost::persistence::with_tcp_timeouts;

namespace {

int sockopt(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  REQUIRE(getsockopt(fd, level, name, &v, &len) == 0);
  return v;
}

} // namespace

TEST_CASE("conninfo: parameters are added in the DSN's own form, never over its own settings") {
  CHECK(with_conninfo_defaults("host=h user=u", {{"keepalives", "1"}, {"keepalives_idle", "2"}})
        == "host=h user=u keepalives=1 keepalives_idle=2");
  // `keepalives_idle` set does not count as `keepalives` set, nor the other way round.
  CHECK(with_conninfo_defaults("host=h keepalives_idle = 9",
                               {{"keepalives", "1"}, {"keepalives_idle", "2"}})
        == "host=h keepalives_idle = 9 keepalives=1");
  CHECK(with_conninfo_defaults("postgresql://u@h/db", {{"a", "1"}, {"b", "2"}})
        == "postgresql://u@h/db?a=1&b=2");
  CHECK(with_conninfo_defaults("postgresql://u@h/db?sslmode=disable&a=5", {{"a", "1"}, {"b", "2"}})
        == "postgresql://u@h/db?sslmode=disable&a=5&b=2");
  CHECK(with_tcp_timeouts("host=h", 0ms) == "host=h");
  CHECK(with_tcp_timeouts("host=h", 5000ms)
        == "host=h keepalives=1 keepalives_idle=1 keepalives_interval=1 keepalives_count=3 "
           "tcp_user_timeout=5000");
}

TEST_CASE("conninfo: a DSN's password is masked in the DSN and in a message quoting it") {
  CHECK(masked_dsn("host=h password=s3cret user=u") == "host=h password=*** user=u");
  CHECK(masked_dsn("password = 's3 cr\\'et' host=h") == "password = '***' host=h");
  CHECK(masked_dsn("postgresql://u:s3cret@h/db") == "postgresql://u:***@h/db");
  CHECK(masked_dsn("postgresql://u@h/db?sslmode=disable&password=s3cret")
        == "postgresql://u@h/db?sslmode=disable&password=***");
  CHECK(masked_dsn("host=h user=u") == "host=h user=u");
  CHECK(masked_dsn("host=h passwordfile=x") == "host=h passwordfile=x");
  CHECK(masked_password("cannot reach h: auth failed for s3cret", "host=h password=s3cret")
        == "cannot reach h: auth failed for ***");
}

TEST_CASE("conninfo: the TCP timeouts reach the connection's socket; the DSN's own settings win") {
  gost::testing::temp_db db;
  {
    pqxx::connection c{with_tcp_timeouts(db.dsn(), 12'000ms)};
    int fd = c.sock();
    REQUIRE(fd >= 0);
    CHECK(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE) == 1);
    CHECK(sockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE) == 3);
    CHECK(sockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL) == 3);
    CHECK(sockopt(fd, IPPROTO_TCP, TCP_KEEPCNT) == 3);
    CHECK(sockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT) == 12'000);
  }
  {
    pqxx::connection c{with_tcp_timeouts(db.dsn() + " keepalives_idle=7", 12'000ms)};
    CHECK(sockopt(c.sock(), IPPROTO_TCP, TCP_KEEPIDLE) == 7);
    CHECK(sockopt(c.sock(), IPPROTO_TCP, TCP_USER_TIMEOUT) == 12'000);
  }
}
