// The streaming feed reader: the three formats, encodings, malformed and hostile documents,
// limits, per-offer problems. No services: documents are built in memory.
#include <doctest/doctest.h>

#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gost/feeds/feed_reader.hpp"

using namespace gost::feeds;

namespace {

struct run {
  read_summary summary;
  std::vector<feed_ad> ads;
};

run read(std::string_view doc, reader_limits limits = {}) {
  run out;
  auto src = memory_source(doc);
  out.summary = read_feed(src, limits, [&](feed_ad&& ad) {
    out.ads.push_back(std::move(ad));
    return true;
  });
  // The check pass (no callback) must agree on the verdict and the count.
  auto again = memory_source(doc);
  auto check = read_feed(again, limits);
  CHECK(check.fatal.has_value() == out.summary.fatal.has_value());
  if (check.fatal && out.summary.fatal)
    CHECK(check.fatal->kind == out.summary.fatal->kind);
  if (!check.fatal)
    CHECK(check.offers == out.summary.offers);
  return out;
}

bool has_problem(const feed_ad& ad, std::string_view field, std::string_view text = {}) {
  for (auto& p : ad.problems)
    if (p.field == field && p.message.find(text) != std::string::npos)
      return true;
  return false;
}

std::string attr(const feed_ad& ad, std::string_view name) {
  for (auto& [n, v] : ad.attributes)
    if (n == name)
      return v;
  return "<none>";
}

const char* native_doc = R"(<?xml version="1.0" encoding="UTF-8"?>
<feed version="1">
  <offer>
    <id>car-1</id>
    <category>Транспорт / Автомобили</category>
    <title>Lada Granta, 2019</title>
    <description><![CDATA[Один <b>владелец</b>]]></description>
    <price currency="RUB">650000.50</price>
    <address>Москва, ул. Тверская, 1</address>
    <location lat="55.757" lon="37.615"/>
    <photos><photo url="https://img.example.org/1.jpg"/><photo url="/relative.jpg"/></photos>
    <video>https://video.example.org/v/1</video>
    <attributes>
      <attribute name="Марка">Lada</attribute>
      <attribute name="Коробка передач">АКПП</attribute>
    </attributes>
  </offer>
  <offer>
    <id>flat-2</id>
    <category>Квартиры</category>
    <price>1 500 руб.</price>
  </offer>
</feed>
)";

} // namespace

TEST_CASE("native feed: offers as written, values checked per offer") {
  auto r = read(native_doc);
  REQUIRE(r.summary.ok());
  CHECK(r.summary.format == feed_format::native);
  REQUIRE(r.ads.size() == 2);
  auto& car = r.ads[0];
  CHECK(car.line == 3);
  CHECK(car.external_id == "car-1");
  CHECK(car.category == std::vector<std::string>{"Транспорт", "Автомобили"});
  CHECK(car.description == "Один <b>владелец</b>");
  CHECK(car.price_minor == 65000050);
  CHECK(car.currency == "RUB");
  CHECK(car.lat == doctest::Approx(55.757));
  CHECK(car.photos == std::vector<std::string>{"https://img.example.org/1.jpg"});
  CHECK(has_problem(car, "photos/photo", "/relative.jpg"));
  CHECK(car.video == "https://video.example.org/v/1");
  CHECK(attr(car, "Коробка передач") == "АКПП");
  auto& flat = r.ads[1];
  CHECK_FALSE(flat.price_minor.has_value());
  CHECK(has_problem(flat, "price", "1 500 руб."));
}

TEST_CASE("native feed: a document not matching feed.xsd fails whole, naming the line") {
  auto r = read(R"(<feed>
  <offer><id>1</id><category>Квартиры</category></offer>
  <offer><id>2</id><title>no category</title><colour>red</colour></offer>
</feed>)");
  REQUIRE(r.summary.fatal);
  CHECK(r.summary.fatal->kind == "schema");
  CHECK(r.summary.fatal->line == 3);
  CHECK(r.summary.fatal->describe().find("line 3") == 0);
}

