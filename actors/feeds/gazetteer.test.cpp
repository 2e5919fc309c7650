// Unit tests of the gazetteer: the built-in places, geocoding addresses as sellers write them
// (prefixes, streets, synonyms, typos, same-named cities), nearest(), and parse errors.
#include "gost/feeds/gazetteer.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace gost::feeds;

namespace {

const gazetteer& gaz() {
  return gazetteer::builtin();
}

// "city / region" or "region" for a region-level match, "!" + error otherwise.
std::string where(std::string_view address) {
  auto r = gaz().locate(address);
  if (!r)
    return "!" + r.error;
  return r.precision == geo_precision::city ? r.city + " / " + r.region : r.region;
}

} // namespace

TEST_CASE("the built-in gazetteer: every federal subject, 300+ cities, stable unique ids") {
  size_t regions = 0, cities = 0;
  std::set<int64_t> ids;
  for (const place* p : gaz().places()) {
    CHECK(ids.insert(p->geo_id).second);
    if (p->region) {
      ++regions;
      CHECK(p->region_geo_id == p->geo_id);
    } else {
      ++cities;
      const place* reg = gaz().by_id(p->region_geo_id);
      REQUIRE(reg);
      CHECK(reg->region);
      CHECK(p->geo_id / 1000 == p->region_geo_id);
    }
    CHECK(p->lat > 41); // Russia spans 41°N (Dagestan) to 82°N
    CHECK(((p->lon > 19 && p->lon <= 180) || p->lon < -168));
    CHECK(p->population > 0);
  }
  CHECK(regions == 85);
  CHECK(cities >= 300);
  CHECK(gaz().by_id(77001)->name == "Москва");
  CHECK(gaz().by_id(77)->region);
  CHECK(gaz().by_id(78001)->name == "Санкт-Петербург");
  CHECK(gaz().by_id(123456789) == nullptr);
}

TEST_CASE("locate: addresses as sellers write them") {
  CHECK(where("г. Москва, ул. Тверская, д. 1") == "Москва / Москва");
  CHECK(where("Московская обл., г. Химки, ул. Ленина 5") == "Химки / Московская область");
  CHECK(where("Санкт-Петербург, Невский пр-т 10") == "Санкт-Петербург / Санкт-Петербург");
  CHECK(where("Екатеринбург") == "Екатеринбург / Свердловская область");
  CHECK(where("Респ. Татарстан, Казань") == "Казань / Республика Татарстан");
  CHECK(where("Нижний Новгород, ул. Б. Покровская") == "Нижний Новгород / Нижегородская область");
  CHECK(where("Новосибирская область, Бердск") == "Бердск / Новосибирская область");
  CHECK(where("Красноярск ул Мира 1") == "Красноярск / Красноярский край");
  CHECK(where("Москва, Ленинградское ш., 16") == "Москва / Москва");
  CHECK(where("Россия, 420000, Казань, ул. Баумана, 1") == "Казань / Республика Татарстан");
  CHECK(where("Тверская ул., 5, Москва") == "Москва / Москва"); // a street named after a region
  CHECK(where("Наб. Челны, пр. Мира 3") == "Набережные Челны / Республика Татарстан");
  CHECK(where("Московская область, Одинцовский р-н, Одинцово") == "Одинцово / Московская область");
  CHECK(where("Москва, Зеленоград, корп. 1106") == "Зеленоград / Москва");
  CHECK(where("МОСКОВСКАЯ ОБЛАСТЬ, ГОРОД КОРОЛЁВ") == "Королёв / Московская область");
  CHECK(where("Королев") == "Королёв / Московская область");
  for (const char* a : {"Балашиха", "Подольск", "Мытищи", "Люберцы"})
    CHECK(gaz().locate(a).region_geo_id == 50);

  auto r = gaz().locate("г. Москва, ул. Тверская, д. 1");
  CHECK(r.geo_id == 77001);
  CHECK(r.region_geo_id == 77);
  CHECK(r.precision == geo_precision::city);
  CHECK_FALSE(r.typo);
  CHECK(r.lat == doctest::Approx(55.756).epsilon(0.001));
  CHECK(r.lon == doctest::Approx(37.617).epsilon(0.001));
}

