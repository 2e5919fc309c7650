// The rules of scheduled actions (gost/scheduled/rules.hpp) without a database: validation
// naming the field, occurrences, back-off, and the status through attempts — including the
// recount of an attempt a crash interrupted.
#include <doctest/doctest.h>

#include "gost/scheduled/rules.hpp"

using namespace gost::scheduled;
using gost::v1::ScheduledActionSpec;
using gost::v1::ScheduledActionStatus;

namespace {

constexpr int64_t t0 = 1'704'067'200'000; // 2024-01-01T00:00:00Z

ScheduledActionSpec http_spec(const std::string& url) {
  ScheduledActionSpec s;
  s.set_start_at_ms(t0);
  s.mutable_http()->set_url(url);
  return s;
}

std::string field_of(const ScheduledActionSpec& s, rules_options o = {}) {
  auto e = check_spec(s, o, t0);
  return e ? e->field : std::string{};
}

} // namespace

TEST_CASE("ids") {
  CHECK_FALSE(check_id("report:daily-1.a_b"));
  CHECK(check_id("")->field == "id");
  CHECK(check_id("a b")->field == "id");
  CHECK(check_id(std::string(129, 'a'))->field == "id");
}

TEST_CASE("validation names the field") {
  CHECK(field_of(http_spec("https://example.com/hook")).empty());
  ScheduledActionSpec none;
  CHECK(field_of(none) == "spec.action");
  auto s = http_spec("https://example.com/");
  s.set_cron("61 * * * *");
  CHECK(field_of(s) == "spec.cron");
  s.set_cron("0 0 30 2 *");
  CHECK(check_spec(s, {}, t0)->message == "never fires");
  s = http_spec("https://example.com/");
  s.set_end_at_ms(t0 - 1);
  CHECK(field_of(s) == "spec.start_at_ms");
  s = http_spec("https://example.com/");
  s.set_interval_ms(1);
  CHECK(field_of(s) == "spec.interval_ms");
  CHECK(field_of(http_spec("ftp://example.com/")) == "spec.http.url");
  CHECK(field_of(http_spec("example.com/")) == "spec.http.url");
  CHECK(field_of(http_spec("http://example.com:99999/")) == "spec.http.url");
  s = http_spec("https://example.com/");
  s.mutable_http()->set_method("TRACE");
  CHECK(field_of(s) == "spec.http.method");
  s = http_spec("https://example.com/");
  (*s.mutable_http()->mutable_headers())["X-A"] = "1\r\nX-B: 2";
  CHECK(field_of(s) == "spec.http.headers");
  s = http_spec("https://example.com/");
  s.mutable_retry()->set_max_attempts(-1);
  CHECK(field_of(s) == "spec.retry.max_attempts");
  ScheduledActionSpec k;
  k.mutable_kafka()->set_topic("bad topic");
  CHECK(field_of(k) == "spec.kafka.topic");
  ScheduledActionSpec ev;
  ev.mutable_event();
  CHECK(field_of(ev) == "spec.event.target");
  ev.mutable_event()->mutable_offer_requeue()->set_offer_id("o1");
  CHECK(field_of(ev) == "spec.event.offer_requeue.stage_id");
}

TEST_CASE("loopback and private targets are refused unless allowed") {
  for (auto url :
       {"http://localhost:8080/", "http://127.0.0.1/", "http://127.1/", "http://2130706433/",
        "http://10.1.2.3/", "http://172.16.0.1/", "http://192.168.1.1/",
        "http://169.254.169.254/latest", "http://0.0.0.0/", "http://[::1]:80/", "http://[fd00::1]/",
        "http://[fe80::1]/", "http://[::ffff:127.0.0.1]/", "http://user@api.localhost/",
        "http://LOCALHOST./"}) {
    INFO(url);
    CHECK(field_of(http_spec(url)) == "spec.http.url");
    rules_options allow;
    allow.allow_private_targets = true;
    CHECK(field_of(http_spec(url), allow).empty());
  }
  for (auto url : {"http://8.8.8.8/", "https://example.com/", "http://172.32.0.1/",
                   "http://[2001:db8::1]/", "http://11.0.0.1/"}) {
    INFO(url);
    CHECK(field_of(http_spec(url)).empty());
  }
}