TEST_CASE("Avito Autoload: categories, options, titles made for cars and flats") {
  auto r = read(R"(<?xml version="1.0" encoding="UTF-8"?>
<Ads formatVersion="3" target="Avito.ru">
  <Ad>
    <Id>a1</Id>
    <Category>Автомобили</Category>
    <Make>Lada</Make><Model>Granta</Model><Year>2019</Year>
    <Transmission>Механика</Transmission>
    <Price>650000</Price>
    <Address>Санкт-Петербург, Невский пр-т, 10</Address>
    <Images><Image url="https://img.example.org/a1.jpg"/></Images>
    <VideoURL>https://www.youtube.com/watch?v=abc</VideoURL>
    <ContactPhone>+7 999 000-00-00</ContactPhone>
    <Options><Option>Кондиционер</Option><Option>Подогрев сидений</Option></Options>
  </Ad>
  <Ad>
    <Id>a2</Id>
    <Category>Квартиры</Category>
    <OperationType>Продам</OperationType>
    <Rooms>2</Rooms><Square>54</Square><Floor>3</Floor><Floors>9</Floors>
    <Price>-100</Price>
    <Latitude>59.93</Latitude><Longitude>30.31</Longitude>
  </Ad>
  <Ad>
    <Id>a3</Id>
    <Category>Одежда, обувь, аксессуары</Category>
    <GoodsType>Женская одежда</GoodsType>
    <ApparelType>Платья</ApparelType>
    <Price>бесплатно</Price>
  </Ad>
  <Ad>
    <Category>Квартиры</Category><Rooms>Студия</Rooms><Price>12,5</Price>
    <Region>Москва</Region><Street>ул. Ленина, 5</Street>
  </Ad>
</Ads>)");
  REQUIRE(r.summary.ok());
  CHECK(r.summary.format == feed_format::avito);
  REQUIRE(r.ads.size() == 4);
  auto& car = r.ads[0];
  CHECK(car.title == "Lada Granta, 2019");
  CHECK(car.category == std::vector<std::string>{"Автомобили"});
  CHECK(car.price_minor == 65000000);
  CHECK(car.currency == "RUB");
  CHECK(attr(car, "Transmission") == "Механика");
  CHECK(attr(car, "ContactPhone") == "<none>");
  CHECK(std::count_if(car.attributes.begin(), car.attributes.end(),
                      [](auto& a) { return a.first == "Options"; })
        == 2);
  CHECK(car.problems.empty());
  auto& flat = r.ads[1];
  CHECK(flat.title == "2-к. квартира, 54 м², 3/9 эт.");
  CHECK(has_problem(flat, "Price", "-100"));
  CHECK(flat.lon == doctest::Approx(30.31));
  auto& dress = r.ads[2];
  CHECK(dress.category
        == std::vector<std::string>{"Одежда, обувь, аксессуары", "Женская одежда", "Платья"});
  CHECK(has_problem(dress, "Title", "no Title"));
  CHECK(has_problem(dress, "Price", "бесплатно"));
  auto& studio = r.ads[3];
  CHECK(has_problem(studio, "Id", "no Id"));
  CHECK(has_problem(studio, "Price", "12,5"));
  CHECK(studio.title == "Квартира-студия");
  CHECK(studio.address == "Москва, ул. Ленина, 5");
}

