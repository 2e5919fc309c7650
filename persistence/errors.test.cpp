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
