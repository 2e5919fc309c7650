// The feed applier's rules with fake ports: no database, no Kafka, no actors. The fakes keep
// just enough state to behave like the real ports (persistence/feeds, the offer actors, the
// responses topic) and let a test inject a race or a failure at a chosen call.
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "gost/core/errc.hpp"
#include "gost/feeds/feed_applier.hpp"

using namespace gost;
using namespace std::chrono_literals;
using outcome = v1::OfferResult;
using persistence::feed_counts;
using persistence::feed_item;
using persistence::keyed_offer;

namespace {

template <class T>
std::future<caf::expected<T>> ready(caf::expected<T> x) {
  std::promise<caf::expected<T>> p;
  p.set_value(std::move(x));
  return p.get_future();
}

caf::error db_down() {
  return persistence::make_db_error(persistence::db_errc::unavailable, "connection lost");
}

/// The offers of the store, by id, as their actors would keep them.
struct fake_offers final : feeds::offer_port {
  std::map<std::string, v1::Offer> by_id;
  int next_id = 0;
  std::map<std::string, int> writes; ///< creates, updates and deletes per external id
  /// Runs before an operation on an external id takes effect (a race: someone else writes).
  std::function<void(const std::string& op, const std::string& external_id)> before;
  /// Errors to answer instead of deleting, per offer id, once each.
  std::map<std::string, caf::error> fail_remove;
  /// Keys of s1/shop claimed for offers a split left in another group (ADR 0023): external id
  /// -> the claimed offer's id. A claimed key is taken for a create.
  std::map<std::string, std::string> claims;

  /// The seller s1's offer in namespace shop under `ext`, or null.
  const v1::Offer* find(const std::string& ext) {
    for (auto& [id, o] : by_id)
      if (o.seller_id() == "s1" && o.namespace_() == "shop" && o.external_id() == ext)
        return &o;
    return nullptr;
  }

  v1::Offer* by_ext(const v1::Offer& like) {
    for (auto& [id, o] : by_id)
      if (o.seller_id() == like.seller_id() && o.namespace_() == like.namespace_()
          && o.external_id() == like.external_id())
        return &o;
    return nullptr;
  }

  /// An offer stored before the test (version 1).
  std::string put(const std::string& ext, const std::string& title,
                  v1::OfferSource source = v1::OFFER_SOURCE_FEED) {
    v1::Offer o;
    o.set_id("stored-" + ext);
    o.set_seller_id("s1");
    o.set_namespace_("shop");
    o.set_external_id(ext);
    o.set_title(title);
    o.set_source(source);
    o.set_version(1);
    by_id[o.id()] = o;
    return o.id();
  }

  std::string new_id(const std::string&) override { return "new-" + std::to_string(++next_id); }

  std::string check(const v1::Offer& c) override {
    return c.title() == "invalid" ? "offer.title must not be `invalid`" : "";
  }

  bool changes(const v1::Offer& stored, const v1::Offer& wanted) override {
    auto a = stored;
    auto b = wanted;
    for (auto* o : {&a, &b}) {
      o->clear_id();
      o->clear_version();
    }
    return a.SerializeAsString() != b.SerializeAsString();
  }

  reply<v1::Offer> create(const v1::Offer& c) override {
    if (before)
      before("create", c.external_id());
    if (by_id.count(c.id()) != 0 || by_ext(c) != nullptr || claims.count(c.external_id()) != 0)
      return ready<v1::Offer>(make_error(errc::already_exists, "offer exists"));
    auto o = c;
    o.set_version(1);
    by_id[o.id()] = o;
    ++writes[o.external_id()];
    return ready<v1::Offer>(o);
  }

