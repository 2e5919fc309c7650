// The feed API's tables on a real PostgreSQL (feed_admin.hpp): feeds created idempotently,
// updated by version, removed (waiting loads cancelled, a closing load, the whole history
// queued for cleanup), loads and errors listed and paged, the errors streamed, and the cleanup
// step in the seed's order, keeping a stored file while another load refers to it.
#include <doctest/doctest.h>

#include <algorithm>

#include "gost/persistence/feeds/feed_admin.hpp"
#include "gost/v1/feed_service.pb.h"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

std::string settings_of(gost::v1::FeedSettings::Kind kind, const std::string& url = {},
                        const std::string& address = {}) {
  gost::v1::FeedSettings s;
  s.set_kind(kind);
  s.set_url(url);
  s.set_default_address(address);
  std::string out;
  s.SerializeToString(&out);
  return out;
}

feed_spec url_feed(const std::string& seller, const std::string& ns, const std::string& url) {
  return {seller, ns, settings_of(gost::v1::FeedSettings::URL, url), url, 3'600'000};
}

feed_spec upload_feed(const std::string& seller, const std::string& ns,
                      const std::string& address = {}) {
  return {seller, ns, settings_of(gost::v1::FeedSettings::UPLOAD, {}, address), {}, 0};
}

new_feed_load upload(const std::string& seller, const std::string& ns, const std::string& file) {
  new_feed_load n;
  n.seller_id = seller;
  n.ns = ns;
  n.origin = "upload";
  n.sha256 = file;
  n.bytes = 10;
  n.keep_loads = 100;
  return n;
}

db_errc code_of(const caf::error& e) {
  return static_cast<db_errc>(e.code());
}

std::string count(migrated_db& m, const std::string& table, const std::string& where = "true") {
  return m.db.scalar("SELECT count(*) FROM " + table + " WHERE " + where);
}

/// A load's data as the pipeline leaves it: statistics, a batch, two errors.
void fill_load(migrated_db& m, const std::string& seller, int64_t id) {
  auto l = std::to_string(id);
  m.db.scalar("INSERT INTO feed_statistics VALUES ('" + seller + "', " + l + ", '\\x08')");
  m.db.scalar("INSERT INTO feed_offer_batches (seller_id, load_id, batch_id) VALUES ('" + seller
              + "', " + l + ", '1')");
  REQUIRE_FALSE(add_feed_offer_errors(
    m.pool, seller, id,
    {{"a", 0, "error", "validation", "Price", "Bike", 3, "no price"},
     {"b", 0, "warning", "geocoding", "Address", "Car", 9, "address not found"}}));
}

void end_load(migrated_db& m, const std::string& seller, int64_t id) {
  m.db.scalar("UPDATE feed_loads SET status = 'succeeded' WHERE seller_id = '" + seller
              + "' AND load_id = " + std::to_string(id));
  m.db.scalar("DELETE FROM feed_queue WHERE seller_id = '" + seller
              + "' AND load_id = " + std::to_string(id));
}

} // namespace

TEST_CASE("create is idempotent with the same settings, refused with others; a URL feed is due "
          "at once") {
  migrated_db m;
  auto f = create_feed(m.pool, url_feed("s1", "shop", "https://feeds.example/s1.xml"));
  REQUIRE(f);
  CHECK(f->version == 1);
  CHECK_FALSE(f->removed);
  CHECK(f->url == "https://feeds.example/s1.xml");
  CHECK(f->period_ms == 3'600'000);
  REQUIRE(f->next_fetch_at);
  CHECK_FALSE(f->last_fetched_at);
  CHECK(f->last_load_id == 0);
  CHECK(m.db.scalar("SELECT next_fetch_at <= now() FROM feeds") == "t");
  // The loader's scheduler takes it at once.
  auto due = schedule_due_feeds(m.pool, 10, 10);
  REQUIRE(due);
  CHECK(due->size() == 1);

  auto again = create_feed(m.pool, url_feed("s1", "shop", "https://feeds.example/s1.xml"));
  REQUIRE(again);
  CHECK(again->version == 1);
  CHECK(again->last_load_id == due->front().load_id);
  auto other = create_feed(m.pool, url_feed("s1", "shop", "https://feeds.example/other.xml"));
  REQUIRE_FALSE(other);
  CHECK(code_of(other.error()) == db_errc::already_exists);
  CHECK(error_message(other.error()).find("UpdateFeed") != std::string::npos);

  // An upload feed has no schedule; another namespace is another feed.
  auto up = create_feed(m.pool, upload_feed("s1", "manual"));
  REQUIRE(up);
  CHECK_FALSE(up->next_fetch_at);
  CHECK(up->url.empty());
  auto all = list_feeds(m.pool, "s1", false);
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK(all->at(0).ns == "manual");
  CHECK(all->at(1).ns == "shop");
  CHECK(list_feeds(m.pool, "s2", true)->empty());
  CHECK(code_of(get_feed(m.pool, "s1", "none").error()) == db_errc::not_found);
}

