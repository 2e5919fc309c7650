// The feed processor and the unifier over the shipped catalog and gazetteer, with a fake
// requests topic: what is sent, in which batches, and that the end comes strictly after every
// batch was acknowledged. No services.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <google/protobuf/util/message_differencer.h>

#include "gost/feeds/catalog.hpp"
#include "gost/feeds/feed_processor.hpp"
#include "gost/feeds/gazetteer.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/process.hpp"

using namespace gost;
using namespace gost::feeds;

namespace {

std::string sample(const std::string& name) {
  auto text = testing::read_file(std::string(GOST_FEEDS_SAMPLES_DIR) + "/" + name);
  REQUIRE_FALSE(text.empty());
  return text;
}

const unifier& shipped() {
  static unifier u{
    std::shared_ptr<const catalog>(&catalog::builtin(), [](const catalog*) {}),
    std::shared_ptr<const gazetteer>(&gazetteer::builtin(), [](const gazetteer*) {})};
  return u;
}

std::string category_id(const std::vector<std::string>& levels) {
  auto* c = catalog::builtin().find(levels);
  REQUIRE(c != nullptr);
  return c->id;
}

/// The requests topic: what was sent; "batch", "end" and "flush" in order. `refuse_flush`
/// makes the next flushes fail (the broker did not acknowledge).
struct fake_topic final : request_sink {
  std::vector<v1::FeedRequest> sent;
  std::vector<std::string> events;
  int refuse_flush = 0;

  void send(const v1::FeedRequest& r, const stop_signal&) override {
    sent.push_back(r);
    events.push_back(r.has_end() ? "end" : "batch");
  }
  bool flushed(const stop_signal&) override {
    events.push_back("flush");
    if (refuse_flush > 0) {
      --refuse_flush;
      return false;
    }
    return true;
  }

  std::map<std::string, v1::Offer> offers() const {
    std::map<std::string, v1::Offer> out;
    for (auto& r : sent)
      if (r.has_batch())
        for (auto& o : r.batch().offers())
          out[o.external_id()] = o;
    return out;
  }
  std::map<std::string, std::string> rejected() const {
    std::map<std::string, std::string> out;
    for (auto& r : sent)
      if (r.has_batch())
        for (auto& x : r.batch().rejected())
          out[x.external_id()] = x.reason();
    return out;
  }
};

struct recorded_problems final : problem_sink {
  struct row {
    std::string external_id;
    int64_t line;
    offer_problem p;
  };
  std::vector<row> rows;
  void add(const std::string& ext, const std::string&, int64_t line,
           const offer_problem& p) override {
    rows.push_back({ext, line, p});
  }
  bool has(const std::string& ext, problem_type t, problem_level l = problem_level::error) const {
    for (auto& r : rows)
      if (r.external_id == ext && r.p.type == t && r.p.level == l)
        return true;
    return false;
  }
};

load_spec spec(size_t batch = 500) {
  load_spec s;
  s.seller_id = "s1";
  s.ns = "feed-1";
  s.task_id = "42";
  s.batch_size = batch;
  return s;
}

load_report process(const std::string& doc, fake_topic& topic, recorded_problems& problems,
                    load_spec s = spec(), reader_limits lim = {}) {
  feed_processor p{shipped(), lim};
  stop_signal stop;
  return p.run([&] { return memory_source(doc); }, s, topic, &problems, stop);
}

} // namespace

TEST_CASE("each sample feed is unified into the catalog's and gazetteer's terms") {
  struct {
    const char* file;
    feed_format format;
  } samples[] = {{"native.xml", feed_format::native},
                 {"avito.xml", feed_format::avito},
                 {"yml.xml", feed_format::yml}};
  for (auto& s : samples) {
    CAPTURE(s.file);
    fake_topic topic;
    recorded_problems problems;
    auto sp = spec();
    sp.unify.default_address = "Москва";
    auto rep = process(sample(s.file), topic, problems, sp);
    CHECK(rep.outcome == load_report::status::succeeded);
    CHECK(rep.format == s.format);
    CHECK(rep.rejected == 0);
    for (auto& row : problems.rows)
      CHECK_MESSAGE(row.p.level == problem_level::warning, row.external_id, ": ", row.p.field, ": ",
                    row.p.message);
    auto offers = topic.offers();
    CHECK(offers.size() == rep.sent);
    for (auto& [ext, o] : offers) {
      CAPTURE(ext);
      CHECK_FALSE(o.category().empty());
      CHECK(o.address().geo_id() != 0);
      CHECK(o.address().region_geo_id() != 0);
      CHECK(o.source() == v1::OFFER_SOURCE_FEED);
    }
  }
}