TEST_CASE("occurrences: once, interval, cron, end") {
  ScheduledActionSpec once;
  once.set_start_at_ms(t0 + 5);
  CHECK(first_occurrence(once, t0) == t0 + 5);
  CHECK_FALSE(next_occurrence(once, t0 + 5));
  ScheduledActionSpec now;
  CHECK(first_occurrence(now, t0 + 7) == t0 + 7);

  ScheduledActionSpec every;
  every.set_start_at_ms(t0);
  every.set_interval_ms(1000);
  CHECK(next_occurrence(every, t0) == t0 + 1000);
  CHECK(next_occurrence(every, t0 + 999) == t0 + 1000);
  CHECK(next_occurrence(every, t0 + 1000) == t0 + 2000);
  CHECK(next_occurrence(every, t0 - 50) == t0);
  every.set_end_at_ms(t0 + 2500);
  CHECK(next_occurrence(every, t0 + 2000) == std::nullopt);

  ScheduledActionSpec cron;
  cron.set_start_at_ms(t0 + 1);
  cron.set_cron("0 * * * *");
  CHECK(first_occurrence(cron, t0) == t0 + 3'600'000);
  cron.set_start_at_ms(t0);
  CHECK(first_occurrence(cron, t0) == t0); // a start on a matching minute fires then
}

TEST_CASE("back-off doubles up to its cap") {
  retry_settings r;
  r.backoff_ms = 100;
  r.max_backoff_ms = 350;
  CHECK(retry_delay_ms(r, 1) == 100);
  CHECK(retry_delay_ms(r, 2) == 200);
  CHECK(retry_delay_ms(r, 3) == 350);
  CHECK(retry_delay_ms(r, 30) == 350);
  ScheduledActionSpec s;
  rules_options o;
  auto e = effective_retry(s, o);
  CHECK(e.max_attempts == o.default_max_attempts);
  CHECK(e.max_backoff_ms == 32 * o.default_backoff_ms);
  CHECK(idempotency_key("a1", 1234) == "a1/1234");
}