TEST_CASE("update grows the version, checks expected_version and reschedules a changed URL") {
  migrated_db m;
  REQUIRE(create_feed(m.pool, upload_feed("s1", "shop")));
  auto u = update_feed(m.pool, url_feed("s1", "shop", "https://feeds.example/a.xml"), 1);
  REQUIRE(u);
  CHECK(u->version == 2);
  CHECK(u->url == "https://feeds.example/a.xml");
  CHECK(m.db.scalar("SELECT next_fetch_at <= now() FROM feeds") == "t");

  auto stale = update_feed(m.pool, upload_feed("s1", "shop"), 1);
  REQUIRE_FALSE(stale);
  CHECK(code_of(stale.error()) == db_errc::conflict);
  CHECK(error_message(stale.error()).find("version 2") != std::string::npos);

  // The same URL fetched already keeps its schedule; back to uploads: no schedule at all.
  m.db.scalar(
    "UPDATE feeds SET last_fetched_at = now(), next_fetch_at = now() + interval '30 min'");
  REQUIRE(update_feed(m.pool, url_feed("s1", "shop", "https://feeds.example/a.xml"), 0));
  CHECK(m.db.scalar("SELECT next_fetch_at > now() + interval '29 min' FROM feeds") == "t");
  auto plain = update_feed(m.pool, upload_feed("s1", "shop"), 0);
  REQUIRE(plain);
  CHECK(plain->version == 4);
  CHECK_FALSE(plain->next_fetch_at);
  CHECK(plain->period_ms == 0);

  CHECK(code_of(update_feed(m.pool, upload_feed("s1", "none"), 0).error()) == db_errc::not_found);
}

