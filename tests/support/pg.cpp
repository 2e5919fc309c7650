#include "gost/testing/pg.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include <pqxx/pqxx>

namespace gost::testing {

std::string test_server() {
  if (auto e = std::getenv("GOST_TEST_PG"))
    return e;
  return "host=127.0.0.1 port=54329 user=gost";
}

namespace {

std::string admin_dsn() {
  return test_server() + " dbname=postgres";
}

void admin_exec(const std::string& sql) {
  try {
    pqxx::connection c{admin_dsn()};
    pqxx::nontransaction tx{c};
    tx.exec(sql);
  } catch (const pqxx::broken_connection& e) {
    throw std::runtime_error("cannot reach the test PostgreSQL (" + test_server()
                             + "): start it with `scripts/pg.sh start` or set GOST_TEST_PG; "
                             + e.what());
  }
}

} // namespace

temp_db::temp_db() {
  static std::atomic<int> counter{0};
  name_ = "gost_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  admin_exec("DROP DATABASE IF EXISTS " + name_);
  admin_exec("CREATE DATABASE " + name_);
}

temp_db::~temp_db() {
  try {
    admin_exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  } catch (...) {
    // Left behind for inspection; the next run's names differ.
  }
}

std::string temp_db::dsn() const {
  return test_server() + " dbname=" + name_;
}

std::string temp_db::scalar(const std::string& sql) const {
  pqxx::connection c{dsn()};
  pqxx::nontransaction tx{c};
  auto r = tx.exec(sql);
  if (r.empty() || r[0][0].is_null())
    return {};
  return r[0][0].as<std::string>();
}

} // namespace gost::testing