TEST_CASE("the native sample in detail: category ids, canonical attributes, places") {
  fake_topic topic;
  recorded_problems problems;
  auto rep = process(sample("native.xml"), topic, problems);
  REQUIRE(rep.outcome == load_report::status::succeeded);
  auto offers = topic.offers();
  REQUIRE(offers.size() == 3);
  auto& car = offers["car-1001"];
  CHECK(car.category() == category_id({"Автомобили"}));
  CHECK(car.price().amount_minor() == 65000000);
  CHECK(car.address().city() == "Москва");
  CHECK_FALSE(car.address().has_geo()); // a text address: no coordinates invented
  auto transmission = catalog::builtin().resolve(*catalog::builtin().by_id(car.category()),
                                                 "Коробка передач", "МКПП");
  REQUIRE(transmission);
  CHECK(car.attributes().at(transmission.id) == transmission.value);
  CHECK(car.photos_size() == 2);
  CHECK(car.photos(1).order() == 1);
  auto& flat = offers["flat-2002"];
  CHECK(flat.category() == category_id({"Квартиры"}));
  CHECK(flat.address().city() == "Санкт-Петербург");
  CHECK(flat.address().geo().lat() == doctest::Approx(59.9386)); // kept as given
  auto& phone = offers["phone-3003"];
  CHECK(phone.address().city() == "Казань");
  CHECK(phone.price().amount_minor() == 1999050);
}

TEST_CASE("batches in order, the end strictly after every batch was acknowledged") {
  std::string doc = "<feed>";
  for (int i = 0; i < 25; ++i)
    doc += "<offer><id>o" + std::to_string(i)
           + "</id><category>Квартиры</category><title>t</title><address>Москва</address>"
             "</offer>";
  doc += "</feed>";
  fake_topic topic;
  recorded_problems problems;
  auto s = spec(10);
  s.missing = v1::FeedEnd::MAKE_MANUAL;
  auto rep = process(doc, topic, problems, s);
  REQUIRE(rep.outcome == load_report::status::succeeded);
  CHECK(rep.batches == 3);
  REQUIRE(topic.sent.size() == 4);
  CHECK(topic.sent[0].batch().batch_id() == "1");
  CHECK(topic.sent[0].batch().offers_size() == 10);
  CHECK(topic.sent[2].batch().batch_id() == "3");
  CHECK(topic.sent[2].batch().offers_size() == 5);
  for (auto& r : topic.sent) {
    CHECK(r.seller_id() == "s1");
    CHECK(r.namespace_() == "feed-1");
    CHECK(r.task_id() == "42");
  }
  CHECK(topic.sent[3].end().missing() == v1::FeedEnd::MAKE_MANUAL);
  CHECK(topic.sent[3].end().batches() == 3);
  std::vector<std::string> expected{"batch", "batch", "batch", "flush", "end", "flush"};
  CHECK(topic.events == expected);
}

