// Unit tests of the category catalog: the built-in data (categories, attributes, their
// synonyms), path matching and ambiguity, attribute values, and parse errors of broken TSV.
#include "gost/feeds/catalog.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace gost::feeds;

namespace {

const catalog& cat() {
  return catalog::builtin();
}

std::string find_id(std::vector<std::string> levels) {
  const category* c = cat().find(levels);
  return c ? c->id : "(null)";
}

attribute_result resolve(const char* category_id, std::string_view name, std::string_view value) {
  const category* c = cat().by_id(category_id);
  REQUIRE(c);
  return cat().resolve(*c, name, value);
}

std::string error_of(std::string_view categories, std::string_view attributes) {
  auto r = catalog::parse(categories, attributes);
  CHECK_FALSE(r);
  return r.error;
}

const char* tiny_categories = "# id\tparent\tname\tsynonyms\n"
                              "a\t\tA\tAlpha\n"
                              "a.b\ta\tB\tBeta|Shared\n"
                              "c\t\tC\n"
                              "c.d\tc\tD\tShared\n";

} // namespace

TEST_CASE("the built-in catalog loads a few hundred categories in a tree") {
  const auto& all = cat().categories();
  CHECK(all.size() >= 250);
  std::set<std::string> tops;
  for (const category* c : all) {
    if (!c->parent)
      tops.insert(c->name);
    if (c->parent)
      CHECK(c->path == c->parent->path + " / " + c->name);
    CHECK(cat().by_id(c->id) == c);
  }
  for (const char* t :
       {"Транспорт", "Недвижимость", "Работа", "Услуги", "Личные вещи", "Для дома и дачи",
        "Электроника", "Хобби и отдых", "Животные", "Готовый бизнес и оборудование"})
    CHECK(tops.count(t) == 1);
  const category* cars = cat().by_id("transport.cars");
  REQUIRE(cars);
  CHECK(cars->name == "Автомобили");
  CHECK(cars->path == "Транспорт / Автомобили");
  CHECK(cars->parent == cat().by_id("transport"));
  CHECK(cars->within(*cat().by_id("transport")));
  CHECK_FALSE(cat().by_id("transport")->within(*cars));
  CHECK(cat().by_id("no.such") == nullptr);
}

TEST_CASE("find: Avito Autoload categories") {
  CHECK(find_id({"Автомобили"}) == "transport.cars");
  CHECK(find_id({"Транспорт", "Автомобили"}) == "transport.cars");
  CHECK(find_id({"Квартиры"}) == "realty.flats");
  CHECK(find_id({"Одежда, обувь, аксессуары"}) == "personal.clothes");
  CHECK(find_id({"Одежда, обувь, аксессуары", "Мужская одежда"}) == "personal.clothes.men");
  CHECK(find_id({"Личные вещи", "Одежда, обувь, аксессуары", "Женская одежда", "Платья"})
        == "personal.clothes.women.dresses");
  CHECK(find_id({"Телефоны"}) == "electronics.phones");
  CHECK(find_id({"Мебель и интерьер"}) == "home.furniture");
  CHECK(find_id({"Дома, дачи, коттеджи"}) == "realty.houses");
  CHECK(find_id({"Гаражи и машиноместа"}) == "realty.garages");
  CHECK(find_id({"Грузовики и спецтехника"}) == "transport.trucks");
  CHECK(find_id({"Мотоциклы и мототехника"}) == "transport.moto");
  CHECK(find_id({"Запчасти и аксессуары"}) == "transport.parts");
  CHECK(find_id({"Собаки"}) == "animals.dogs");
  CHECK(find_id({"Вакансии"}) == "job.vacancies");
  CHECK(find_id({"Резюме"}) == "job.resumes");
  CHECK(find_id({"Готовый бизнес"}) == "business.ready");
  CHECK(find_id({"Ноутбуки"}) == "electronics.laptops");
  CHECK(find_id({"Велосипеды"}) == "hobby.bikes");
  CHECK(find_id({"Спорт"}) == "hobby.sport");
  CHECK(find_id({"Билеты и путешествия", "Спорт"}) == "hobby.tickets.sport");
}