  reply<v1::Offer> update(const v1::Offer& c, std::optional<int64_t> expected,
                          const std::string& mask) override {
    if (before)
      before("update", c.external_id());
    auto i = by_id.find(c.id());
    if (i == by_id.end())
      return ready<v1::Offer>(make_error(errc::not_found, "no offer " + c.id()));
    if (expected && *expected != i->second.version())
      return ready<v1::Offer>(make_error(errc::conflict, "version moved"));
    auto& o = i->second;
    if (mask == "source") {
      o.set_source(c.source());
    } else {
      REQUIRE(mask.empty()); // the applier never sends another mask
      auto version = o.version();
      o = c;
      o.set_version(version);
    }
    o.set_version(o.version() + 1);
    ++writes[o.external_id()];
    return ready<v1::Offer>(o);
  }

  reply<v1::Offer> get(const std::string& id) override {
    auto i = by_id.find(id);
    if (i == by_id.end())
      return ready<v1::Offer>(make_error(errc::not_found, "no offer " + id));
    return ready<v1::Offer>(i->second);
  }

  reply<int64_t> remove(const std::string& id) override {
    if (auto f = fail_remove.find(id); f != fail_remove.end()) {
      auto err = f->second;
      fail_remove.erase(f);
      return ready<int64_t>(err);
    }
    auto i = by_id.find(id);
    if (i == by_id.end())
      return ready<int64_t>(make_error(errc::not_found, "no offer " + id));
    auto version = i->second.version() + 1;
    ++writes[i->second.external_id()];
    by_id.erase(i);
    return ready<int64_t>(version);
  }
};

/// persistence/feeds in memory: tasks, the items each load carried, the batches counted.
struct fake_store final : feeds::feed_store {
  explicit fake_store(fake_offers& o) : offers(o) {}

  struct task {
    std::string seller, ns;
    bool finished = false;
    std::string summary;
    feed_counts counts;
    std::map<std::string, std::string> items; ///< external id -> the batch that carried it
    std::set<std::string> batches;            ///< batches counted
  };
  fake_offers& offers;
  std::map<std::string, task> tasks;
  std::vector<feed_counts> corrections; ///< add_counts calls
  int fail_record = 0;                  ///< record_batch calls to fail (database down)
  std::function<void()> on_record_failure;

  caf::expected<persistence::feed_task> begin_task(const std::string& id, const std::string& seller,
                                                   const std::string& ns) override {
    auto& t = tasks.try_emplace(id, task{seller, ns}).first->second;
    persistence::feed_task out;
    out.finished = t.finished;
    out.summary = t.summary;
    if (t.seller != seller || t.ns != ns)
      out.other_owner = t.seller + "/" + t.ns;
    return out;
  }

  caf::expected<std::vector<keyed_offer>> find(const std::string& seller, const std::string& ns,
                                               const std::vector<std::string>& ids) override {
    std::vector<keyed_offer> out;
    for (auto& [id, o] : offers.by_id)
      if (o.seller_id() == seller && o.namespace_() == ns
          && std::find(ids.begin(), ids.end(), o.external_id()) != ids.end())
        out.push_back({id, o.external_id(), o.version(), o.SerializeAsString()});
    return out;
  }

  /// A task named with its seller: the seller must be the task's (its home group's database).
  task& task_of(const std::string& seller, const std::string& task_id) {
    auto& t = tasks.at(task_id);
    CHECK(t.seller == seller);
    return t;
  }

  caf::expected<persistence::recorded_batch>
  record_batch(const std::string& seller, const std::string& task_id, const std::string& batch_id,
               const std::vector<std::string>& ids, const count_fn& count) override {
    if (fail_record > 0) {
      --fail_record;
      if (on_record_failure)
        on_record_failure();
      return db_down();
    }
    auto& t = task_of(seller, task_id);
    persistence::recorded_batch out;
    out.first_time = t.batches.insert(batch_id).second;
    std::set<std::string> in_this;
    for (auto& id : ids) {
      if (!in_this.insert(id).second) {
        out.items.push_back(feed_item::duplicate);
        continue;
      }
      auto k = t.items.find(id);
      if (k == t.items.end()) {
        t.items[id] = batch_id;
        out.items.push_back(feed_item::fresh);
      } else {
        out.items.push_back(k->second == batch_id ? feed_item::again : feed_item::duplicate);
      }
    }
    if (out.first_time && count)
      add(t.counts, count(out.items));
    return out;
  }