TEST_CASE("an occurrence failing twice then succeeding: counters exact, retries at back-off") {
  ScheduledActionSpec s;
  s.set_start_at_ms(t0);
  s.set_interval_ms(60'000);
  s.mutable_retry()->set_max_attempts(3);
  s.mutable_retry()->set_backoff_ms(100);
  rules_options o;
  auto st = start_status(s, t0, nullptr);
  CHECK(st.scheduled_at_ms() == t0);

  auto not_yet = begin_attempt(st, s, o, t0 - 1);
  CHECK_FALSE(not_yet.act);
  CHECK(not_yet.due_ms == t0);

  auto b1 = begin_attempt(st, s, o, t0);
  REQUIRE(b1.act);
  CHECK(b1.due_ms == t0 + 100); // rescheduled to the retry time before acting
  CHECK(finish_attempt(st, s, o, t0 + 10, false, "503") == t0 + 100);
  CHECK(st.failures_in_row() == 1);

  CHECK_FALSE(begin_attempt(st, s, o, t0 + 50).act);
  auto b2 = begin_attempt(st, s, o, t0 + 100);
  REQUIRE(b2.act);
  CHECK(b2.due_ms == t0 + 300);
  CHECK(finish_attempt(st, s, o, t0 + 110, false, "timeout") == t0 + 300);

  auto b3 = begin_attempt(st, s, o, t0 + 300);
  REQUIRE(b3.act);
  CHECK(st.attempt() == 3);
  CHECK(finish_attempt(st, s, o, t0 + 310, true, "") == t0 + 60'000);
  CHECK(st.successes() == 1);
  CHECK(st.failures_in_row() == 0);
  CHECK(st.total_failures() == 2);
  CHECK(st.last_error() == "timeout");
  CHECK(st.attempt() == 0);
  CHECK(st.gave_up() == 0);
}

TEST_CASE("past max attempts the occurrence is given up and the next one scheduled") {
  ScheduledActionSpec s;
  s.set_start_at_ms(t0);
  s.set_interval_ms(60'000);
  s.mutable_retry()->set_max_attempts(2);
  s.mutable_retry()->set_backoff_ms(100);
  rules_options o;
  auto st = start_status(s, t0, nullptr);
  REQUIRE(begin_attempt(st, s, o, t0).act);
  CHECK(finish_attempt(st, s, o, t0, false, "down") == t0 + 100);
  REQUIRE(begin_attempt(st, s, o, t0 + 100).act);
  CHECK(finish_attempt(st, s, o, t0 + 100, false, "down") == t0 + 60'000);
  CHECK(st.gave_up() == 1);
  CHECK(st.failures_in_row() == 2);
  CHECK(st.total_failures() == 2);
  CHECK(st.scheduled_at_ms() == t0 + 60'000);
  CHECK_FALSE(st.finished());
}

TEST_CASE("an interrupted attempt is counted as failed before the next one") {
  ScheduledActionSpec s;
  s.set_start_at_ms(t0);
  s.mutable_retry()->set_max_attempts(2);
  s.mutable_retry()->set_backoff_ms(100);
  rules_options o;
  auto st = start_status(s, t0, nullptr);
  REQUIRE(begin_attempt(st, s, o, t0).act);
  // The worker dies here: the row is due at t0 + 100 (the retry time written before acting).
  auto again = begin_attempt(st, s, o, t0 + 100);
  CHECK(again.recounted);
  REQUIRE(again.act);
  CHECK(st.interrupted() == 1);
  CHECK(st.total_failures() == 1);
  CHECK(st.attempt() == 2);
  // Dies again: the second interrupted attempt exhausts the policy; a one-shot finishes.
  auto last = begin_attempt(st, s, o, t0 + 400);
  CHECK(last.recounted);
  CHECK_FALSE(last.act);
  CHECK_FALSE(last.due_ms);
  CHECK(st.finished());
  CHECK(st.gave_up() == 1);
  CHECK(st.total_failures() == 2);
  CHECK_FALSE(st.in_flight());
}

TEST_CASE("a one-shot success finishes; an update keeps the counters and starts over") {
  ScheduledActionSpec s;
  s.set_start_at_ms(t0);
  rules_options o;
  auto st = start_status(s, t0, nullptr);
  REQUIRE(begin_attempt(st, s, o, t0).act);
  CHECK_FALSE(finish_attempt(st, s, o, t0, true, ""));
  CHECK(st.finished());
  CHECK_FALSE(begin_attempt(st, s, o, t0 + 1'000'000).act);
  s.set_start_at_ms(t0 + 5000);
  auto st2 = start_status(s, t0 + 10, &st);
  CHECK(st2.successes() == 1);
  CHECK_FALSE(st2.finished());
  CHECK(st2.scheduled_at_ms() == t0 + 5000);
}

TEST_CASE("pause parks, resume fires the missed occurrences once, run-now keeps the schedule") {
  auto spec = http_spec("https://example.com/hook");
  spec.set_interval_ms(1000);
  rules_options o;
  auto st = start_status(spec, t0, nullptr);
  std::optional<interrupted_attempt> recounted;
  REQUIRE(pause(st, spec, o, t0, "alice", &recounted));
  CHECK_FALSE(recounted);
  CHECK_FALSE(pause(st, spec, o, t0, "alice", &recounted)); // paused already
  auto b = begin_attempt(st, spec, o, t0 + 5000);
  CHECK_FALSE(b.act);
  CHECK_FALSE(b.due_ms); // parked
  std::string refusal;
  CHECK_FALSE(run_now(st, spec, o, t0, &recounted, &refusal));
  CHECK(refusal == "is paused; resume it first");
  // An update keeps the pause.
  CHECK(start_status(spec, t0, &st).paused());
  REQUIRE(resume(st, spec, o, t0 + 5000, &recounted));
  CHECK_FALSE(resume(st, spec, o, t0 + 5000, &recounted));
  b = begin_attempt(st, spec, o, t0 + 5000);
  REQUIRE(b.act);
  CHECK(st.scheduled_at_ms() == t0); // the missed occurrences: one firing
  CHECK(finish_attempt(st, spec, o, t0 + 5001, true, "") == t0 + 6000);

  // Run-now: an attempt of its own, the schedule as it was, no retry when it fails.
  REQUIRE(run_now(st, spec, o, t0 + 5100, &recounted, &refusal));
  CHECK_FALSE(run_now(st, spec, o, t0 + 5100, &recounted, &refusal)); // pending already
  b = begin_attempt(st, spec, o, t0 + 5100);
  REQUIRE(b.act);
  CHECK(b.run_now);
  CHECK(st.attempt() == 0);
  CHECK(finish_attempt(st, spec, o, t0 + 5102, false, "HTTP 500") == t0 + 6000);
  CHECK(st.run_now_at_ms() == 0);
  CHECK(st.failures_in_row() == 1);
  CHECK(st.scheduled_at_ms() == t0 + 6000);

  // A verb finding an attempt in flight counts it as interrupted (its outcome is dropped).
  b = begin_attempt(st, spec, o, t0 + 6000);
  REQUIRE(b.act);
  REQUIRE(pause(st, spec, o, t0 + 6001, "bob", &recounted));
  REQUIRE(recounted);
  CHECK(recounted->occurrence_ms == t0 + 6000);
  CHECK(recounted->attempt == 1);
  CHECK_FALSE(st.in_flight());
  CHECK(st.interrupted() == 1);
  CHECK(st.failures_in_row() == 2);

  // A run-now interrupted by a crash is counted once and not retried.
  REQUIRE(resume(st, spec, o, t0 + 6002, &recounted));
  REQUIRE(run_now(st, spec, o, t0 + 6003, &recounted, &refusal));
  b = begin_attempt(st, spec, o, t0 + 6003);
  REQUIRE(b.run_now);
  b = begin_attempt(st, spec, o, t0 + 8000); // the worker crashed; the next begin
  CHECK(b.recounted);
  REQUIRE(b.interrupted);
  CHECK(b.interrupted->run_now);
  CHECK(st.run_now_at_ms() == 0);
  CHECK(b.act); // the schedule's own retry of t0 + 6000
  CHECK_FALSE(b.run_now);
}