TEST_CASE("find: YML shop categories, folded, single or as a path") {
  CHECK(find_id({"Смартфоны"}) == "electronics.phones.mobile");
  CHECK(find_id({"Электроника", "Смартфоны"}) == "electronics.phones.mobile");
  CHECK(find_id({"Сотовые телефоны"}) == "electronics.phones.mobile");
  CHECK(find_id({"Ноутбуки и компьютеры"}) == "electronics.laptops");
  CHECK(find_id({"Холодильники"}) == "home.appliances.kitchen.fridges");
  CHECK(find_id({"Бытовая техника", "Стиральные машины"}) == "home.appliances.home.washers");
  CHECK(find_id({"Кроссовки"}) == "personal.clothes.shoes.sneakers");
  CHECK(find_id({"Платья"}) == "personal.clothes.women.dresses");
  // Folding: case, ё, punctuation and spaces do not matter.
  CHECK(find_id({"  СМАРТФОНЫ "}) == "electronics.phones.mobile");
  CHECK(find_id({"одежда обувь аксессуары"}) == "personal.clothes");
  CHECK(find_id({"Телевизоры и проекторы"}) == "electronics.audio_video.tv");
  CHECK(find_id({"Лёгкий коммерческий транспорт"}) == find_id({"Легкий коммерческий транспорт"}));
}

TEST_CASE("find: the deepest recognised level wins; unknown and off-path levels are skipped") {
  // An unrecognised extra level below a recognised one keeps the recognised one.
  CHECK(find_id({"Транспорт", "Автомобили", "Toyota Camry 2018"}) == "transport.cars");
  // An unrecognised root (a shop's own name) is skipped.
  CHECK(find_id({"Магазин Вася", "Все товары", "Смартфоны"}) == "electronics.phones.mobile");
  // A recognised level that does not descend from the earlier one is ignored.
  CHECK(find_id({"Электроника", "Платья"}) == "electronics");
  CHECK(find_id({"Мужская одежда", "Кроссовки"}) == "personal.clothes.men");
  // Nothing recognised.
  CHECK(cat().find({}) == nullptr);
  CHECK(cat().find({"Совершенно неизвестное"}) == nullptr);
  CHECK(cat().find({"", "  "}) == nullptr);
  CHECK(cat().find({"\xFF\xFE"}) == nullptr);
}

TEST_CASE("find: ambiguous names are settled by earlier levels, then by file order") {
  // "Продажа" exists under flats, rooms, houses, land and garages.
  CHECK(find_id({"Недвижимость", "Квартиры", "Продажа"}) == "realty.flats.sale");
  CHECK(find_id({"Комнаты", "Продажа"}) == "realty.rooms.sale");
  CHECK(find_id({"Гаражи и машиноместа", "Аренда"}) == "realty.garages.rent");
  CHECK(find_id({"Продажа"}) == "realty.flats.sale"); // first in file order
  // "Обувь" is unisex, women's, men's and children's.
  CHECK(find_id({"Обувь"}) == "personal.clothes.shoes");
  CHECK(find_id({"Женская одежда", "Обувь"}) == "personal.clothes.women.shoes");
  CHECK(find_id({"Мужская одежда", "Обувь"}) == "personal.clothes.men.shoes");
  CHECK(find_id({"Детская одежда и обувь", "Обувь"}) == "personal.kids.shoes");
  // "Аксессуары" is everywhere.
  CHECK(find_id({"Аксессуары"}) == "transport.parts.accessories");
  CHECK(find_id({"Телефоны", "Аксессуары"}) == "electronics.phones.accessories");
  CHECK(find_id({"Одежда, обувь, аксессуары", "Аксессуары"}) == "personal.clothes.accessories");
  CHECK(find_id({"Музыкальные инструменты", "Аксессуары"}) == "hobby.music.accessories");
  // A later level can settle an ambiguous earlier one: the longer chain wins.
  CHECK(find_id({"Аксессуары", "Зарядные устройства"})
        == "electronics.phones.accessories.chargers");
  CHECK(find_id({"Верхняя одежда"}) == "personal.clothes.women.outerwear");
  CHECK(find_id({"Мужская одежда", "Верхняя одежда"}) == "personal.clothes.men.outerwear");
}