TEST_CASE("locate: synonyms") {
  for (const char* a :
       {"Санкт-Петербург", "СПб", "Питер", "Петербург", "St. Petersburg", "г. СПб", "С.-Петербург"})
    CHECK(gaz().locate(a).geo_id == 78001);
  for (const char* a : {"Москва", "Moscow", "Мск", "город Москва"})
    CHECK(gaz().locate(a).geo_id == 77001);
  for (const char* a : {"Нижний Новгород", "Н. Новгород", "Нижний", "Н.Новгород"})
    CHECK(gaz().locate(a).geo_id == 52001);
  for (const char* a : {"Ростов-на-Дону", "Ростов на Дону", "ростов-на-дону"})
    CHECK(gaz().locate(a).geo_id == 61001);
  for (const char* a : {"Екатеринбург", "Екб", "г Екатеринбург"})
    CHECK(gaz().locate(a).geo_id == 66001);
  CHECK(where("Великий Новгород") == "Великий Новгород / Новгородская область");
  CHECK(where("Новгород") == "Великий Новгород / Новгородская область");
}

TEST_CASE("locate: typo tolerance by name length") {
  auto r = gaz().locate("Новосибирк");
  CHECK(r.geo_id == 54001);
  CHECK(r.typo);
  CHECK(where("Екатеринбур") == "Екатеринбург / Свердловская область");
  CHECK(where("Росотв-на-Дону") == "Ростов-на-Дону / Ростовская область"); // transposition
  CHECK(where("г. Екатеренбурк, ул. Ленина 1")
        == "Екатеринбург / Свердловская область");         // 2 edits, 12 letters
  CHECK(where("Самарра") == "Самара / Самарская область"); // 6 letters: one edit
  CHECK(where("Саммарра")[0] == '!');                      // 6 letters: not two
  CHECK(where("Пермь") == "Пермь / Пермский край");
  CHECK(where("Перм") == "Пермь / Пермский край"); // the name has 5 letters: one edit
  CHECK(where("Уфв")[0] == '!');                   // short names: never
  CHECK(where("Омк")[0] == '!');
  CHECK(where("Тула") == "Тула / Тульская область");
  CHECK(where("Тулаа")[0] == '!'); // Тула has 4 letters
  CHECK_FALSE(gaz().locate("Казань").typo);
  // A typo'd city outside an exactly named region is not taken.
  auto reg = gaz().locate("Свердловская обл., Новосибирк");
  CHECK(reg.precision == geo_precision::region);
  CHECK(reg.geo_id == 66);
}

TEST_CASE("locate: same-named cities, settled by the region, else by population") {
  CHECK(where("Мурманская обл., г. Кировск") == "Кировск / Мурманская область");
  CHECK(where("Ленинградская область, Кировск") == "Кировск / Ленинградская область");
  CHECK(where("Кировск") == "Кировск / Ленинградская область"); // the larger one
  CHECK(where("Красноярский край, Железногорск") == "Железногорск / Красноярский край");
  CHECK(where("Курская обл, Железногорск") == "Железногорск / Курская область");
  CHECK(where("Железногорск") == "Железногорск / Курская область");
  CHECK(where("Ярославская обл., Ростов") == "Ростов / Ярославская область");
  CHECK(where("Ростов") == "Ростов-на-Дону / Ростовская область");
  CHECK(where("Кемеровская область, Берёзовский") == "Берёзовский / Кемеровская область — Кузбасс");
  CHECK(where("Свердловская обл, Березовский") == "Берёзовский / Свердловская область");
}

TEST_CASE("locate: a region alone gives a region-level match; nothing gives an error") {
  auto r = gaz().locate("Свердловская обл., пос. Неизвестный, ул. Мира 1");
  REQUIRE(r);
  CHECK(r.precision == geo_precision::region);
  CHECK(r.geo_id == 66);
  CHECK(r.region_geo_id == 66);
  CHECK(r.region == "Свердловская область");
  CHECK(r.city.empty());
  CHECK(where("Респ. Саха (Якутия), с. Майя") == "Республика Саха (Якутия)");
  CHECK(where("Ханты-Мансийский АО") == "Ханты-Мансийский автономный округ — Югра");
  CHECK(where("ХМАО-Югра, Сургут") == "Сургут / Ханты-Мансийский автономный округ — Югра");
  CHECK(where("Краснодарский край") == "Краснодарский край");

  auto e = gaz().locate("деревня Гадюкино, ул. Ленина");
  CHECK_FALSE(e);
  CHECK(e.error.find("no city or region recognised") != std::string::npos);
  CHECK(e.error.find("Гадюкино") != std::string::npos);
  CHECK_FALSE(gaz().locate(""));
  CHECK_FALSE(gaz().locate(" , ,, "));
}

