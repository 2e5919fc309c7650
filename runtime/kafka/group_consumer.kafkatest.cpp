// The Kafka kit's consumer loop against the real broker (GOST_TEST_KAFKA): at least once,
// never past a message that was not handled, and a stop that cuts every wait short.
#include <doctest/doctest.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "gost/core/errc.hpp"
#include "gost/testing/kafka.hpp"
#include "kafka/group_consumer.hpp"
#include "kafka/producer.hpp"

using namespace gost;
using namespace gost::runtime;
using namespace std::chrono_literals;

namespace {

std::string fresh_name(const std::string& prefix) {
  std::mt19937_64 rng{std::random_device{}()};
  return prefix + std::to_string(rng());
}

/// Produces `values` to `topic` under one key (one partition: one order) and waits for the
/// broker's acknowledgement.
void produce(const std::string& topic, const std::vector<std::string>& values) {
  kafka::producer_options po;
  po.role = "the test's producer";
  po.settings = {kafka::brokers_setting(testing::kafka_brokers())};
  auto p = kafka::producer::make(std::move(po));
  REQUIRE_MESSAGE(p, error_message(p.error()));
  for (auto& v : values)
    REQUIRE_FALSE(p->produce(topic, "one-key", v));
  stop_signal never;
  REQUIRE(p->flush(never));
  REQUIRE(p->take_failures() == 0);
}

/// What a handler saw, for the test thread to wait on.
struct seen {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::string> values;

  void add(std::string_view v) {
    std::lock_guard<std::mutex> guard{mtx};
    values.emplace_back(v);
    cv.notify_all();
  }

  /// Waits until `n` values were seen (at most a minute: a broken loop fails, not hangs).
  std::vector<std::string> wait(size_t n) {
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait_for(lock, 60s, [&] { return values.size() >= n; });
    return values;
  }

  /// Waits until the last value seen is `last` (at most a minute).
  std::vector<std::string> wait_last(const std::string& last) {
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait_for(lock, 60s, [&] { return !values.empty() && values.back() == last; });
    return values;
  }
};

kafka::consumer_options options(const std::string& topic, const std::string& group) {
  kafka::consumer_options co;
  co.role = "the test's consumer";
  co.brokers = testing::kafka_brokers();
  co.group = group;
  co.group_key = "test.group";
  co.topic = topic;
  co.topic_key = "test.topic";
  co.retry_first = 10ms;
  co.retry_cap = 10ms;
  return co;
}

/// What a new member of `group` reads first (`n` messages, each handled).
std::vector<std::string> next_member_reads(const std::string& topic, const std::string& group,
                                           size_t n) {
  seen s;
  auto consumer = kafka::make_group_consumer(options(topic, group),
                                             [&](const kafka::message_view& m, const stop_signal&) {
                                               s.add(m.payload);
                                               return kafka::verdict::handled;
                                             });
  REQUIRE_MESSAGE(consumer, error_message(consumer.error()));
  return s.wait(n);
}

} // namespace

TEST_CASE("a message not handled is read again before any later one") {
  auto topic = fresh_name("gost-kit-");
  produce(topic, {"m1", "m2", "m3"});
  seen s;
  int refusals = 0;
  auto consumer = kafka::make_group_consumer(options(topic, fresh_name("gost-kit-group-")),
                                             [&](const kafka::message_view& m, const stop_signal&) {
                                               s.add(m.payload);
                                               if (m.payload == "m2" && refusals++ < 2)
                                                 return kafka::verdict::not_handled;
                                               return kafka::verdict::handled;
                                             });
  REQUIRE_MESSAGE(consumer, error_message(consumer.error()));
  CHECK(s.wait(5) == std::vector<std::string>{"m1", "m2", "m2", "m2", "m3"});
}

TEST_CASE("a stop cuts the back-off short; the next member starts at the message not handled") {
  auto topic = fresh_name("gost-kit-");
  auto group = fresh_name("gost-kit-group-");
  produce(topic, {"m1", "m2", "m3"});
  {
    seen s;
    auto co = options(topic, group);
    co.retry_first = co.retry_cap = 1h; // only the stop can end this wait
    auto consumer =
      kafka::make_group_consumer(co, [&](const kafka::message_view& m, const stop_signal&) {
        s.add(m.payload);
        return m.payload == "m2" ? kafka::verdict::not_handled : kafka::verdict::handled;
      });
    REQUIRE_MESSAGE(consumer, error_message(consumer.error()));
    REQUIRE(s.wait(2) == std::vector<std::string>{"m1", "m2"});
    // Leaving the scope stops the consumer in its hour-long back-off and commits m1 only.
  }
  CHECK(next_member_reads(topic, group, 2) == std::vector<std::string>{"m2", "m3"});
}

TEST_CASE("the handler is handed the stop, and an unfinished message is not committed") {
  auto topic = fresh_name("gost-kit-");
  auto group = fresh_name("gost-kit-group-");
  produce(topic, {"m1"});
  {
    seen s;
    auto consumer = kafka::make_group_consumer(
      options(topic, group), [&](const kafka::message_view& m, const stop_signal& stop) {
        s.add(m.payload);
        stop.wait_for(1h); // long work that gives way to the stop
        return stop.requested() ? kafka::verdict::not_handled : kafka::verdict::handled;
      });
    REQUIRE_MESSAGE(consumer, error_message(consumer.error()));
    REQUIRE(s.wait(1).size() == 1);
  }
  CHECK(next_member_reads(topic, group, 1) == std::vector<std::string>{"m1"});
}

