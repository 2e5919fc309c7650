#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gost/core/dependency.hpp"
#include "gost/core/errc.hpp"

using namespace gost;
using namespace std::chrono_literals;
using line = dependency_tracker::line;

namespace {

/// A tracker on a clock the test moves, writing its lines into `lines`.
struct fixture {
  dependency_tracker::clock::time_point t{};
  std::vector<std::pair<line, std::string>> lines;
  dependency_tracker dep{opts()};

  dependency_tracker::options opts() {
    dependency_tracker::options o;
    o.name = "postgresql";
    o.summary_every = 30s;
    o.now = [this] { return t; };
    o.write = [this](line kind, const std::string& text) { lines.emplace_back(kind, text); };
    return o;
  }

  size_t count(line kind) const {
    size_t n = 0;
    for (auto& l : lines)
      n += l.first == kind ? 1 : 0;
    return n;
  }
};

} // namespace

TEST_CASE(
  "one lost line, counted repeats summarised every period, one back line with the time away") {
  fixture f;
  f.t += 1h; // not the clock's epoch
  CHECK(f.dep.up());
  f.dep.succeeded(); // while up: nothing to say
  CHECK(f.lines.empty());

  f.dep.failed("connection refused\n\tIs the server running?");
  CHECK_FALSE(f.dep.up());
  REQUIRE(f.lines.size() == 1);
  CHECK(f.lines[0].first == line::lost);
  CHECK(f.lines[0].second.rfind("postgresql unreachable since=", 0) == 0);
  // One record per line: libpq's newline and tab are gone.
  CHECK(f.lines[0].second.find("error=connection refused Is the server running?")
        != std::string::npos);
  CHECK(f.lines[0].second.find('\n') == std::string::npos);

  // Repeats within the period: counted, not written.
  for (int i = 0; i < 99; ++i) {
    f.t += 100ms;
    f.dep.failed("connection refused");
  }
  CHECK(f.lines.size() == 1);
  CHECK(f.dep.down_for() == 9900ms);

  // The period is over: one summary with the count and the time so far; the error only when
  // it changed.
  f.t = f.t - 9900ms + 30s;
  f.dep.failed("connection refused\n\tIs the server running?");
  REQUIRE(f.lines.size() == 2);
  CHECK(f.lines[1].first == line::still);
  CHECK(f.lines[1].second == "postgresql still unreachable for=30.0s failed_calls=101");
  f.t += 10s;
  f.dep.failed("the database system is starting up");
  CHECK(f.lines.size() == 2);
  f.t += 20s;
  f.dep.failed("the database system is starting up");
  REQUIRE(f.lines.size() == 3);
  CHECK(f.lines[2].second
        == "postgresql still unreachable for=60.0s failed_calls=103 error=the database system "
           "is starting up");

  f.t += 2500ms;
  auto recoveries = f.dep.recoveries();
  f.dep.succeeded();
  CHECK(f.dep.up());
  CHECK(f.dep.recoveries() == recoveries + 1);
  CHECK(f.dep.down_for() == 0ms);
  REQUIRE(f.lines.size() == 4);
  CHECK(f.lines[3].first == line::back);
  CHECK(f.lines[3].second == "postgresql reachable again after=62.5s failed_calls=103");
  CHECK(f.dep.failed_calls() == 103);

  // A later outage starts over: one lost line, counted from one.
  f.dep.succeeded();
  f.t += 1s;
  f.dep.failed("connection refused");
  f.t += 4s;
  f.dep.failed("connection refused");
  f.dep.succeeded();
  CHECK(f.count(line::lost) == 2);
  CHECK(f.count(line::back) == 2);
  CHECK(f.lines.back().second == "postgresql reachable again after=4.0s failed_calls=2");
  CHECK(f.dep.failed_calls() == 105);
}