  static void add(feed_counts& to, const feed_counts& n) {
    to.added += n.added;
    to.updated += n.updated;
    to.unchanged += n.unchanged;
    to.rejected += n.rejected;
    to.duplicates += n.duplicates;
  }

  caf::error add_counts(const std::string& seller, const std::string& task_id,
                        const feed_counts& delta) override {
    add(task_of(seller, task_id).counts, delta);
    corrections.push_back(delta);
    return {};
  }

  caf::expected<std::vector<keyed_offer>>
  missing(const std::string& task_id, const std::string& seller, const std::string& ns) override {
    auto& t = tasks.at(task_id);
    std::vector<keyed_offer> out; // by offer id, like the real query
    for (auto& [id, o] : offers.by_id)
      if (o.seller_id() == seller && o.namespace_() == ns && !o.external_id().empty()
          && t.items.count(o.external_id()) == 0)
        out.push_back({id, o.external_id(), o.version(), o.SerializeAsString()});
    return out;
  }

  caf::expected<std::pair<feed_counts, int32_t>> progress(const std::string& seller,
                                                          const std::string& task_id) override {
    auto& t = task_of(seller, task_id);
    std::set<std::string> carried_by;
    for (auto& [ext, batch] : t.items)
      carried_by.insert(batch);
    return std::make_pair(t.counts, static_cast<int32_t>(carried_by.size()));
  }

  caf::expected<std::optional<std::string>> holder(const std::string& seller, const std::string& ns,
                                                   const std::string& ext) override {
    v1::Offer like;
    like.set_seller_id(seller);
    like.set_namespace_(ns);
    like.set_external_id(ext);
    if (auto* o = offers.by_ext(like))
      return std::optional<std::string>{o->id()};
    if (auto c = offers.claims.find(ext); c != offers.claims.end())
      return std::optional<std::string>{c->second};
    return std::optional<std::string>{};
  }

  caf::expected<bool> release_claim(const std::string&, const std::string&, const std::string& ext,
                                    const std::string& offer_id) override {
    auto c = offers.claims.find(ext);
    if (c == offers.claims.end() || c->second != offer_id)
      return false;
    offers.claims.erase(c);
    ++released;
    return true;
  }
  int released = 0;

  caf::error finish_task(const std::string& seller, const std::string& task_id,
                         const std::string& summary) override {
    auto& t = task_of(seller, task_id);
    t.finished = true;
    t.summary = summary;
    t.items.clear();
    t.batches.clear();
    return {};
  }
};

/// The responses topic: what was sent, and when the sender waited for acknowledgements.
struct fake_sink final : feeds::response_sink {
  std::vector<v1::FeedResponse> sent;
  /// "result", "end" and "flush", in order.
  std::vector<std::string> events;
  int fail_flush = 0; ///< flushes to report as undelivered

  void send(const v1::FeedResponse& r, const stop_signal&) override {
    sent.push_back(r);
    events.push_back(r.has_end() ? "end" : "result");
  }

  bool flushed(const stop_signal&) override {
    events.push_back("flush");
    if (fail_flush > 0) {
      --fail_flush;
      return false;
    }
    return true;
  }

  /// The last result per external id.
  std::map<std::string, outcome> results() const {
    std::map<std::string, outcome> out;
    for (auto& r : sent)
      if (r.has_result())
        out[r.result().external_id()] = r.result();
    return out;
  }

  std::vector<v1::FeedSummary> ends() const {
    std::vector<v1::FeedSummary> out;
    for (auto& r : sent)
      if (r.has_end())
        out.push_back(r.end());
    return out;
  }
};

struct fixture {
  fake_offers offers;
  fake_store store{offers};
  fake_sink sink;
  stop_signal stop;
  feeds::feed_applier applier{store, offers, sink, feeds::applier_options{0ms, 0ms, 4}};

  bool handle(const v1::FeedRequest& r) { return applier.handle(r, stop); }