TEST_CASE("batches: what is fetched comes at once, a batch not handled is read again whole") {
  auto topic = fresh_name("gost-kit-");
  auto group = fresh_name("gost-kit-group-");
  std::vector<std::string> values;
  for (int i = 0; i < 50; ++i)
    values.push_back("m" + std::to_string(i));
  produce(topic, values);
  {
    seen s;
    std::vector<size_t> sizes;
    bool refused = false;
    auto consumer = kafka::make_group_consumer(
      options(topic, group),
      [&](const std::vector<kafka::message_view>& batch, const stop_signal&) {
        sizes.push_back(batch.size());
        for (auto& m : batch)
          s.add(m.payload);
        if (!refused && batch.size() > 1) { // the first batch of several: not handled, once
          refused = true;
          return kafka::verdict::not_handled;
        }
        if (batch.back().payload == "m49")
          s.add("handled m49");
        return kafka::verdict::handled;
      },
      16);
    REQUIRE_MESSAGE(consumer, error_message(consumer.error()));
    auto got = s.wait_last("handled m49");
    got.pop_back();
    // Every batch at most 16; some of several (the topic was full before the consumer came).
    REQUIRE(refused);
    size_t refused_size = 0;
    for (auto n : sizes) {
      CHECK(n <= 16);
      if (refused_size == 0 && n > 1)
        refused_size = n;
    }
    // Read in order; the refused batch again from its first message; nothing skipped.
    std::vector<std::string> expected;
    size_t first_refused = 0;
    for (size_t i = 0, at = 0; i < sizes.size(); at += sizes[i], ++i)
      if (sizes[i] == refused_size) {
        first_refused = at;
        break;
      }
    expected.assign(values.begin(), values.begin() + first_refused + refused_size);
    expected.insert(expected.end(), values.begin() + first_refused, values.end());
    REQUIRE(got.size() >= expected.size());
    got.resize(expected.size());
    CHECK(got == expected);
  }
  // Everything handled was committed: the group's next member starts after m49.
  produce(topic, {"m50"});
  CHECK(next_member_reads(topic, group, 1) == std::vector<std::string>{"m50"});
}

TEST_CASE("batches in flight: settled in any order, one not handled is read again with the rest") {
  auto topic = fresh_name("gost-kit-");
  auto group = fresh_name("gost-kit-group-");
  std::vector<std::string> values;
  for (int i = 0; i < 60; ++i)
    values.push_back("m" + std::to_string(i));
  produce(topic, values);
  struct open_batch {
    std::vector<std::string> values;
    std::function<void(kafka::verdict)> done;
  };
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<open_batch> arrived;
  {
    auto consumer = kafka::make_group_consumer(
      options(topic, group),
      [&](const std::vector<kafka::message_view>& batch, const stop_signal&,
          const std::function<void(kafka::verdict)>& done) {
        open_batch b{{}, done};
        for (auto& m : batch)
          b.values.emplace_back(m.payload);
        std::lock_guard<std::mutex> g{mtx};
        arrived.push_back(std::move(b));
        cv.notify_all();
      },
      8, 3);
    REQUIRE_MESSAGE(consumer, error_message(consumer.error()));
    // The test settles the batches: the first two it holds at once with the second handled
    // before the first is refused; every other batch handled, the later ones first.
    std::vector<std::string> seen, refused;
    size_t most = 0;
    bool failed = false, done = false;
    auto deadline = std::chrono::steady_clock::now() + 60s;
    std::vector<open_batch> open;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      {
        std::unique_lock<std::mutex> lock{mtx};
        cv.wait_for(lock, 200ms, [&] { return arrived.size() >= (failed ? 1u : 2u); });
        while (!arrived.empty()) {
          open.push_back(std::move(arrived.front()));
          arrived.pop_front();
        }
      }
      most = std::max(most, open.size());
      if (open.empty())
        continue;
      if (!failed) {
        if (open.size() < 2)
          continue; // wait for a second batch in flight
        failed = true;
        refused = open[0].values;
        refused.insert(refused.end(), open[1].values.begin(), open[1].values.end());
        seen.insert(seen.end(), open[0].values.begin(), open[0].values.end());
        seen.insert(seen.end(), open[1].values.begin(), open[1].values.end());
        open[1].done(kafka::verdict::handled);
        open[0].done(kafka::verdict::not_handled);
        open.erase(open.begin(), open.begin() + 2);
        continue;
      }
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        seen.insert(seen.end(), it->values.begin(), it->values.end());
        done = done || std::find(it->values.begin(), it->values.end(), "m59") != it->values.end();
        it->done(kafka::verdict::handled);
      }
      open.clear();
    }
    REQUIRE(done);
    CHECK(most >= 2);
    CHECK(most <= 3);
    // Every message seen; those of the two first batches (the handled second one too) twice.
    for (auto& v : values)
      CHECK_MESSAGE(std::count(seen.begin(), seen.end(), v) >= 1, v);
    for (auto& v : refused)
      CHECK_MESSAGE(std::count(seen.begin(), seen.end(), v) >= 2, v);
    // Leaving the scope: nothing in flight, the stored offsets committed.
  }
  produce(topic, {"m60"});
  CHECK(next_member_reads(topic, group, 1) == std::vector<std::string>{"m60"});
}