TEST_CASE("calls begun on the other side of a change do not flip it back") {
  fixture f;
  f.t += 1h;
  auto before_loss = f.t;
  f.t += 1s;
  f.dep.failed("connection refused");
  // A call that took its connection before the loss was seen and finished fine afterwards
  // says nothing about now.
  f.dep.succeeded(before_loss);
  CHECK_FALSE(f.dep.up());
  f.t += 1s;
  auto during = f.t;
  f.t += 1s;
  f.dep.succeeded();
  CHECK(f.dep.up());
  // A call begun during the outage that fails only now (a connect that hung) is a leftover:
  // counted, but no new lost line.
  f.t += 1s;
  f.dep.failed("timeout expired", during);
  CHECK(f.dep.up());
  CHECK(f.count(line::lost) == 1);
  CHECK(f.count(line::back) == 1);
  CHECK(f.dep.failed_calls() == 2);
}

TEST_CASE("concurrent callers see one lost and one back line") {
  fixture f;
  f.t += 1h;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int j = 0; j < 1000; ++j)
        f.dep.failed("connection refused");
    });
  for (auto& t : threads)
    t.join();
  threads.clear();
  f.t += 1s;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int j = 0; j < 1000; ++j)
        f.dep.succeeded();
    });
  for (auto& t : threads)
    t.join();
  CHECK(f.lines.size() == 2);
  CHECK(f.count(line::lost) == 1);
  CHECK(f.count(line::back) == 1);
  CHECK(f.lines.back().second == "postgresql reachable again after=1.0s failed_calls=4000");
}

TEST_CASE("a database outage reported by the tracker is not logged again by the caller") {
  fixture f;
  auto unavailable = persistence::make_db_error(persistence::db_errc::unavailable, "gone");
  CHECK_FALSE(db_outage_reported(&f.dep, unavailable)); // up: the caller's own to report
  CHECK_FALSE(db_outage_reported(nullptr, unavailable));
  f.dep.failed("gone");
  CHECK(db_outage_reported(&f.dep, unavailable));
  CHECK_FALSE(
    db_outage_reported(&f.dep, persistence::make_db_error(persistence::db_errc::conflict, "")));
  CHECK_FALSE(db_outage_reported(
    &f.dep, persistence::make_db_error(persistence::db_errc::outcome_unknown, "")));
  CHECK_FALSE(db_outage_reported(&f.dep, make_error(errc::unavailable, "a stage's service")));
}

TEST_CASE("a loop's pace: doubling waits up to the cap, over at once when the dependency is back") {
  auto f = std::make_shared<fixture>();
  f->t += 1h;
  auto dep = std::shared_ptr<const dependency_tracker>(f, &f->dep);
  retry_pace pace{250ms, 1s, dep};
  auto t = f->t;
  CHECK(pace.may_try(t));
  CHECK_FALSE(pace.failing());

  f->dep.failed("connection refused");
  CHECK(pace.failed(t) == 250ms);
  CHECK(pace.failing());
  CHECK_FALSE(pace.may_try(t + 249ms));
  CHECK(pace.may_try(t + 250ms));
  t += 250ms;
  CHECK(pace.failed(t) == 500ms);
  t += 500ms;
  CHECK(pace.failed(t) == 1s);
  t += 1s;
  CHECK(pace.failed(t) == 1s); // the cap
  CHECK_FALSE(pace.may_try(t + 100ms));

  // Another call saw it back: the wait ends now, not in 900 ms.
  f->dep.succeeded();
  CHECK(pace.may_try(t + 100ms));
  // Away again at once: a new outage, waited from the start.
  f->dep.failed("connection refused");
  CHECK(pace.failed(t + 100ms) == 250ms);

  // The loop's own success ends the waiting and the doubling.
  pace.succeeded();
  CHECK_FALSE(pace.failing());
  CHECK(pace.may_try(t));
  CHECK(pace.failed(t) == 250ms);

  // Without a tracker: only the loop's own wait.
  retry_pace alone{100ms, 200ms};
  CHECK(alone.failed(t) == 100ms);
  CHECK_FALSE(alone.may_try(t + 99ms));
  CHECK(alone.may_try(t + 100ms));
}