  const feed_counts& counts(const std::string& task) { return store.tasks.at(task).counts; }
};

v1::FeedRequest request(const std::string& task) {
  v1::FeedRequest r;
  r.set_seller_id("s1");
  r.set_namespace_("shop");
  r.set_task_id(task);
  return r;
}

v1::FeedRequest batch(const std::string& task, const std::string& id,
                      const std::vector<std::pair<std::string, std::string>>& lines) {
  auto r = request(task);
  r.mutable_batch()->set_batch_id(id);
  for (auto& [ext, title] : lines) {
    auto* o = r.mutable_batch()->add_offers();
    o->set_external_id(ext);
    o->set_title(title);
  }
  return r;
}

v1::FeedRequest end(const std::string& task, v1::FeedEnd::Missing missing) {
  auto r = request(task);
  r.mutable_end()->set_missing(missing);
  return r;
}

void check_counts(const feed_counts& c, int64_t added, int64_t updated, int64_t unchanged,
                  int64_t rejected, int64_t duplicates) {
  CHECK(c.added == added);
  CHECK(c.updated == updated);
  CHECK(c.unchanged == unchanged);
  CHECK(c.rejected == rejected);
  CHECK(c.duplicates == duplicates);
}

} // namespace

TEST_CASE("a fresh batch is counted as intended: added, updated, unchanged, rejected, "
          "duplicates") {
  fixture f;
  f.offers.put("e1", "old title");
  f.offers.put("e2", "same");
  auto b1 = batch("t1", "b1",
                  {{"e1", "new title"},
                   {"e2", "same"},
                   {"e3", "fresh"},
                   {"e3", "again"},
                   {"", "no external id"},
                   {"e4", "invalid"}});
  REQUIRE(f.handle(b1));
  auto res = f.sink.results();
  CHECK(res["e1"].outcome() == outcome::UPDATED);
  CHECK(res["e1"].version() == 2);
  CHECK(res["e2"].outcome() == outcome::UNCHANGED);
  CHECK(res["e3"].outcome() == outcome::DUPLICATE); // the second line of e3 was the last result
  CHECK(res["e4"].outcome() == outcome::REJECTED);
  CHECK(res["e4"].reason().find("offer.title") != std::string::npos);
  CHECK(res[""].outcome() == outcome::REJECTED);
  CHECK(res[""].reason().find("external_id") != std::string::npos);
  CHECK(f.sink.sent.size() == 6);    // one result per line
  CHECK(f.offers.writes["e2"] == 0); // unchanged: nothing written
  REQUIRE(f.offers.find("e3") != nullptr);
  CHECK(f.offers.find("e3")->title() == "fresh");
  CHECK(f.offers.find("e3")->source() == v1::OFFER_SOURCE_FEED);
  CHECK(f.offers.find("e4") == nullptr);
  check_counts(f.counts("t1"), 1, 1, 1, 2, 1);
  CHECK(f.store.corrections.empty());

  // Another batch of the same load carrying e3 again: a duplicate of the load.
  REQUIRE(f.handle(batch("t1", "b2", {{"e3", "later"}, {"e5", "x"}})));
  CHECK(f.sink.results()["e3"].outcome() == outcome::DUPLICATE);
  CHECK(f.offers.find("e3")->title() == "fresh");
  check_counts(f.counts("t1"), 2, 1, 1, 2, 2);
}

TEST_CASE("a re-delivered batch is counted once; its duplicates are not counted again") {
  fixture f;
  f.offers.put("e1", "old");
  auto b = batch("t1", "b1", {{"e1", "new"}, {"e2", "fresh"}, {"e2", "twice"}, {"e3", "invalid"}});
  REQUIRE(f.handle(b));
  check_counts(f.counts("t1"), 1, 1, 0, 1, 1);
  auto first = f.sink.sent.size();
  REQUIRE(f.handle(b));
  // Answered again, line by line: what was applied comes out unchanged now.
  CHECK(f.sink.sent.size() == 2 * first);
  auto res = f.sink.results();
  CHECK(f.sink.sent[first].result().outcome() == outcome::UNCHANGED);
  CHECK(f.sink.sent[first + 1].result().outcome() == outcome::UNCHANGED);
  CHECK(res["e2"].outcome() == outcome::DUPLICATE);
  CHECK(f.offers.writes["e1"] == 1);
  CHECK(f.offers.writes["e2"] == 1);
  check_counts(f.counts("t1"), 1, 1, 0, 1, 1);
  CHECK(f.store.corrections.empty()); // not the first recording: nothing corrected
}

