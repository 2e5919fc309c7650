#pragma once
// Test support: a fresh database per test on the real PostgreSQL server started by
// scripts/pg.sh (see scripts/test.sh). Set GOST_TEST_PG to point elsewhere.

#include <string>

namespace gost::testing {

/// `bytes` as an SQL bytea expression: decode('<hex>', 'hex').
inline std::string bytea_literal(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out = "decode('";
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out + "', 'hex')";
}

/// The bytes of a hex text (what `encode(x, 'hex')` gives).
inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

/// Connection parameters of the test server, without a database name.
std::string test_server();

/// Creates a uniquely named database on construction and drops it on destruction.
class temp_db {
public:
  temp_db();
  ~temp_db();
  temp_db(const temp_db&) = delete;
  temp_db& operator=(const temp_db&) = delete;

  const std::string& name() const { return name_; }
  /// libpq DSN of this database.
  std::string dsn() const;
  /// Runs SQL and returns the first column of the first row ("" when no row).
  std::string scalar(const std::string& sql) const;

private:
  std::string name_;
};

/// A PostgreSQL server of the test's own, for tests that stop and start it (never the shared
/// test server): scripts/pg.sh with a data directory under /tmp and a free port. Stopped and
/// deleted on destruction. Failures throw std::runtime_error with the script's output.
class private_server {
public:
  /// `script`: the checkout's scripts/pg.sh. Initializes and starts the server.
  explicit private_server(std::string script);
  ~private_server();
  private_server(const private_server&) = delete;
  private_server& operator=(const private_server&) = delete;

  /// Starts it (again); returns once it accepts connections.
  void start();
  /// Stops it; `immediate`: at once, connections broken, as in a crash.
  void stop(bool immediate);

  int port() const { return port_; }
  /// libpq DSN of its `gost` database.
  std::string dsn() const;
  /// Runs SQL and returns the first column of the first row ("" when no row).
  std::string scalar(const std::string& sql) const;

private:
  void run(const std::string& args) const;

  std::string script_;
  std::string root_; ///< the data directory's parent (pg.sh gives it to the server's user)
  int port_ = 0;
};

} // namespace gost::testing