TEST_CASE("resolve: colour and condition, on every category") {
  auto r = resolve("electronics.phones.mobile", "Цвет", "черный");
  CHECK(r);
  CHECK(r.id == "color");
  CHECK(r.value == "Чёрный");
  CHECK(resolve("electronics.phones.mobile", "Цвет товара", "ЧЁРНЫЙ").value == "Чёрный");
  CHECK(resolve("home.furniture.sofas", "цвет", " белый ").value == "Белый");
  CHECK(resolve("personal.clothes.women.dresses", "Color", "red").value == "Красный");
  CHECK(resolve("transport.cars", "Цвет", "красный").value == "Красный");
  for (const char* v : {"Новое", "новый", "new"}) {
    auto c = resolve("personal.clothes.men.jeans", "Состояние", v);
    CHECK(c.id == "condition");
    CHECK(c.value == "Новое");
  }
  for (const char* v : {"Б/у", "б/у", "бу", "бывший в употреблении", "Бывшее в употреблении"}) {
    CAPTURE(v);
    CHECK(resolve("personal.clothes.men.jeans", "Состояние", v).value == "Б/у");
  }
}

TEST_CASE("resolve: car attributes") {
  const char* cars = "transport.cars";
  for (const char* v : {"Механика", "МКПП", "механическая"})
    CHECK(resolve(cars, "Коробка передач", v).value == "Механика");
  for (const char* v : {"Автомат", "АКПП", "автоматическая"})
    CHECK(resolve(cars, "КПП", v).value == "Автомат");
  CHECK(resolve(cars, "Коробка передач", "Робот").value == "Робот");
  CHECK(resolve(cars, "Трансмиссия", "CVT").value == "Вариатор");
  CHECK(resolve(cars, "Коробка передач", "Вариатор").id == "transmission");
  CHECK(resolve(cars, "Марка", "Toyota").value == "Toyota");
  CHECK(resolve(cars, "марка", "тойота").value == "Toyota");
  CHECK(resolve(cars, "Марка", "Лада").value == "LADA (ВАЗ)");
  CHECK(resolve(cars, "Производитель", "Mercedes").id == "make"); // nearer definition wins
  CHECK(resolve(cars, "Модель", "Camry").value == "Camry");
  CHECK(resolve(cars, "Модель", "  Land Cruiser  Prado ").value == "Land Cruiser  Prado");
  CHECK(resolve(cars, "Год выпуска", "2015").value == "2015");
  CHECK(resolve(cars, "Пробег", "150000").value == "150000");
  CHECK(resolve(cars, "Пробег", "150 000 км").value == "150000");
  CHECK(resolve(cars, "Пробег",
                "150\xC2\xA0"
                "000")
          .value
        == "150000");
  CHECK(resolve(cars, "Тип кузова", "хэтчбек").value == "Хетчбэк");
  CHECK(resolve(cars, "Тип кузова", "Кроссовер").value == "Внедорожник");
  for (auto [v, want] : {std::pair{"Бензин", "Бензин"},
                         {"дизель", "Дизель"},
                         {"Гибрид", "Гибрид"},
                         {"электро", "Электро"},
                         {"ГАЗ", "Газ"}})
    CHECK(resolve(cars, "Тип двигателя", v).value == want);
  CHECK(resolve(cars, "Привод", "4WD").value == "Полный");
  CHECK(resolve(cars, "Объём двигателя", "1,6").value == "1.6");
  CHECK(resolve(cars, "Объем двигателя", "2.0 л").value == "2");
  CHECK(resolve(cars, "VIN", "XTA21099012345678").value == "XTA21099012345678");
  // Inherited from transport by every vehicle.
  CHECK(resolve("transport.moto.motorcycles", "Пробег", "12 500").value == "12500");
}