TEST_CASE("a race is redone, and the correction moves the count to what happened") {
  fixture f;
  // e1 is created by someone else between the read and the create: intended ADDED, the
  // create fails (already exists), the redo reads it again and updates it.
  f.offers.before = [&](const std::string& op, const std::string& ext) {
    if (op == "create" && ext == "e1" && f.offers.writes["e1"] == 0) {
      f.offers.put("e1", "someone else's");
      ++f.offers.writes["e1"];
    }
  };
  REQUIRE(f.handle(batch("t1", "b1", {{"e1", "feed"}, {"e2", "feed"}})));
  auto res = f.sink.results();
  CHECK(res["e1"].outcome() == outcome::UPDATED);
  CHECK(res["e1"].offer_id() == "stored-e1");
  CHECK(res["e2"].outcome() == outcome::ADDED);
  CHECK(f.offers.by_id.at("stored-e1").title() == "feed");
  REQUIRE(f.store.corrections.size() == 1);
  check_counts(f.store.corrections[0], -1, 1, 0, 0, 0);
  check_counts(f.counts("t1"), 1, 1, 0, 0, 0);
}

TEST_CASE("a key held by the claim of an offer a split left elsewhere and deleted since: the "
          "applier asks the claimed offer's owner, releases the claim and creates; a claim of "
          "an offer still there is kept") {
  fixture f;
  f.offers.claims["e1"] = "stray-gone";
  // e2's claimed offer is there (its owner answers it), though the key lookup missed it.
  f.offers.claims["e2"] = "stray-2";
  v1::Offer there;
  there.set_id("stray-2");
  there.set_seller_id("s1");
  there.set_namespace_("shop");
  there.set_external_id("e2-elsewhere");
  there.set_version(3);
  f.offers.by_id["stray-2"] = there;
  REQUIRE(f.handle(batch("t1", "b1", {{"e1", "back again"}, {"e2", "kept"}})));
  auto res = f.sink.results();
  CHECK(res["e1"].outcome() == outcome::ADDED);
  REQUIRE(f.offers.find("e1") != nullptr);
  CHECK(f.offers.find("e1")->title() == "back again");
  CHECK(f.offers.claims.count("e1") == 0);
  CHECK(f.store.released == 1);
  CHECK(res["e2"].outcome() == outcome::REJECTED); // not released: its offer is there
  CHECK(f.offers.claims.at("e2") == "stray-2");
  CHECK(f.offers.by_id.count("stray-2") == 1);
}