TEST_CASE("locate: invalid UTF-8 and junk never crash") {
  for (std::string a :
       {std::string("\xFF\xFE\xC3"), std::string("Моск\xD0"), std::string("\xD0\x9C\xD0"),
        std::string(5000, ','), std::string(3000, '\xD0'), std::string("a\0b", 3)}) {
    auto r = gaz().locate(a);
    CHECK((r || r.error.size() < 400));
  }
  CHECK(where("Москва\xFF, ул. Ленина") == "Москва / Москва");
}

TEST_CASE("nearest: within the radius or an error") {
  auto m = gaz().nearest(55.7512, 37.6184); // the Kremlin
  REQUIRE(m);
  CHECK(m.geo_id == 77001);
  CHECK(m.distance_km < 2);
  auto b = gaz().nearest(55.80, 37.93); // Balashikha, closer to it than to Moscow's centre
  CHECK(b.city == "Балашиха");
  auto sea = gaz().nearest(43.0, 34.0); // the middle of the Black Sea
  CHECK_FALSE(sea);
  CHECK(sea.error.find("no city within 50 km") != std::string::npos);
  CHECK(gaz().nearest(43.0, 34.0, 500)); // a wider radius reaches the coast
  CHECK_FALSE(gaz().nearest(0, -150));   // the Pacific
  CHECK_FALSE(gaz().nearest(91, 0));
  CHECK_FALSE(gaz().nearest(55, 200));
}

TEST_CASE("parse: errors name the line") {
  auto err = [](std::string_view tsv) {
    auto r = gazetteer::parse(tsv);
    CHECK_FALSE(r);
    return r.error;
  };
  const std::string reg = "region\t1\t1\tR\t\t50\t30\t1000\n";
  auto ok = gazetteer::parse("# comment\n" + reg
                             + "city\t1001\t1\tTown\tT-town|Тауни\t50.1\t30.1\t500\r\n");
  REQUIRE(ok);
  CHECK(ok.value->locate("Тауни").geo_id == 1001);
  CHECK(ok.value->locate("R").precision == geo_precision::region);

  CHECK(err(reg + reg) == "gazetteer.tsv:2: duplicate geo_id 1");
  CHECK(err(reg + "\ncity\t2001\t2\tX\t\t50\t30\t1\n")
        == "gazetteer.tsv:3: unknown region 2 (a region comes before its cities)");
  CHECK(err("region\t1\t2\tR\t\t50\t30\t1\n")
        == "gazetteer.tsv:1: a region's region_geo_id must be its own geo_id");
  CHECK(err(reg + "town\t1001\t1\tX\t\t50\t30\t1\n").rfind("gazetteer.tsv:2: unknown kind", 0)
        == 0);
  CHECK(err(reg + "city\t1001\t1\tX\t\t95\t30\t1\n") == "gazetteer.tsv:2: bad latitude \"95\"");
  CHECK(err(reg + "city\t1001\t1\tX\t\t50\teast\t1\n")
        == "gazetteer.tsv:2: bad longitude \"east\"");
  CHECK(err(reg + "city\t1001\t1\tX\t\t50\t30\t-1\n") == "gazetteer.tsv:2: bad population \"-1\"");
  CHECK(err(reg + "city\t1001\t1\tX\t\t50\t30\n").rfind("gazetteer.tsv:2: expected 8", 0) == 0);
  CHECK(err(reg + "city\tx\t1\tX\t\t50\t30\t1\n") == "gazetteer.tsv:2: bad geo_id \"x\"");
  CHECK(err(reg + "city\t1001\t1\tX\ta||b\t50\t30\t1\n")
        == "gazetteer.tsv:2: empty synonym in \"a||b\"");
  CHECK(err(reg + "city\t1001\t1\t\xFF\t\t50\t30\t1\n") == "gazetteer.tsv:2: invalid UTF-8");
}

TEST_CASE("the same address answers the same, many times over (the typo fallback included)") {
  // Speed is the feed benchmark's (bench/run.sh feed), not a test's: here only that repeated
  // lookups, a fifth through the typo fallback, answer alike.
  const char* addresses[] = {
    "г. Москва, ул. Тверская, д. 1", "Московская обл., г. Химки, ул. Ленина 5",
    "Санкт-Петербург, Невский пр-т 10", "Новосибирк", "Респ. Татарстан, Казань"};
  int64_t first[5] = {};
  for (int i = 0; i < 5; ++i) {
    auto r = gaz().locate(addresses[i]);
    REQUIRE(r);
    first[i] = r.geo_id;
  }
  size_t same = 0;
  for (int i = 0; i < 20000; ++i)
    same += gaz().locate(addresses[i % 5]).geo_id == first[i % 5];
  CHECK(same == 20000);
}
