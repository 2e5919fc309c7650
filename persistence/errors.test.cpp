#include <doctest/doctest.h>

#include "gost/persistence/errors.hpp"

using namespace gost::persistence;

TEST_CASE("db errors carry their code and message") {
  auto err = make_db_error(db_errc::conflict, "offer x moved");
  CHECK(err == db_errc::conflict);
  CHECK(err.category() == caf::atom("db"));
  CHECK(error_message(err) == "offer x moved");
  CHECK(error_message(caf::error{}).empty());
}

TEST_CASE("only unavailable is retryable as is") {
  CHECK(retryable(db_errc::unavailable));
  CHECK_FALSE(retryable(db_errc::conflict));
  CHECK_FALSE(retryable(db_errc::internal));
}

TEST_CASE("db errors are one line: libpq's newlines and tabs become single spaces") {
  auto err = make_db_error(db_errc::unavailable,
                           "database connection lost: connection to server at \"127.0.0.1\", "
                           "port 5432 failed: Connection refused\n\tIs the server running on that "
                           "host and accepting TCP/IP connections?\n");
  CHECK(error_message(err)
        == "database connection lost: connection to server at \"127.0.0.1\", port 5432 failed: "
           "Connection refused Is the server running on that host and accepting TCP/IP "
           "connections?");
  CHECK(single_line("  a \r\n\n b\t") == "a b");
  CHECK(single_line("").empty());
}