TEST_CASE("remove cancels waiting loads, makes the closing load and queues the whole history") {
  migrated_db m;
  REQUIRE(create_feed(m.pool, upload_feed("s1", "shop")));
  REQUIRE(create_feed(m.pool, upload_feed("s1", "other")));
  auto done1 = create_feed_load(m.pool, upload("s1", "shop", "f1.xml"));
  auto done2 = create_feed_load(m.pool, upload("s1", "shop", "f2.xml"));
  REQUIRE(done1);
  REQUIRE(done2);
  end_load(m, "s1", done1->load_id);
  end_load(m, "s1", done2->load_id);
  auto waiting = create_feed_load(m.pool, upload("s1", "shop", "f3.xml"));
  REQUIRE(waiting);
  auto elsewhere = create_feed_load(m.pool, upload("s1", "other", "f4.xml"));
  REQUIRE(elsewhere);

  auto r = remove_feed(m.pool, "s1", "shop", true);
  REQUIRE(r);
  CHECK_FALSE(r->already);
  CHECK(r->cancelled == 1);
  auto closing = get_feed_load(m.pool, "s1", r->load_id);
  REQUIRE(closing);
  CHECK(closing->origin == "delete");
  CHECK(closing->status == "queued");
  CHECK(closing->feed_version == 2);
  gost::v1::FeedSettings s;
  REQUIRE(s.ParseFromString(closing->settings));
  CHECK(s.missing() == gost::v1::FeedSettings::MAKE_MANUAL);
  CHECK(s.kind() == gost::v1::FeedSettings::UPLOAD);
  // The waiting load will not run; the closing one is the processor's next.
  CHECK(get_feed_load(m.pool, "s1", waiting->load_id)->status == "cancelled");
  CHECK(count(m, "feed_queue", "load_id = " + std::to_string(waiting->load_id)) == "0");
  CHECK(count(m, "feed_queue", "load_id = " + std::to_string(r->load_id) + " AND stage = 'process'")
        == "1");
  // Every load of the feed but the closing one is queued for cleanup; the other feed's are not.
  CHECK(m.db.scalar("SELECT string_agg(load_id::text, ',' ORDER BY load_id) FROM feed_old_loads")
        == std::to_string(done1->load_id) + "," + std::to_string(done2->load_id) + ","
             + std::to_string(waiting->load_id));

  auto f = get_feed(m.pool, "s1", "shop");
  REQUIRE(f);
  CHECK(f->removed);
  CHECK(f->version == 2);
  CHECK_FALSE(f->next_fetch_at);
  CHECK(list_feeds(m.pool, "s1", false)->size() == 1);
  CHECK(list_feeds(m.pool, "s1", true)->size() == 2);

  // Removed again: the same closing load, nothing new.
  auto again = remove_feed(m.pool, "s1", "shop", false);
  REQUIRE(again);
  CHECK(again->already);
  CHECK(again->load_id == r->load_id);
  CHECK(count(m, "feed_loads", "origin = 'delete'") == "1");
  // No loads for a removed feed, and no update; created anew, it lives again.
  auto refused = create_feed_load(m.pool, upload("s1", "shop", "f5.xml"));
  REQUIRE_FALSE(refused);
  CHECK(code_of(refused.error()) == db_errc::conflict);
  CHECK(code_of(update_feed(m.pool, upload_feed("s1", "shop"), 0).error()) == db_errc::conflict);
  auto anew = create_feed(m.pool, upload_feed("s1", "shop", "Moscow"));
  REQUIRE(anew);
  CHECK_FALSE(anew->removed);
  CHECK(anew->version == 3);
  CHECK(code_of(remove_feed(m.pool, "s1", "none", false).error()) == db_errc::not_found);
}

TEST_CASE("loads are listed newest first and paged by load id") {
  migrated_db m;
  REQUIRE(create_feed(m.pool, upload_feed("s1", "shop")));
  REQUIRE(create_feed(m.pool, upload_feed("s1", "other")));
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(create_feed_load(m.pool, upload("s1", "shop", "f" + std::to_string(i)))->load_id);
  REQUIRE(create_feed_load(m.pool, upload("s1", "other", "g")));
  m.db.scalar("INSERT INTO feed_statistics VALUES ('s1', " + std::to_string(ids[4])
              + ", '\\x0807')");
  auto first = list_feed_loads(m.pool, "s1", "shop", 0, 2);
  REQUIRE(first);
  REQUIRE(first->size() == 2);
  CHECK(first->at(0).load_id == ids[4]);
  CHECK(first->at(0).statistics == std::string("\x08\x07", 2));
  CHECK(first->at(1).load_id == ids[3]);
  CHECK(first->at(1).statistics.empty());
  auto rest = list_feed_loads(m.pool, "s1", "shop", first->back().load_id, 10);
  REQUIRE(rest);
  REQUIRE(rest->size() == 3);
  CHECK(rest->at(0).load_id == ids[2]);
  CHECK(rest->at(2).load_id == ids[0]);
  CHECK(list_feed_loads(m.pool, "s2", "shop", 0, 10)->empty());
  auto f = get_feed(m.pool, "s1", "shop");
  CHECK(f->last_load_id == ids[4]);
}