TEST_CASE("resolve: flats, clothes and phones") {
  const char* flats = "realty.flats.sale";
  CHECK(resolve(flats, "Количество комнат", "Студия").value == "Студия");
  CHECK(resolve(flats, "Количество комнат", "1").value == "1");
  CHECK(resolve(flats, "Кол-во комнат", "2-комнатная").value == "2");
  CHECK(resolve(flats, "Количество комнат", "9").value == "9");
  CHECK(resolve(flats, "Количество комнат", "10 и более").value == "10 и более");
  CHECK(resolve(flats, "Количество комнат", "Свободная планировка").value
        == "Свободная планировка");
  CHECK(resolve(flats, "Площадь", "54,3").value == "54.3");
  CHECK(resolve(flats, "Площадь", "54.30 м²").value == "54.3");
  CHECK(resolve(flats, "Общая площадь", "120 кв. м").value == "120");
  CHECK(resolve(flats, "Площадь", "1 250,50 м2").value == "1250.5");
  CHECK(resolve(flats, "Этаж", "5").value == "5");
  CHECK(resolve(flats, "Этажей в доме", "17").value == "17");
  CHECK(resolve(flats, "Этажность", "09").value == "9");
  CHECK(resolve(flats, "Тип дома", "кирпич").value == "Кирпичный");
  CHECK(resolve(flats, "Тип дома", "Панельный").id == "house_type");

  CHECK(resolve("personal.clothes.women.dresses", "Размер", "M").value == "M");
  CHECK(resolve("personal.clothes.women.dresses", "Размер", "46").value == "46");
  CHECK(resolve("personal.clothes.women.dresses", "Размер", "XXXL").value == "3XL");
  CHECK(resolve("personal.clothes.shoes.sneakers", "Размер", "42,5").value
        == "42.5"); // shoes: a number
  CHECK(resolve("personal.clothes.men.shoes", "Размер", "43").value == "43");

  const char* phones = "electronics.phones.mobile";
  for (const char* n : {"Производитель", "Бренд", "vendor"}) {
    auto r = resolve(phones, n, "Samsung");
    CHECK(r.id == "brand");
    CHECK(r.value == "Samsung");
  }
  CHECK(resolve(phones, "vendor", "эппл").value == "Apple");
  CHECK(resolve(phones, "Объём памяти", "128 ГБ").value == "128 ГБ");
  CHECK(resolve(phones, "Объем памяти", "128GB").value == "128 ГБ");
  CHECK(resolve(phones, "Встроенная память", "1 ТБ").value == "1 ТБ");
  // Brand elsewhere is free text.
  auto b = resolve("personal.clothes.men.jeans", "Бренд", "Levi's");
  CHECK(b.id == "brand");
  CHECK(b.value == "Levi's");
  CHECK(b.attr->type == attribute_type::text);
}

