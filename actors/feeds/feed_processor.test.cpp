// The feed processor and the unifier over the shipped catalog and gazetteer, with a fake
// requests topic: what is sent, in which batches, and that the end comes strictly after every
// batch was acknowledged. No services.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <google/protobuf/util/message_differencer.h>

#include "gost/feeds/catalog.hpp"
#include "gost/feeds/feed_processor.hpp"
#include "gost/feeds/gazetteer.hpp"

using namespace gost;
using namespace gost::feeds;

namespace {

std::string sample(const std::string& name) {
  std::ifstream in(std::string(GOST_FEEDS_SAMPLES_DIR) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  REQUIRE_FALSE(ss.str().empty());
  return ss.str();
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