TEST_CASE("errors are paged by (external_id, error_id), filtered, counted and streamed") {
  migrated_db m;
  REQUIRE(create_feed(m.pool, upload_feed("s1", "shop")));
  auto load = create_feed_load(m.pool, upload("s1", "shop", "f"));
  REQUIRE(load);
  std::vector<feed_offer_error> errors;
  for (int i = 0; i < 7; ++i) {
    auto x = "x" + std::to_string(i);
    errors.push_back({x, 0, "error", i % 2 ? "validation" : "duplicate", "id", "t", i, "m"});
    errors.push_back({x, 1, "warning", "geocoding", "Address", "t", i, "w"});
  }
  REQUIRE_FALSE(add_feed_offer_errors(m.pool, "s1", load->load_id, errors));

  feed_error_query q;
  q.seller_id = "s1";
  q.load_id = load->load_id;
  q.limit = 3;
  std::vector<std::string> seen;
  for (;;) {
    auto page = list_feed_errors(m.pool, q);
    REQUIRE(page);
    CHECK(page->total == 14);
    for (auto& e : page->errors)
      seen.push_back(e.external_id + "/" + std::to_string(e.error_id));
    if (page->errors.size() < 3)
      break;
    q.after_external_id = page->errors.back().external_id;
    q.after_error_id = page->errors.back().error_id;
  }
  REQUIRE(seen.size() == 14);
  CHECK(seen.front() == "x0/0");
  CHECK(seen[1] == "x0/1");
  CHECK(seen.back() == "x6/1");

  feed_error_query errs;
  errs.seller_id = "s1";
  errs.load_id = load->load_id;
  errs.level = "error";
  errs.type = "validation";
  auto page = list_feed_errors(m.pool, errs);
  REQUIRE(page);
  CHECK(page->total == 3);
  REQUIRE(page->errors.size() == 3);
  CHECK(page->errors[0].external_id == "x1");
  CHECK(page->errors[0].field == "id");
  CHECK(page->errors[0].line == 1);

  // Streamed in pages of 4: every row once, in order; stopping early stops.
  std::vector<size_t> pages;
  size_t rows = 0;
  errs.level.clear();
  errs.type.clear();
  REQUIRE_FALSE(for_each_feed_error(m.pool, errs, 4, [&](const std::vector<feed_offer_error>& p) {
    pages.push_back(p.size());
    rows += p.size();
    return true;
  }));
  CHECK(rows == 14);
  CHECK(pages == std::vector<size_t>{4, 4, 4, 2});
  int calls = 0;
  REQUIRE_FALSE(for_each_feed_error(m.pool, errs, 4, [&](const std::vector<feed_offer_error>&) {
    ++calls;
    return false;
  }));
  CHECK(calls == 1);
}

TEST_CASE("cleanup removes a load's data in order and keeps a file another load still uses") {
  migrated_db m;
  REQUIRE(create_feed(m.pool, upload_feed("s1", "shop")));
  REQUIRE(create_feed(m.pool, upload_feed("s2", "shop")));
  // s1's two loads and s2's one share a file (content-addressed); s1 has one of its own.
  auto a = create_feed_load(m.pool, upload("s1", "shop", "same.xml"));
  auto b = create_feed_load(m.pool, upload("s1", "shop", "same.xml"));
  auto c = create_feed_load(m.pool, upload("s1", "shop", "own.xml"));
  auto d = create_feed_load(m.pool, upload("s2", "shop", "same.xml"));
  for (auto* l : {&a, &b, &c, &d}) {
    REQUIRE(*l);
    fill_load(m, (*l)->seller_id, (*l)->load_id);
    end_load(m, (*l)->seller_id, (*l)->load_id);
  }
  m.db.scalar("INSERT INTO feed_old_loads VALUES ('s1', " + std::to_string(a->load_id)
              + "), ('s1', " + std::to_string(c->load_id) + ")");

  auto first = clean_old_feed_loads(m.pool, 1); // in load order: `a` first
  REQUIRE(first);
  CHECK(first->loads == 1);
  CHECK(first->blobs.empty()); // `b` and s2's load still use same.xml
  auto a_rows = "seller_id = 's1' AND load_id = " + std::to_string(a->load_id);
  for (const char* t : {"feed_offer_errors", "feed_offer_batches", "feed_statistics", "feed_loads",
                        "feed_old_loads"})
    CHECK_MESSAGE(count(m, t, a_rows) == "0", t);
  auto second = clean_old_feed_loads(m.pool, 100);
  REQUIRE(second);
  CHECK(second->loads == 1);
  CHECK(second->blobs == std::vector<std::string>{"own.xml"});
  CHECK(count(m, "feed_old_loads") == "0");
  // The others' data stays.
  CHECK(count(m, "feed_offer_errors") == "4");
  CHECK(count(m, "feed_statistics") == "2");
  CHECK(count(m, "feed_loads") == "2");
  CHECK(clean_old_feed_loads(m.pool, 100)->loads == 0);

  // The last two users of same.xml go in one step: named once, when the last goes.
  m.db.scalar("INSERT INTO feed_old_loads VALUES ('s2', " + std::to_string(d->load_id)
              + "), ('s1', " + std::to_string(b->load_id) + ")");
  auto last = clean_old_feed_loads(m.pool, 100);
  REQUIRE(last);
  CHECK(last->loads == 2);
  CHECK(last->blobs == std::vector<std::string>{"same.xml"});
  CHECK(count(m, "feed_loads") == "0");
  CHECK(count(m, "feed_offer_errors") == "0");
  CHECK(count(m, "feed_offer_batches") == "0");
}