TEST_CASE("Yandex YML: the seller's categories as a path, vendor.model offers, RUR") {
  auto r = read(R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE yml_catalog SYSTEM "shops.dtd">
<yml_catalog date="2026-11-01 10:00">
  <shop>
    <name>Магазин</name>
    <currencies><currency id="RUR" rate="1"/></currencies>
    <categories>
      <category id="1">Электроника</category>
      <category id="2" parentId="1">Смартфоны</category>
    </categories>
    <offers>
      <offer id="p1" available="true">
        <name>Смартфон X 128 ГБ</name>
        <price>19990.00</price>
        <currencyId>RUR</currencyId>
        <categoryId>2</categoryId>
        <picture>https://shop.example.org/p1.jpg</picture>
        <picture>https://shop.example.org/p1b.jpg</picture>
        <param name="Цвет товара">чёрный</param>
        <param name="Объём памяти" unit="ГБ">128</param>
      </offer>
      <offer id="p2" available="false">
        <typePrefix>Смартфон</typePrefix><vendor>Acme</vendor><model>Z1</model>
        <price>100,5</price><currencyId>RUB</currencyId><categoryId>9</categoryId>
      </offer>
    </offers>
  </shop>
</yml_catalog>)");
  REQUIRE(r.summary.ok());
  CHECK(r.summary.format == feed_format::yml);
  REQUIRE(r.ads.size() == 2);
  auto& p1 = r.ads[0];
  CHECK(p1.external_id == "p1");
  CHECK(p1.category == std::vector<std::string>{"Электроника", "Смартфоны"});
  CHECK(p1.price_minor == 1999000);
  CHECK(p1.currency == "RUB");
  CHECK(p1.photos.size() == 2);
  CHECK(attr(p1, "Объём памяти") == "128 ГБ");
  CHECK(p1.active);
  CHECK(p1.problems.empty());
  auto& p2 = r.ads[1];
  CHECK(p2.title == "Смартфон Acme Z1");
  CHECK(attr(p2, "vendor") == "Acme");
  CHECK_FALSE(p2.active);
  CHECK(has_problem(p2, "price", "100,5"));
  CHECK(has_problem(p2, "categoryId", "9"));
}

TEST_CASE("encodings: UTF-8 with a BOM, windows-1251 when declared, invalid bytes fatal") {
  std::string bom = "\xEF\xBB\xBF<feed><offer><id>1</id><category>Квартиры</category>"
                    "</offer></feed>";
  auto a = read(bom);
  REQUIRE(a.summary.ok());
  REQUIRE(a.ads.size() == 1);

  // "Москва" in windows-1251.
  std::string cp1251 = "<?xml version=\"1.0\" encoding=\"windows-1251\"?>\n<Ads>"
                       "<Ad><Id>1</Id><Category>Квартиры</Category>"
                       "<Address>\xCC\xEE\xF1\xEA\xE2\xE0</Address></Ad></Ads>";
  // The category above is UTF-8 bytes read as windows-1251: garbage, but valid bytes.
  auto b = read(cp1251);
  REQUIRE(b.summary.ok());
  REQUIRE(b.ads.size() == 1);
  CHECK(b.ads[0].address == "Москва");

  std::string bad = "<feed>\n<offer><id>1</id><category>\xC3\x28</category></offer></feed>";
  auto c = read(bad);
  REQUIRE(c.summary.fatal);
  CHECK(c.summary.fatal->kind == "malformed");
  CHECK(c.summary.fatal->line == 2);
}

TEST_CASE("malformed documents fail with line and column") {
  struct {
    const char* doc;
    int64_t line;
  } cases[] = {
    {"<Ads>\n<Ad><Id>1</Id></Ad>\n<Ad><Id>2", 3},                      // truncated
    {"<Ads>\n<Ad><Id>1</Id></Ad>\n</Ads>\ntrailing text", 4},          // text after the root
    {"<Ads>\n<Ad><Id>1</Id><Title>Tom & Jerry</Title></Ad></Ads>", 2}, // unescaped &
  };
  for (auto& c : cases) {
    CAPTURE(c.doc);
    auto r = read(c.doc);
    REQUIRE(r.summary.fatal);
    CHECK(r.summary.fatal->kind == "malformed");
    CHECK(r.summary.fatal->line == c.line);
    CHECK(r.summary.fatal->column > 0);
  }
}

