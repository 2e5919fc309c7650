#pragma once
// A harness for unit tests of stages (gost/offers/stage.hpp): no actors, no database. It keeps
// one offer, its stages' states and its queue entries, and drives them through the engine's own
// rules (gost/offers/stage_runner.hpp: the same functions the offer actor calls), so a test
// sees what gost would do — which stages a change asks (field interests included), what a run
// writes, which stages a run's change asks again, timers, storms cut:
//
//   gost::testing::stage_harness h;
//   h.add("photo_count", std::make_shared<photos::photo_count>());
//   h.change(offer_with_photos(3));            // asked, queued, run: all due work is done
//   CHECK(h.state<photos::v1::PhotoCount>("photo_count")->photos() == 3);
//   CHECK(h.offer().status() == gost::v1::OFFER_STATUS_ACTIVE);
//   h.advance(std::chrono::hours{24});          // timers due by then run, in due order
//
// A run that throws is counted (`failures`) and leaves everything as it was, as gost's retry
// would find it; the harness does not retry by itself (call run_due() again).
// Framework-free: results are values to check.

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gost/offers/stage.hpp"
#include "gost/offers/stage_runner.hpp"

namespace gost::testing {

class stage_harness {
public:
  using clock = stage_clock;

  /// Registers a stage under `id` (as node_builder::add_stage does).
  stage_harness& add(std::string id, std::shared_ptr<const stage> impl, stage_options opts = {}) {
    reg_.add(std::move(id), std::move(impl), opts);
    return *this;
  }

  /// The time the next change or run happens at; advance() moves it.
  clock::time_point now = clock::time_point{std::chrono::hours{24 * 20'000}};
  /// A stage re-triggered more often than this in one chain is cut (stage.max_chain).
  int max_chain = 10;

  /// A change from outside (a create when there is no offer yet, else an update): the stages
  /// that want it are queued, then every run due now is done. The offer's version is kept.
  void change(const v1::Offer& next) {
    auto before = offer_;
    v1::Offer after = next;
    after.set_version(before ? before->version() + 1 : 1);
    offer_ = after;
    for (auto& e : ask_stages(reg_, before ? &*before : nullptr, after, ctx_, {}, us(now),
                              persistence::priority::normal))
      enqueue(e);
    run_due();
  }

  /// Runs every stage due now, in due order, each with what the one before committed, until
  /// none is due (a run's change may queue others: they run too). Returns the runs done.
  int run_due() {
    int runs = 0;
    for (;;) {
      auto next = earliest();
      if (next == queue_.end() || next->second > us(now) || !offer_)
        return runs;
      auto id = next->first;
      const auto* e = reg_.find(id);
      if (e == nullptr) { // a stage no longer registered: its entry is dropped
        queue_.erase(next);
        continue;
      }
      auto held = ctx_.states.find(id);
      const google::protobuf::Any* state =
        held == ctx_.states.end() ? nullptr : &held->second.value;
      stage_result result;
      try {
        result = e->impl->process(*offer_, state);
      } catch (const std::exception& x) {
        failures.emplace_back(id, x.what());
        return runs; // left queued, as a retry would find it
      }
      ++runs;
      ++runs_of[id];
      commit(after_process(reg_, id, *offer_, ctx_, result, us(now), {max_chain}));
    }
  }

  /// Moves the clock by `d`, running whatever comes due on the way at its own time.
  void advance(std::chrono::milliseconds d) {
    auto until = now + d;
    for (;;) {
      auto next = earliest();
      if (next == queue_.end() || next->second > us(until))
        break;
      now = std::max(now, clock::time_point{std::chrono::microseconds{next->second}});
      if (run_due() == 0 && !failures.empty())
        break;
    }
    now = until;
  }

  /// The offer as committed (none before the first change).
  const v1::Offer& offer() const { return *offer_; }
  bool has_offer() const noexcept { return offer_.has_value(); }

  /// Stage `id`'s state as a `State`; none when it stored none.
  template <class State>
  std::optional<State> state(const std::string& id) const {
    auto i = ctx_.states.find(id);
    if (i == ctx_.states.end())
      return std::nullopt;
    State s;
    if (!i->second.value.UnpackTo(&s))
      return std::nullopt;
    return s;
  }

  /// When stage `id` is due for the offer (a queue entry or a timer); none: not queued.
  std::optional<clock::time_point> due(const std::string& id) const {
    auto i = queue_.find(id);
    if (i == queue_.end())
      return std::nullopt;
    return clock::time_point{std::chrono::microseconds{i->second}};
  }

  /// Runs done per stage, runs that threw (stage, message), entries dead-lettered (stage,
  /// reason: a change storm cut).
  std::map<std::string, int> runs_of;
  std::vector<std::pair<std::string, std::string>> failures;
  std::vector<std::pair<std::string, std::string>> dead_letters;

private:
  stage_registry reg_;
  std::optional<v1::Offer> offer_;
  offer_context ctx_;
  std::map<std::string, int64_t> queue_; ///< stage id -> due (µs)

  static int64_t us(clock::time_point t) { return to_us(t); }

  std::map<std::string, int64_t>::iterator earliest() {
    auto best = queue_.end();
    for (auto i = queue_.begin(); i != queue_.end(); ++i)
      if (best == queue_.end() || i->second < best->second)
        best = i;
    return best;
  }

  /// An offer is in a queue at most once: the earlier due time stays.
  void enqueue(const persistence::queue_entry& e) {
    auto [i, added] = queue_.emplace(e.lane, e.due_at_us);
    if (!added)
      i->second = std::min(i->second, e.due_at_us);
    if (i->second <= us(now))
      ctx_.queued_now.insert(e.lane);
  }

  /// What the offer actor does once a run's write-set committed.
  void commit(runner_output out) {
    auto& ws = out.ws;
    if (ws.new_body && out.offer) {
      auto version = offer_->version() + 1;
      offer_ = std::move(*out.offer);
      offer_->set_version(version);
    }
    for (auto& [stage, bytes] : ws.states) {
      auto& held = ctx_.states[stage];
      held.value.ParseFromString(bytes);
      ++held.version;
    }
    for (auto& stage : ws.dequeue) {
      queue_.erase(stage);
      ctx_.queued_now.erase(stage);
    }
    for (auto& e : ws.enqueue) {
      enqueue(e);
      if (e.due_at_us <= us(now))
        ++ctx_.chain[e.lane];
    }
    for (auto& d : ws.dead_letters)
      dead_letters.emplace_back(d.stage_id, d.reason);
    if (ctx_.queued_now.empty())
      ctx_.chain.clear(); // the chain of runs ended
  }
};

} // namespace gost::testing