TEST_CASE("resolve: errors name the attribute, the value and what is allowed") {
  auto r = resolve("transport.cars", "Коробка передач", "ручка");
  CHECK(r.error == attribute_error::bad_value);
  CHECK_FALSE(r);
  CHECK(r.id == "transmission");
  CHECK(r.value.empty());
  CHECK(r.message.find("Коробка передач") != std::string::npos);
  CHECK(r.message.find("\"ручка\"") != std::string::npos);
  CHECK(r.message.find("Механика, Автомат, Робот, Вариатор") != std::string::npos);

  auto colors = resolve("transport.cars", "Цвет", "зеленоватый в крапинку");
  CHECK(colors.error == attribute_error::bad_value);
  CHECK(colors.message.find("Чёрный, Белый, Серый, Серебристый, Красный and ")
        != std::string::npos);

  auto year = resolve("transport.cars", "Год выпуска", "1850");
  CHECK(year.error == attribute_error::bad_value);
  CHECK(year.message.find("out of range 1900..2030") != std::string::npos);
  CHECK(resolve("transport.cars", "Год выпуска", "2031").error == attribute_error::bad_value);
  CHECK(resolve("transport.cars", "Год выпуска", "две тысячи").error == attribute_error::bad_value);
  CHECK(resolve("transport.cars", "Пробег", "150000 миль").message.find("км") != std::string::npos);
  CHECK(resolve("transport.cars", "Пробег", "-5").error == attribute_error::bad_value);
  CHECK(resolve("transport.cars", "Пробег", "1e5").error == attribute_error::bad_value);
  CHECK(resolve("transport.cars", "Пробег", "12.5.3").error == attribute_error::bad_value);
  CHECK(resolve("transport.cars", "Пробег", "1 50").error == attribute_error::bad_value);
  CHECK(resolve("transport.cars", "Пробег", "").error == attribute_error::bad_value);
  CHECK(resolve("transport.cars", "Пробег", "99999999999999999999999999999999").error
        == attribute_error::bad_value);

  auto vin = resolve("transport.cars", "VIN", "XTA210990123456789999");
  CHECK(vin.error == attribute_error::bad_value);
  CHECK(vin.message.find("at most 17") != std::string::npos);

  auto unknown = resolve("transport.cars", "Количество комнат", "2"); // a flat's attribute
  CHECK(unknown.error == attribute_error::unknown_attribute);
  CHECK(unknown.message.find("Количество комнат") != std::string::npos);
  CHECK(unknown.message.find("Транспорт / Автомобили") != std::string::npos);
  CHECK(resolve("electronics.laptops", "Коробка передач", "АКПП").error
        == attribute_error::unknown_attribute);
  CHECK(resolve("transport.cars", "\xFF\xFE", "x").error == attribute_error::unknown_attribute);
  CHECK(resolve("transport.cars", "Модель", "Ca\xFFmry").error == attribute_error::bad_value);
}

TEST_CASE("attributes() lists a category's attributes, nearest definitions first, one per id") {
  auto list = cat().attributes(*cat().by_id("electronics.phones.mobile"));
  std::set<std::string> ids;
  for (const attribute* a : list)
    CHECK(ids.insert(a->id).second);
  CHECK(ids.count("brand"));
  CHECK(ids.count("memory"));
  CHECK(ids.count("color"));
  CHECK(ids.count("screen_size"));
  for (const attribute* a : list)
    if (a->id == "brand")
      CHECK(a->type == attribute_type::enumeration);
}