TEST_CASE("hostile documents are refused before anything is expanded or fetched") {
  // A file the documents name: its content must never appear anywhere.
  auto secret = std::string("/tmp/gost-feed-secret-") + std::to_string(::getpid());
  std::ofstream(secret) << "TOP-SECRET";
  std::string cases[] = {
    // billion laughs
    R"(<?xml version="1.0"?>
<!DOCTYPE Ads [
 <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
]>
<Ads><Ad><Id>1</Id><Title>&f;&f;&f;&f;</Title></Ad></Ads>)",
    // quadratic blow-up: one large entity referenced many times
    "<!DOCTYPE Ads [<!ENTITY big \"" + std::string(50000, 'x') + "\">]>\n<Ads><Ad><Title>" +
      [] {
        std::string refs;
        for (int i = 0; i < 5000; ++i)
          refs += "&big;";
        return refs;
      }()
      + "</Title></Ad></Ads>",
    // XXE: an absolute file URL, a relative system id, a parameter entity over the network
    "<!DOCTYPE Ads [<!ENTITY x SYSTEM \"file://" + secret
      + "\">]>\n<Ads><Ad><Id>1</Id><Title>&x;</Title></Ad></Ads>",
    "<!DOCTYPE Ads [<!ENTITY x SYSTEM \"gost-feed-secret\">]>\n<Ads><Ad><Title>&x;</Title>"
    "</Ad></Ads>",
    R"(<!DOCTYPE Ads [<!ENTITY % pe SYSTEM "http://127.0.0.1:9/x.dtd"> %pe;]><Ads/>)",
    // an external DTD with an internal subset
    R"(<!DOCTYPE Ads SYSTEM "http://127.0.0.1:9/ads.dtd" [<!ELEMENT Ads ANY>]><Ads/>)",
  };
  for (auto& doc : cases) {
    CAPTURE(doc.substr(0, 120));
    auto r = read(doc);
    REQUIRE(r.summary.fatal);
    CHECK(r.summary.fatal->kind == "hostile");
    CHECK(r.summary.fatal->message.find("declares") != std::string::npos);
    CHECK(r.ads.empty());
    for (auto& ad : r.ads)
      CHECK(ad.title.find("TOP-SECRET") == std::string::npos);
  }
  std::remove(secret.c_str());
}

TEST_CASE("an external DTD named alone is ignored, never fetched") {
  auto r = read(R"(<!DOCTYPE Ads SYSTEM "http://127.0.0.1:9/ads.dtd">
<Ads><Ad><Id>1</Id><Category>Квартиры</Category><Title>t</Title></Ad></Ads>)");
  REQUIRE(r.summary.ok());
  CHECK(r.ads.size() == 1);
}

TEST_CASE("limits: file size, depth, offers, field length, each with its config key") {
  std::string many = "<Ads>";
  for (int i = 0; i < 50; ++i)
    many += "<Ad><Id>" + std::to_string(i) + "</Id><Title>t</Title></Ad>";
  many += "</Ads>";

  reader_limits small_file;
  small_file.max_file_bytes = 1000;
  auto a = read(many, small_file);
  REQUIRE(a.summary.fatal);
  CHECK(a.summary.fatal->kind == "limit");
  CHECK(a.summary.fatal->message.find("feed.max_file_bytes") != std::string::npos);

  reader_limits few;
  few.max_offers = 10;
  auto b = read(many, few);
  REQUIRE(b.summary.fatal);
  CHECK(b.summary.fatal->message.find("feed.max_offers") != std::string::npos);
  CHECK(b.ads.size() == 10);

  std::string deep = "<Ads><Ad><Id>1</Id><X>";
  for (int i = 0; i < 40; ++i)
    deep += "<n>";
  for (int i = 0; i < 40; ++i)
    deep += "</n>";
  deep += "</X></Ad></Ads>";
  auto c = read(deep);
  REQUIRE(c.summary.fatal);
  CHECK(c.summary.fatal->message.find("feed.max_depth") != std::string::npos);

  reader_limits short_fields;
  short_fields.max_field_chars = 100;
  auto d =
    read("<Ads><Ad><Id>1</Id><Description>" + std::string(101, 'x') + "</Description></Ad></Ads>",
         short_fields);
  REQUIRE(d.summary.fatal);
  CHECK(d.summary.fatal->message.find("feed.max_field_chars") != std::string::npos);
  // Characters, not bytes: 100 Cyrillic letters (200 bytes) pass.
  std::string cyr;
  for (int i = 0; i < 100; ++i)
    cyr += "ж";
  auto e = read("<Ads><Ad><Id>1</Id><Title>" + cyr + "</Title></Ad></Ads>", short_fields);
  CHECK(e.summary.ok());
  auto f = read("<Ads><Ad><Id>1</Id><Images><Image url=\"https://x.org/" + std::string(120, 'a')
                  + "\"/></Images></Ad></Ads>",
                short_fields);
  REQUIRE(f.summary.fatal);
  CHECK(f.summary.fatal->message.find("attribute value") != std::string::npos);
}

