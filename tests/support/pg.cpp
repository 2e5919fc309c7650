#include "gost/testing/pg.hpp"
#include "gost/testing/pg_ha.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
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

namespace {

std::string first_value(const std::string& dsn, const std::string& sql) {
  pqxx::connection c{dsn};
  pqxx::nontransaction tx{c};
  auto r = tx.exec(sql);
  if (r.empty() || r[0][0].is_null())
    return {};
  return r[0][0].as<std::string>();
}

/// A TCP port nobody listens on now (the kernel's pick for port 0).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
      || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("no free port for a private PostgreSQL");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// Runs a shell command line; its output (stdout and stderr). Throws when it fails.
std::string run_command(const std::string& line) {
  auto cmd = line + " 2>&1";
  std::string out;
  auto* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr)
    throw std::runtime_error("cannot run " + line);
  char buf[512];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;)
    out.append(buf, n);
  if (::pclose(p) != 0)
    throw std::runtime_error(line + " failed: " + out);
  return out;
}

} // namespace

private_server::private_server(std::string script) : script_(std::move(script)) {
  static std::atomic<int> counter{0};
  root_ = "/tmp/gost-private-pg-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  port_ = free_port();
  start();
}

private_server::~private_server() {
  try {
    run("destroy");
  } catch (...) {
    // Left behind under /tmp for inspection.
  }
  std::remove(root_.c_str());
}

void private_server::run(const std::string& args) const {
  run_command("GOST_PG_DIR=" + root_ + "/pg GOST_PG_PORT=" + std::to_string(port_) + " " + script_
              + " " + args);
}

void private_server::start() {
  run("start");
}

void private_server::stop(bool immediate) {
  run(immediate ? "stop immediate" : "stop");
}

std::string private_server::dsn() const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=gost dbname=gost";
}

std::string private_server::scalar(const std::string& sql) const {
  return first_value(dsn(), sql);
}

private_ha_set::private_ha_set(std::string script) : script_(std::move(script)) {
  static std::atomic<int> counter{0};
  root_ = "/tmp/gost-private-pgha-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  monitor_port_ = free_port();
  for (auto& p : ports_)
    p = free_port();
  start();
  dsn_ = run("dsn");
  while (!dsn_.empty() && dsn_.back() == '\n')
    dsn_.pop_back();
}

private_ha_set::~private_ha_set() {
  try {
    run("destroy");
  } catch (...) {
    // Left behind under /tmp for inspection.
  }
  std::remove(root_.c_str());
}

std::string private_ha_set::run(const std::string& args) const {
  return run_command("GOST_PG_HA_DIR=" + root_ + "/ha GOST_PG_HA_PORTS="
                     + std::to_string(monitor_port_) + "," + std::to_string(ports_[0]) + ","
                     + std::to_string(ports_[1]) + " " + script_ + " " + args);
}

void private_ha_set::start() {
  run("start");
}

int private_ha_set::kill_primary() {
  auto name = run("kill-primary");
  return name.rfind("a", 0) == 0 ? ports_[0] : ports_[1];
}

std::string private_ha_set::state() const {
  try {
    return run("state");
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string temp_db::scalar(const std::string& sql) const {
  return first_value(dsn(), sql);
}

} // namespace gost::testing
