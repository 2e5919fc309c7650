// The 5-field cron parser (gost/scheduled/cron.hpp): what it accepts, what it refuses with
// which field named, and next firing times checked against dates worked out by hand (UTC).
#include <doctest/doctest.h>

#include "gost/scheduled/cron.hpp"

using gost::scheduled::cron_expr;

namespace {

// 2024-01-01T00:00:00Z (a Monday) in ms.
constexpr int64_t jan1_2024 = 1'704'067'200'000;
constexpr int64_t minute = 60'000;
constexpr int64_t hour = 60 * minute;
constexpr int64_t day = 24 * hour;

int64_t next(const char* expr, int64_t after) {
  std::string why;
  auto c = cron_expr::parse(expr, &why);
  REQUIRE_MESSAGE(c, why);
  auto t = c->next_after(after);
  REQUIRE(t);
  return *t;
}

std::string refusal(const char* expr) {
  std::string why;
  CHECK_FALSE(cron_expr::parse(expr, &why));
  return why;
}

} // namespace

TEST_CASE("cron: every minute fires at the next whole minute, strictly after") {
  CHECK(next("* * * * *", jan1_2024) == jan1_2024 + minute);
  CHECK(next("* * * * *", jan1_2024 + 1) == jan1_2024 + minute);
  CHECK(next("* * * * *", jan1_2024 - 1) == jan1_2024);
}

TEST_CASE("cron: minutes, hours, steps, ranges and lists") {
  CHECK(next("30 9 * * *", jan1_2024) == jan1_2024 + 9 * hour + 30 * minute);
  CHECK(next("30 9 * * *", jan1_2024 + 10 * hour) == jan1_2024 + day + 9 * hour + 30 * minute);
  CHECK(next("*/15 * * * *", jan1_2024 + 1) == jan1_2024 + 15 * minute);
  CHECK(next("5/20 * * * *", jan1_2024 + 6 * minute) == jan1_2024 + 25 * minute);
  CHECK(next("0 8-10/2 * * *", jan1_2024 + 8 * hour) == jan1_2024 + 10 * hour);
  CHECK(next("0 1,13 * * *", jan1_2024 + 2 * hour) == jan1_2024 + 13 * hour);
  CHECK(next("59 23 * * *", jan1_2024) == jan1_2024 + day - minute);
}

TEST_CASE("cron: days of the month, months and weekdays") {
  // 2024-01-06 is a Saturday; 2024-01-07 a Sunday.
  CHECK(next("0 0 * * SAT", jan1_2024) == jan1_2024 + 5 * day);
  CHECK(next("0 0 * * 0", jan1_2024) == jan1_2024 + 6 * day);
  CHECK(next("0 0 * * 7", jan1_2024) == jan1_2024 + 6 * day);
  CHECK(next("0 0 1 * *", jan1_2024) == jan1_2024 + 31 * day);   // 2024-02-01
  CHECK(next("0 0 1 mar *", jan1_2024) == jan1_2024 + 60 * day); // 2024 is a leap year
  // Both day fields restricted: either matches (the 15th, or a Monday: 2024-01-08).
  CHECK(next("0 0 15 * MON", jan1_2024) == jan1_2024 + 7 * day);
  // 29 February: the next one after 2024's is 2028-02-29.
  int64_t feb29_2024 = jan1_2024 + 59 * day;
  CHECK(next("0 0 29 2 *", jan1_2024) == feb29_2024);
  CHECK(next("0 0 29 2 *", feb29_2024) == feb29_2024 + (366 + 365 * 3) * day);
  // Year end rolls over.
  CHECK(next("0 0 1 1 *", jan1_2024) == jan1_2024 + 366 * day);
}

TEST_CASE("cron: an expression that never fires has no next time") {
  auto c = cron_expr::parse("0 0 30 2 *", nullptr);
  REQUIRE(c);
  CHECK_FALSE(c->next_after(jan1_2024));
}

TEST_CASE("cron: refusals name the field") {
  CHECK(refusal("* * * *").find("5 fields") != std::string::npos);
  CHECK(refusal("60 * * * *").find("minute") != std::string::npos);
  CHECK(refusal("* 24 * * *").find("hour") != std::string::npos);
  CHECK(refusal("* * 0 * *").find("day-of-month") != std::string::npos);
  CHECK(refusal("* * * 13 *").find("month") != std::string::npos);
  CHECK(refusal("* * * * 8").find("day-of-week") != std::string::npos);
  CHECK(refusal("*/0 * * * *").find("step") != std::string::npos);
  CHECK(refusal("5-1 * * * *").find("minute") != std::string::npos);
  CHECK(refusal("a * * * *").find("minute") != std::string::npos);
  CHECK(refusal("1,,2 * * * *").find("empty") != std::string::npos);
  CHECK(refusal("* * * FOO *").find("month") != std::string::npos);
}