TEST_CASE("cleanup with shard groups: a file another group's load uses is not named; when "
          "that group cannot say, the step is undone and done again later") {
  migrated_db m;
  REQUIRE(create_feed(m.pool, upload_feed("s1", "shop")));
  auto a = create_feed_load(m.pool, upload("s1", "shop", "shared.xml"));
  auto b = create_feed_load(m.pool, upload("s1", "shop", "mine.xml"));
  for (auto* l : {&a, &b}) {
    REQUIRE(*l);
    fill_load(m, "s1", (*l)->load_id);
    end_load(m, "s1", (*l)->load_id);
  }
  m.db.scalar("INSERT INTO feed_old_loads VALUES ('s1', " + std::to_string(a->load_id)
              + "), ('s1', " + std::to_string(b->load_id) + ")");
  std::vector<std::string> asked;
  // The other group's database is away: nothing is cleaned, the error says why.
  auto away = clean_old_feed_loads(m.pool, 100, [&](const std::string& f) -> caf::expected<bool> {
    asked.push_back(f);
    return make_db_error(db_errc::unavailable, "group 1 is away");
  });
  REQUIRE_FALSE(away);
  CHECK(error_message(away.error()).find("group 1 is away") != std::string::npos);
  CHECK(count(m, "feed_old_loads") == "2");
  CHECK(count(m, "feed_loads") == "2");
  CHECK(count(m, "feed_offer_errors") == "4");
  // It answers: shared.xml is one of its loads' (kept), mine.xml is not (named).
  asked.clear();
  auto done = clean_old_feed_loads(m.pool, 100, [&](const std::string& f) -> caf::expected<bool> {
    asked.push_back(f);
    return f == "shared.xml";
  });
  REQUIRE(done);
  CHECK(done->loads == 2);
  CHECK(done->blobs == std::vector<std::string>{"mine.xml"});
  CHECK(asked == std::vector<std::string>{"shared.xml", "mine.xml"});
  CHECK(count(m, "feed_loads") == "0");
}

TEST_CASE("a removed feed's whole history goes; its closing load stays") {
  migrated_db m;
  REQUIRE(create_feed(m.pool, upload_feed("s1", "shop")));
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto l = create_feed_load(m.pool, upload("s1", "shop", "f" + std::to_string(i) + ".xml"));
    REQUIRE(l);
    fill_load(m, "s1", l->load_id);
    if (i < 2)
      end_load(m, "s1", l->load_id);
    ids.push_back(l->load_id);
  }
  m.db.scalar("UPDATE feed_loads SET status = 'in_progress' WHERE load_id = "
              + std::to_string(ids[1]));
  auto r = remove_feed(m.pool, "s1", "shop", false);
  REQUIRE(r);
  auto gone = clean_old_feed_loads(m.pool, 100);
  REQUIRE(gone);
  CHECK(gone->loads == 3);
  std::sort(gone->blobs.begin(), gone->blobs.end());
  CHECK(gone->blobs == std::vector<std::string>{"f0.xml", "f1.xml", "f2.xml"});
  CHECK(m.db.scalar("SELECT string_agg(load_id::text, ',') FROM feed_loads")
        == std::to_string(r->load_id));
  CHECK(count(m, "feed_offer_errors") == "0");
  CHECK(count(m, "feed_statistics") == "0");
  CHECK(count(m, "feed_offer_batches") == "0");
  CHECK(count(m, "feed_queue", "load_id <> " + std::to_string(r->load_id)) == "0");
}
