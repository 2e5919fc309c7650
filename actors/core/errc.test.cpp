#include <doctest/doctest.h>

#include <caf/sec.hpp>

#include "gost/core/errc.hpp"

using namespace gost;

TEST_CASE("errc errors carry category gost, their code and message") {
  auto err = make_error(errc::moved, "shard 3 is not on this node");
  CHECK(err == errc::moved);
  CHECK(err.category() == caf::atom("gost"));
  CHECK(error_message(err) == "shard 3 is not on this node");
  CHECK(std::string{to_string(errc::outcome_unknown)} == "outcome_unknown");
}

TEST_CASE("one classification for gost, storage and CAF errors") {
  // Not carried out where it went: ask the owner again.
  CHECK(classify(make_error(errc::moved, "")) == disposition::reroute);
  CHECK(classify(make_error(errc::fenced, "")) == disposition::reroute);
  CHECK(classify(caf::make_error(caf::sec::request_receiver_down)) == disposition::reroute);
  CHECK(classify(caf::make_error(caf::sec::no_route_to_receiving_node)) == disposition::reroute);
  // Nothing was done, something is down or full: the same call may work later.
  CHECK(classify(make_error(errc::overloaded, "")) == disposition::retry);
  CHECK(classify(make_error(errc::unavailable, "")) == disposition::retry);
  CHECK(classify(persistence::make_db_error(persistence::db_errc::unavailable, ""))
        == disposition::retry);
  // Everything else is the caller's to report; above all an outcome nobody knows.
  CHECK(classify(make_error(errc::outcome_unknown, "")) == disposition::fail);
  CHECK(classify(make_error(errc::conflict, "")) == disposition::fail);
  CHECK(classify(make_error(errc::invalid_argument, "")) == disposition::fail);
  CHECK(classify(persistence::make_db_error(persistence::db_errc::conflict, ""))
        == disposition::fail);
  CHECK(classify(caf::make_error(caf::sec::request_timeout)) == disposition::fail);
  CHECK(classify(caf::error{}) == disposition::fail);
}