TEST_CASE("an offer with an error is sent as rejected with its reason; duplicates are "
          "reported, the first kept") {
  fake_topic topic;
  recorded_problems problems;
  auto rep = process(R"(<Ads>
  <Ad><Id>ok</Id><Category>Квартиры</Category><Rooms>1</Rooms><Price>100</Price><Address>Москва</Address></Ad>
  <Ad><Id>price</Id><Category>Квартиры</Category><Rooms>1</Rooms><Price>1 500 руб.</Price><Address>Москва</Address></Ad>
  <Ad><Id>cat</Id><Category>Межпланетные корабли</Category><Title>t</Title><Address>Москва</Address></Ad>
  <Ad><Id>geo</Id><Category>Квартиры</Category><Rooms>1</Rooms><Address>Атлантида</Address></Ad>
  <Ad><Id>ok</Id><Category>Квартиры</Category><Rooms>2</Rooms><Address>Москва</Address></Ad>
  <Ad><Id>extra</Id><Category>Квартиры</Category><Rooms>1</Rooms><Address>Москва</Address><Favourite>yes</Favourite></Ad>
</Ads>)",
                     topic, problems);
  REQUIRE(rep.outcome == load_report::status::succeeded);
  CHECK(rep.offers == 6);
  CHECK(rep.sent == 2);
  CHECK(rep.rejected == 3);
  CHECK(rep.duplicates == 1);
  auto offers = topic.offers();
  CHECK(offers.count("ok") == 1);
  CHECK(offers["ok"].title() == "1-к. квартира"); // the first "ok" in file order
  CHECK(offers.count("extra") == 1);
  auto rejected = topic.rejected();
  CHECK(rejected["price"].find("1 500 руб.") != std::string::npos);
  CHECK(rejected["cat"].find("Межпланетные корабли") != std::string::npos);
  CHECK(rejected["geo"].find("address") == 0);
  CHECK(problems.has("price", problem_type::validation));
  CHECK(problems.has("cat", problem_type::category));
  CHECK(problems.has("geo", problem_type::geocoding));
  CHECK(problems.has("ok", problem_type::duplicate));
  CHECK(problems.has("extra", problem_type::attribute, problem_level::warning));
}

TEST_CASE("a fatal document sends nothing; a broker that does not acknowledge leaves the load "
          "to run again, and the end is not sent") {
  fake_topic topic;
  recorded_problems problems;
  auto rep = process("<Ads><Ad><Id>1</Id><Title>Tom & Jerry</Title></Ad></Ads>", topic, problems);
  CHECK(rep.outcome == load_report::status::failed);
  REQUIRE(rep.fatal);
  CHECK(rep.fatal->kind == "malformed");
  CHECK(topic.sent.empty());

  fake_topic flaky;
  flaky.refuse_flush = 1;
  auto again = process(sample("native.xml"), flaky, problems);
  CHECK(again.outcome == load_report::status::transient);
  for (auto& r : flaky.sent)
    CHECK_FALSE(r.has_end());
  // Run again: the same batches under the same ids, then the end.
  fake_topic second;
  auto third = process(sample("native.xml"), second, problems);
  CHECK(third.outcome == load_report::status::succeeded);
  REQUIRE(second.sent.size() == flaky.sent.size() + 1);
  for (size_t i = 0; i < flaky.sent.size(); ++i)
    CHECK(google::protobuf::util::MessageDifferencer::Equals(second.sent[i], flaky.sent[i]));
}

namespace {

struct fake_geocoder final : geocoder {
  answer::kind_t kind = answer::found;
  mutable int asked = 0;
  answer locate(const std::string& address) const override {
    ++asked;
    answer a;
    a.kind = kind;
    if (kind == answer::found) {
      a.geo_id = 99001;
      a.region_geo_id = 99;
      a.region = "Тестовая область";
      a.city = address;
    }
    a.message = kind == answer::unavailable ? "connection refused" : "unknown";
    return a;
  }
};

} // namespace

TEST_CASE("an address the gazetteer cannot place goes to the geocoder; while it is away the "
          "offer is carried unchanged, not dropped") {
  auto geo = std::make_shared<fake_geocoder>();
  unifier u{std::shared_ptr<const catalog>(&catalog::builtin(), [](const catalog*) {}),
            std::shared_ptr<const gazetteer>(&gazetteer::builtin(), [](const gazetteer*) {}), geo};
  auto ad = [] {
    feed_ad a;
    a.external_id = "x";
    a.title = "t";
    a.category = {"Квартиры"};
    a.address = "Посёлок Неизвестный";
    return a;
  };
  auto found = u.unify(ad(), {});
  CHECK_FALSE(found.rejected());
  CHECK(found.offer.address().geo_id() == 99001);
  CHECK(geo->asked == 1);
  auto known = ad();
  known.address = "Москва";
  CHECK(u.unify(std::move(known), {}).offer.address().geo_id() > 0);
  CHECK(geo->asked == 1); // the gazetteer placed it: the geocoder is not asked

  geo->kind = geocoder::answer::not_found;
  auto unknown = u.unify(ad(), {});
  CHECK(unknown.rejected());
  CHECK_FALSE(unknown.transient);
  CHECK(unknown.reason().find("geocoder does not know") != std::string::npos);

  geo->kind = geocoder::answer::unavailable;
  auto away = u.unify(ad(), {});
  CHECK(away.transient);
  CHECK(away.rejected()); // carried as rejected: the store keeps what it has
  CHECK(away.reason().find("the stored offer is kept") != std::string::npos);
  REQUIRE(away.problems.size() == 1);
  CHECK(away.problems[0].level == problem_level::warning);
}