TEST_CASE("the end deletes the feed offers the load did not carry; rejected lines count as "
          "carried; the summary comes last, once") {
  fixture f;
  f.offers.put("e1", "kept by a rejected line");
  f.offers.put("e2", "carried");
  f.offers.put("e3", "missing");
  f.offers.put("m1", "the seller's own", v1::OFFER_SOURCE_MANUAL);
  REQUIRE(f.handle(batch("t1", "b1", {{"e1", "invalid"}, {"e2", "carried"}})));
  auto before_end = f.sink.events.size();
  REQUIRE(f.handle(end("t1", v1::FeedEnd::DELETE)));
  CHECK(f.offers.by_id.count("stored-e1") == 1);
  CHECK(f.offers.by_id.count("stored-e2") == 1);
  CHECK(f.offers.by_id.count("stored-e3") == 0);
  CHECK(f.offers.by_id.count("stored-m1") == 1);
  CHECK(f.offers.writes["m1"] == 0);
  auto res = f.sink.results();
  CHECK(res["e3"].outcome() == outcome::DELETED);
  CHECK(res["e3"].version() == 2);
  CHECK(res.count("m1") == 0);
  auto ends = f.sink.ends();
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].deleted() == 1);
  CHECK(ends[0].rejected() == 1);
  CHECK(ends[0].unchanged() == 1);
  CHECK(ends[0].batches() == 1);
  CHECK(f.sink.sent.back().task_id() == "t1");
  CHECK(f.sink.sent.back().seller_id() == "s1");
  // The end's events: its result, a flush (every result acknowledged), then the summary.
  std::vector<std::string> expected{"result", "flush", "end", "flush"};
  CHECK(std::vector<std::string>(f.sink.events.begin() + static_cast<long>(before_end),
                                 f.sink.events.end())
        == expected);

  // Delivered again: the summary is repeated, nothing more is deleted.
  REQUIRE(f.handle(end("t1", v1::FeedEnd::DELETE)));
  ends = f.sink.ends();
  REQUIRE(ends.size() == 2);
  CHECK(ends[1].SerializeAsString() == ends[0].SerializeAsString());
  CHECK(f.offers.writes["e3"] == 1);
  CHECK(f.offers.by_id.size() == 3);

  // A batch after the end is ignored.
  REQUIRE(f.handle(batch("t1", "b2", {{"e9", "late"}})));
  CHECK(f.sink.results().count("e9") == 0);
}

TEST_CASE("offers the processor rejected are carried: answered REJECTED with the processor's "
          "reason, counted, and their stored offers survive the end") {
  fixture f;
  f.offers.put("e1", "stored before, now rejected by the processor");
  f.offers.put("e2", "missing");
  auto b = batch("t1", "b1", {{"e3", "fresh"}});
  auto* rej = b.mutable_batch()->add_rejected();
  rej->set_external_id("e1");
  rej->set_reason("Price: the price \"1 500 руб.\" is not a plain number");
  b.mutable_batch()->add_rejected()->set_external_id(""); // no id: answered, never carried
  REQUIRE(f.handle(b));
  auto res = f.sink.results();
  CHECK(res["e1"].outcome() == outcome::REJECTED);
  CHECK(res["e1"].reason().find("1 500") != std::string::npos);
  CHECK(res["e1"].batch_id() == "b1");
  CHECK(res[""].outcome() == outcome::REJECTED);
  CHECK(res["e3"].outcome() == outcome::ADDED);
  CHECK(f.offers.writes["e1"] == 0);
  check_counts(f.counts("t1"), 1, 0, 0, 2, 0);
  REQUIRE(f.handle(end("t1", v1::FeedEnd::DELETE)));
  CHECK(f.offers.by_id.count("stored-e1") == 1); // carried by the rejection: kept
  CHECK(f.offers.by_id.count("stored-e2") == 0);
  auto ends = f.sink.ends();
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].rejected() == 2);
  CHECK(ends[0].deleted() == 1);
}

TEST_CASE("with MAKE_MANUAL the missing feed offers become manual; manual offers are left "
          "alone") {
  fixture f;
  f.offers.put("e1", "carried");
  f.offers.put("e2", "missing");
  f.offers.put("m1", "the seller's own", v1::OFFER_SOURCE_MANUAL);
  REQUIRE(f.handle(batch("t1", "b1", {{"e1", "carried"}})));
  REQUIRE(f.handle(end("t1", v1::FeedEnd::MAKE_MANUAL)));
  auto& e2 = f.offers.by_id.at("stored-e2");
  CHECK(e2.source() == v1::OFFER_SOURCE_MANUAL);
  CHECK(e2.title() == "missing");
  CHECK(e2.version() == 2);
  CHECK(f.offers.by_id.at("stored-m1").version() == 1);
  CHECK(f.offers.by_id.size() == 3);
  auto res = f.sink.results();
  CHECK(res["e2"].outcome() == outcome::MADE_MANUAL);
  CHECK(res.count("m1") == 0);
  REQUIRE(f.sink.ends().size() == 1);
  CHECK(f.sink.ends()[0].made_manual() == 1);
  CHECK(f.sink.ends()[0].deleted() == 0);
}