TEST_CASE("an unknown root or an empty document is a format error") {
  auto a = read("<rss><channel/></rss>");
  REQUIRE(a.summary.fatal);
  CHECK(a.summary.fatal->kind == "format");
  CHECK(a.summary.fatal->message.find("<rss>") != std::string::npos);
  auto b = read("");
  REQUIRE(b.summary.fatal);
}

TEST_CASE("the callback may stop the pass") {
  auto src = memory_source(native_doc);
  int seen = 0;
  auto s = read_feed(src, {}, [&](feed_ad&&) { return ++seen < 1; });
  CHECK(s.stopped);
  CHECK_FALSE(s.ok());
  CHECK(seen == 1);
}

TEST_CASE("offers past line 65535 are reported at their own line") {
  // libxml2 keeps at most 65535 as an element's line; a 100,000-offer feed has millions.
  std::string doc = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Ads formatVersion=\"3\">\n";
  int line = 3;
  for (int i = 0; i < 17'000; ++i, line += 4) // pretty-printed: <Ad> on a line of its own
    doc += "<Ad>\n  <Id>a-" + std::to_string(i) + "</Id>\n  <Price>100</Price>\n</Ad>\n";
  int pretty = line - 4;
  doc += "<Ad><Id>last</Id><Price>1 500 руб.</Price></Ad>\n"; // written on one line
  int compact = line;
  doc += "</Ads>\n";
  REQUIRE(pretty > 65535);
  auto r = read(doc);
  REQUIRE(r.summary.ok());
  REQUIRE(r.ads.size() == 17'001);
  CHECK(r.ads[r.ads.size() - 2].line == pretty);
  CHECK(r.ads.back().line == compact);
  CHECK(r.ads[10].line == 3 + 40);
}

TEST_CASE("a file source reads from disk and names a missing file") {
  auto path = std::string("/tmp/gost-feed-") + std::to_string(::getpid()) + ".xml";
  std::ofstream(path) << native_doc;
  auto src = file_source(path);
  int n = 0;
  auto s = read_feed(src, {}, [&](feed_ad&&) { return ++n > 0; });
  CHECK(s.ok());
  CHECK(n == 2);
  CHECK(s.bytes == std::string_view(native_doc).size());
  std::remove(path.c_str());
  auto missing = file_source(path);
  auto m = read_feed(missing, {});
  REQUIRE(m.fatal);
  CHECK(m.fatal->kind == "io");
  CHECK(m.fatal->message.find(path) != std::string::npos);
}

TEST_CASE("prices and URLs") {
  std::string why;
  CHECK(parse_price("1500", &why) == 150000);
  CHECK(parse_price("1500.5", &why) == 150050);
  CHECK(parse_price("0", &why) == 0);
  for (auto bad :
       {"1 500 руб.", "-100", "бесплатно", "12,5", "", "1.", "1.234", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_price(bad, &why).has_value());
    CHECK_FALSE(why.empty());
  }
  CHECK(is_absolute_http_url("https://a.example/x.jpg"));
  CHECK(is_absolute_http_url("HTTP://a.example"));
  CHECK_FALSE(is_absolute_http_url("ftp://a.example/x"));
  CHECK_FALSE(is_absolute_http_url("//a.example/x"));
  CHECK_FALSE(is_absolute_http_url("https:///x"));
  CHECK_FALSE(is_absolute_http_url("https://a b/x"));
}

TEST_CASE("parsed feeds: JSON Lines of ParsedOffer, values checked per offer") {
  auto r =
    read("\xEF\xBB\xBF{\"id\": \"p1\", \"category\": [\"Квартиры\"], \"title\": \"t\", "
         "\"price\": \"1500.5\", \"address\": \"Москва\", \"photos\": [\"https://x.org/1.jpg\"], "
         "\"attributes\": {\"Этаж\": \"3\"}, \"unknownField\": 1}\n"
         "\n"
         "{\"id\": \"p2\", \"category\": [\"Квартиры\"], \"price\": \"12,5\", \"lat\": 55.7, "
         "\"lon\": 37.6, \"active\": false, \"photos\": [\"/rel.jpg\"]}\n");
  REQUIRE(r.summary.ok());
  CHECK(r.summary.format == feed_format::parsed);
  REQUIRE(r.ads.size() == 2);
  CHECK(r.ads[0].external_id == "p1");
  CHECK(r.ads[0].price_minor == 150050);
  CHECK(r.ads[0].photos.size() == 1);
  CHECK(attr(r.ads[0], "Этаж") == "3");
  CHECK(r.ads[0].line == 1);
  CHECK(r.ads[1].line == 3);
  CHECK_FALSE(r.ads[1].active);
  CHECK(r.ads[1].lat == doctest::Approx(55.7));
  CHECK(has_problem(r.ads[1], "price", "12,5"));
  CHECK(has_problem(r.ads[1], "photos", "/rel.jpg"));

  auto bad = read("{\"id\": \"p1\"}\n{\"id\": 5, broken\n");
  REQUIRE(bad.summary.fatal);
  CHECK(bad.summary.fatal->kind == "malformed");
  CHECK(bad.summary.fatal->line == 2);

  reader_limits few;
  few.max_offers = 1;
  auto many = read("{\"id\": \"a\"}\n{\"id\": \"b\"}\n", few);
  REQUIRE(many.summary.fatal);
  CHECK(many.summary.fatal->message.find("feed.max_offers") != std::string::npos);
  reader_limits small;
  small.max_file_bytes = 1024;
  std::string big;
  for (int i = 0; i < 100; ++i)
    big += "{\"id\": \"" + std::to_string(i) + "\"}\n";
  auto huge = read(big, small);
  REQUIRE(huge.summary.fatal);
  CHECK(huge.summary.fatal->message.find("feed.max_file_bytes") != std::string::npos);
}

TEST_CASE("no file a document names is ever opened (watched with inotify)") {
  auto dir = std::string("/tmp/gost-feed-watch-") + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  auto secret = dir + "/secret.txt", dtd = dir + "/ads.dtd";
  std::ofstream(secret) << "TOP-SECRET";
  std::ofstream(dtd) << "<!ENTITY x \"from the dtd\">";
  int fd = inotify_init1(IN_NONBLOCK);
  REQUIRE(fd >= 0);
  REQUIRE(inotify_add_watch(fd, secret.c_str(), IN_OPEN | IN_ACCESS) >= 0);
  REQUIRE(inotify_add_watch(fd, dtd.c_str(), IN_OPEN | IN_ACCESS) >= 0);
  // The watch works: opening the file ourselves is seen.
  { std::ifstream probe(secret); }
  char buf[4096];
  CHECK(::read(fd, buf, sizeof buf) > 0);

  auto xxe = "<!DOCTYPE Ads [<!ENTITY x SYSTEM \"file://" + secret
             + "\">]>\n<Ads><Ad><Id>1</Id><Title>&x;</Title></Ad></Ads>";
  auto r1 = read(xxe);
  REQUIRE(r1.summary.fatal);
  CHECK(r1.summary.fatal->kind == "hostile");
  auto only_dtd = "<!DOCTYPE Ads SYSTEM \"" + dtd
                  + "\">\n<Ads><Ad><Id>1</Id><Category>Квартиры</Category><Title>t</Title></Ad>"
                    "</Ads>";
  auto r2 = read(only_dtd);
  CHECK(r2.summary.ok());
  auto pe = "<!DOCTYPE Ads [<!ENTITY % p SYSTEM \"" + dtd + "\"> %p;]><Ads/>";
  auto r3 = read(pe);
  REQUIRE(r3.summary.fatal);
  CHECK(r3.summary.fatal->kind == "hostile");
  CHECK(::read(fd, buf, sizeof buf) < 0); // nothing opened or read them since the probe
  ::close(fd);
  std::filesystem::remove_all(dir);
}