TEST_CASE("the HTTP geocoder: found, not found, away, broken answers") {
  std::atomic<int> mode{0};
  std::string last_path;
  std::mutex m;
  testing::http_server srv{[&](const testing::http_server::call& c) {
    {
      std::lock_guard<std::mutex> g{m};
      last_path = c.path;
    }
    switch (mode.load()) {
      case 0:
        return testing::http_server::reply{
          200,
          R"({"geo_id": 50123, "region_geo_id": 50, "region": "Московская область", "city": "Дубна"})"};
      case 1: return testing::http_server::reply{404, ""};
      case 2: return testing::http_server::reply{503, ""};
      default: return testing::http_server::reply{200, "not json"};
    }
  }};
  auto g = make_http_geocoder(srv.url("/geocode"), std::chrono::seconds{5}, true);
  auto a = g->locate("Дубна, ул. Жолио-Кюри");
  CHECK(a.kind == geocoder::answer::found);
  CHECK(a.geo_id == 50123);
  CHECK(a.city == "Дубна");
  {
    std::lock_guard<std::mutex> l{m};
    CHECK(last_path.rfind("/geocode?address=%D0%94", 0) == 0);
  }
  mode = 1;
  CHECK(g->locate("x").kind == geocoder::answer::not_found);
  mode = 2;
  CHECK(g->locate("x").kind == geocoder::answer::unavailable);
  mode = 3;
  CHECK(g->locate("x").kind == geocoder::answer::unavailable);
  auto off = make_http_geocoder(srv.url("/geocode"), std::chrono::seconds{5}, false);
  CHECK(off->locate("x").kind == geocoder::answer::unavailable); // 127.0.0.1 not allowed
}

TEST_CASE("the catalog from a directory: loaded, reloaded when a file changes, a broken change "
          "refused with the old data kept") {
  namespace fs = std::filesystem;
  auto data = fs::path{GOST_FEEDS_SAMPLES_DIR}.parent_path();
  auto dir = fs::path{"/tmp/gost-catalog-" + std::to_string(::getpid())};
  fs::create_directories(dir);
  for (auto* f : {"categories.tsv", "attributes.tsv", "gazetteer.tsv"})
    fs::copy_file(data / f, dir / f, fs::copy_options::overwrite_existing);
  std::string error;
  auto d = unification_data::from_dir(dir.string(), nullptr, error);
  REQUIRE_MESSAGE(d, error);
  CHECK(d->current()->categories().find({"Ракеты"}) == nullptr);
  std::string unchanged;
  CHECK_FALSE(d->reload_if_changed(unchanged));
  CHECK(unchanged.empty());

  auto touch = [&](const char* f) {
    fs::last_write_time(dir / f, fs::last_write_time(dir / f) + std::chrono::seconds{5});
  };
  {
    std::ofstream out(dir / "categories.tsv", std::ios::app);
    out << "hobby.rockets\thobby\tРакеты\tРакетомоделизм|Ракета\n";
  }
  touch("categories.tsv");
  REQUIRE_MESSAGE(d->reload_if_changed(error), error);
  auto* rockets = d->current()->categories().find({"Ракета"});
  REQUIRE(rockets != nullptr);
  CHECK(rockets->id == "hobby.rockets");

  {
    std::ofstream out(dir / "categories.tsv", std::ios::app);
    out << "broken.line\tno.such.parent\tСломано\t\n";
  }
  touch("categories.tsv");
  error.clear();
  CHECK_FALSE(d->reload_if_changed(error));
  CHECK(error.find("categories.tsv:") != std::string::npos);
  CHECK(d->current()->categories().find({"Ракеты"}) != nullptr); // the old data stays
  error.clear();
  CHECK_FALSE(d->reload_if_changed(error)); // not tried again until it changes
  CHECK(error.empty());
  std::string missing_error;
  CHECK(unification_data::from_dir("/nonexistent-dir", nullptr, missing_error) == nullptr);
  CHECK(missing_error.find("/nonexistent-dir") != std::string::npos);
  fs::remove_all(dir);
}