TEST_CASE("a transient error at the end makes the end be handled again; nothing is done "
          "twice") {
  fixture f;
  f.offers.put("e1", "missing");
  f.offers.put("e2", "missing too");
  // The first offer to delete is on a shard that is moving.
  f.offers.fail_remove["stored-e1"] = make_error(errc::moved, "shard 3 is moving");
  REQUIRE(f.handle(batch("t1", "b1", {{"e9", "carried"}})));
  CHECK_FALSE(f.handle(end("t1", v1::FeedEnd::DELETE)));
  CHECK(f.sink.ends().empty());
  CHECK(f.offers.by_id.count("stored-e1") == 1);
  CHECK_FALSE(f.store.tasks.at("t1").finished);
  REQUIRE(f.handle(end("t1", v1::FeedEnd::DELETE)));
  CHECK(f.offers.by_id.count("stored-e1") == 0);
  CHECK(f.offers.by_id.count("stored-e2") == 0);
  CHECK(f.offers.writes["e1"] == 1);
  CHECK(f.offers.writes["e2"] == 1);
  REQUIRE(f.sink.ends().size() == 1);
  CHECK(f.sink.ends()[0].deleted() == 2);
}

TEST_CASE("a lasting error at the end is answered REJECTED with its reason") {
  fixture f;
  f.offers.put("e1", "missing");
  f.offers.fail_remove["stored-e1"] = make_error(errc::invalid_argument, "offer is locked");
  REQUIRE(f.handle(batch("t1", "b1", {{"e9", "carried"}})));
  REQUIRE(f.handle(end("t1", v1::FeedEnd::DELETE)));
  auto res = f.sink.results();
  CHECK(res["e1"].outcome() == outcome::REJECTED);
  CHECK(res["e1"].reason() == "missing from the load, but could not be deleted: offer is locked");
  CHECK(f.offers.by_id.count("stored-e1") == 1);
  REQUIRE(f.sink.ends().size() == 1);
  CHECK(f.sink.ends()[0].deleted() == 0);
}

TEST_CASE("a database error is retried in place; a stop leaves the request to be handled "
          "again") {
  fixture f;
  f.store.fail_record = 2;
  REQUIRE(f.handle(batch("t1", "b1", {{"e1", "x"}})));
  CHECK(f.store.fail_record == 0);
  check_counts(f.counts("t1"), 1, 0, 0, 0, 0);
  CHECK(f.sink.results()["e1"].outcome() == outcome::ADDED);

  // Down for good; the node stops while the step is being retried.
  f.store.fail_record = 1'000'000;
  int failures = 0;
  f.store.on_record_failure = [&] {
    if (++failures == 3)
      f.stop.request();
  };
  CHECK_FALSE(f.handle(batch("t1", "b2", {{"e2", "y"}})));
  CHECK(failures == 3);
  CHECK(f.sink.results().count("e2") == 0);
  CHECK(f.offers.writes["e2"] == 0);
}

TEST_CASE("an undelivered response makes the batch be handled again, counted once") {
  fixture f;
  f.sink.fail_flush = 1;
  auto b = batch("t1", "b1", {{"e1", "x"}, {"e2", "y"}});
  CHECK_FALSE(f.handle(b));
  REQUIRE(f.handle(b));
  check_counts(f.counts("t1"), 2, 0, 0, 0, 0);
  CHECK(f.offers.writes["e1"] == 1);
  CHECK(f.sink.results()["e1"].outcome() == outcome::UNCHANGED);
}

TEST_CASE("a task id of another seller is refused without touching that load") {
  fixture f;
  f.offers.put("e1", "missing");
  REQUIRE(f.handle(batch("t1", "b1", {{"e9", "carried"}})));
  auto foreign = end("t1", v1::FeedEnd::DELETE);
  foreign.set_seller_id("someone-else");
  REQUIRE(f.handle(foreign)); // handled: refused for good, not retried
  CHECK(f.offers.by_id.count("stored-e1") == 1);
  CHECK(f.sink.ends().empty());
  CHECK_FALSE(f.store.tasks.at("t1").finished);
}