TEST_CASE("parse: a small catalog and its errors with file and line") {
  auto ok = catalog::parse(tiny_categories, "attribute\ta\tsize\tnumber\tSize\tРазмер\t0..10\tcm\n"
                                            "attribute\t*\tcolor\tenum\tColour\tЦвет\n"
                                            "value\tRed\tкрасный|red\n"
                                            "value\tBlue\n");
  REQUIRE(ok);
  const catalog& c = *ok.value;
  CHECK(c.categories().size() == 4);
  CHECK(c.find({"Shared"})->id == "a.b"); // first in file order
  CHECK(c.find({"C", "Shared"})->id == "c.d");
  CHECK(c.resolve(*c.by_id("a.b"), "размер", "5 cm").value == "5");
  CHECK(c.resolve(*c.by_id("c.d"), "размер", "5").error == attribute_error::unknown_attribute);
  CHECK(c.resolve(*c.by_id("c.d"), "Цвет", "КРАСНЫЙ").value == "Red");
  // CRLF line ends and a BOM are fine.
  CHECK(catalog::parse("\xEF\xBB\xBF"
                       "a\t\tA\r\n",
                       ""));

  CHECK(error_of("a\t\tA\na\t\tB\n", "") == "categories.tsv:2: duplicate id \"a\"");
  CHECK(error_of("a\t\tA\n\n# c\nb.c\tb\tC\n", "")
        == "categories.tsv:4: unknown parent \"b\" (a parent comes before its children)");
  CHECK(error_of("a\t\tA\nb.c\ta\tC\n", "").rfind("categories.tsv:2: id \"b.c\" must start with", 0)
        == 0);
  CHECK(error_of("A\t\tA\n", "").rfind("categories.tsv:1: bad id", 0) == 0);
  CHECK(error_of("a\t\tA\nb\t\n", "").rfind("categories.tsv:2: expected 3 or 4", 0) == 0);
  CHECK(error_of("a\t\tA\tx||y\n", "") == "categories.tsv:1: empty name or synonym in \"a\"");
  CHECK(error_of("a\t\tA\n\xFF\t\tB\n", "") == "categories.tsv:2: invalid UTF-8");

  CHECK(error_of(tiny_categories, "\nattribute\tzz\tx\ttext\tX\n")
        == "attributes.tsv:2: unknown category \"zz\"");
  CHECK(error_of(tiny_categories, "attribute\ta\tx\tbool\tX\n")
          .rfind("attributes.tsv:1: unknown type", 0)
        == 0);
  CHECK(error_of(tiny_categories, "attribute\ta\tx\ttext\tX\nattribute\ta\tx\ttext\tY\n")
        == "attributes.tsv:2: duplicate attribute \"x\" in category \"a\"");
  CHECK(error_of(tiny_categories, "attribute\ta\tx\ttext\tX\nattribute\ta\ty\ttext\tY\tx\n")
        == "attributes.tsv:2: name \"x\" is already used by attribute \"x\" of the same category");
  CHECK(error_of(tiny_categories, "attribute\ta\tc\tenum\tC\nvalue\tRed\tr\nvalue\tRose\tR\n")
        == "attributes.tsv:3: bad value list of \"c\": \"R\" already names value \"Red\"");
  CHECK(error_of(tiny_categories, "attribute\ta\tc\tenum\tC\nattribute\ta\td\ttext\tD\n")
        == "attributes.tsv:1: enum attribute \"c\" has no value rows");
  CHECK(
    error_of(tiny_categories, "attribute\ta\tc\tenum\tC\nvalue\tRed\n\nattribute\ta\te\tenum\tE\n")
    == "attributes.tsv:4: enum attribute \"e\" has no value rows");
  CHECK(error_of(tiny_categories, "value\tRed\n")
        == "attributes.tsv:1: a value row must follow an enum attribute row or its values");
  CHECK(error_of(tiny_categories, "attribute\ta\tn\tnumber\tN\t\t5..1\n")
        == "attributes.tsv:1: minimum above maximum in \"5..1\"");
  CHECK(error_of(tiny_categories, "attribute\ta\tn\tnumber\tN\t\tfive\n")
          .rfind("attributes.tsv:1: bad limits", 0)
        == 0);
  CHECK(error_of(tiny_categories, "attribute\ta\tt\ttext\tT\t\t-3\n")
          .rfind("attributes.tsv:1: bad maximum length", 0)
        == 0);
  CHECK(error_of(tiny_categories, "attr\ta\tt\ttext\tT\n")
          .rfind("attributes.tsv:1: unknown row kind", 0)
        == 0);
}

TEST_CASE("every built-in category and attribute round-trips through its own names") {
  for (const category* c : cat().categories()) {
    std::vector<std::string> levels;
    for (const category* k = c; k; k = k->parent)
      levels.insert(levels.begin(), k->name);
    CAPTURE(c->path);
    CHECK(cat().find(levels) == c);
    for (const attribute* a : cat().attributes(*c)) {
      if (a->type != attribute_type::enumeration)
        continue;
      for (const auto& v : a->values) {
        auto r = cat().resolve(*c, a->name, v);
        CHECK(r.id == a->id);
        CHECK(r.value == v);
      }
    }
  }
}

TEST_CASE("lookups repeated many times answer alike") {
  // Speed is the feed benchmark's (bench/run.sh feed), not a test's.
  const category* cars = cat().by_id("transport.cars");
  size_t ok = 0;
  for (int i = 0; i < 10000; ++i) {
    ok += cat().find({"Транспорт", "Автомобили"}) == cars;
    ok += cat().resolve(*cars, "Коробка передач", "АКПП").value == "Автомат";
    ok += cat().resolve(*cars, "Пробег", "120 000 км").value == "120000";
  }
  CHECK(ok == 30000);
}
