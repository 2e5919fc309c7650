// The catalog's migration rules without a database: renames, merges, splits (decided and
// ambiguous), attribute renames and value mappings, the chain of versions, and files that
// are refused with the file, the line and what is wrong.
#include <doctest/doctest.h>

#include "gost/catalog/migration.hpp"

using namespace gost;
using catalog::migration;
using catalog::outcome;

namespace {

migration parsed(const std::string& text) {
  auto r = migration::parse(text, "m.tsv");
  REQUIRE_MESSAGE(r, r.error);
  return *r.value;
}

std::string error_of(const std::string& text) {
  auto r = migration::parse(text, "m.tsv");
  REQUIRE_FALSE(r);
  return r.error;
}

v1::Offer offer(std::string category, std::map<std::string, std::string> attrs = {}) {
  v1::Offer o;
  o.set_category(std::move(category));
  for (auto& [k, v] : attrs)
    (*o.mutable_attributes())[k] = v;
  return o;
}

std::map<std::string, std::string> attrs_of(const v1::Offer& o) {
  return {o.attributes().begin(), o.attributes().end()};
}

} // namespace

TEST_CASE("renames and merges move the category; others are unchanged") {
  auto m =
    parsed("# v1 -> v2\n"
           "version\t1\t2\n"
           "rename-category\tpets.dogs\tanimals.dogs\n"
           "merge-categories\telectronics.phones|electronics.smartphones\telectronics.mobile\n");
  CHECK(m.from() == 1);
  CHECK(m.to() == 2);
  auto a = offer("pets.dogs");
  CHECK(m.apply(a).what == outcome::moved);
  CHECK(a.category() == "animals.dogs");
  for (auto old : {"electronics.phones", "electronics.smartphones"}) {
    auto o = offer(old, {{"brand", "Acme"}});
    CHECK(m.apply(o).what == outcome::moved);
    CHECK(o.category() == "electronics.mobile");
    CHECK(attrs_of(o) == std::map<std::string, std::string>{{"brand", "Acme"}});
  }
  auto same = offer("transport.cars", {{"color", "red"}});
  CHECK(m.apply(same).what == outcome::unchanged);
  CHECK(same.category() == "transport.cars");
  // Applied again, a moved offer stays: nothing matches the new names.
  CHECK(m.apply(a).what == outcome::unchanged);
}

TEST_CASE("a split decides by an attribute's value; no match or two matches are ambiguous") {
  auto m = parsed("version\t2\t3\n"
                  "split-category\tclothes\tclothes.men\tgender=male|men\n"
                  "split-category\tclothes\tclothes.women\tgender=female\n"
                  "split-category\tclothes\tclothes.kids\tsize=xs\n");
  auto men = offer("clothes", {{"gender", "men"}});
  CHECK(m.apply(men).what == outcome::moved);
  CHECK(men.category() == "clothes.men");

  auto none = offer("clothes", {{"colour", "blue"}});
  auto r = m.apply(none);
  CHECK(r.what == outcome::ambiguous);
  CHECK(r.reason == "split of `clothes`: no rule matches gender=(none), size=(none)");
  CHECK(none.category() == "clothes"); // left as it was

  auto two = offer("clothes", {{"gender", "female"}, {"size", "xs"}});
  r = m.apply(two);
  CHECK(r.what == outcome::ambiguous);
  CHECK(r.reason
        == "split of `clothes`: rules for `clothes.women` `clothes.kids` all match "
           "gender=female, size=xs");
  CHECK(two.category() == "clothes");
}

TEST_CASE("attribute renames and value mappings, per category or everywhere") {
  auto m = parsed("version\t1\t2\n"
                  "merge-categories\ta|b\tc\n"
                  "rename-attribute\tc\tcolour\tcolor\n"
                  "rename-attribute\t*\tcolour\tshade\n"
                  "map-value\t*\tcolor\tgrey\tgray\n"
                  "map-value\tc\tsize\tXL\txl\n");
  auto in_c = offer("a", {{"colour", "grey"}, {"size", "XL"}});
  CHECK(m.apply(in_c).what == outcome::moved);
  CHECK(in_c.category() == "c"); // the category rule applies to the new category
  CHECK(attrs_of(in_c) == std::map<std::string, std::string>{{"color", "gray"}, {"size", "xl"}});

  auto elsewhere = offer("d", {{"colour", "grey"}, {"size", "XL"}});
  CHECK(m.apply(elsewhere).what == outcome::moved);
  CHECK(attrs_of(elsewhere)
        == std::map<std::string, std::string>{{"shade", "grey"}, {"size", "XL"}});

  // Only a value mapping: moved, the category stays.
  auto value_only = offer("d", {{"color", "grey"}});
  CHECK(m.apply(value_only).what == outcome::moved);
  CHECK(value_only.category() == "d");
  CHECK(value_only.attributes().at("color") == "gray");
}

TEST_CASE("a rename onto an attribute the offer has with another value is ambiguous") {
  auto m = parsed("version\t1\t2\nrename-attribute\t*\tcolour\tcolor\n");
  auto both = offer("x", {{"colour", "red"}, {"color", "blue"}});
  auto r = m.apply(both);
  CHECK(r.what == outcome::ambiguous);
  CHECK(r.reason
        == "attribute `colour` becomes `color`, but the offer has both (`red` and `blue`)");
  CHECK(attrs_of(both).size() == 2);
  // The same value twice is no conflict: one attribute remains.
  auto agree = offer("x", {{"colour", "red"}, {"color", "red"}});
  CHECK(m.apply(agree).what == outcome::moved);
  CHECK(attrs_of(agree) == std::map<std::string, std::string>{{"color", "red"}});
}

TEST_CASE("the chain applies the versions after the offer's, stopping at an ambiguous one") {
  auto v2 = parsed("version\t1\t2\nrename-category\ta\tb\n");
  auto v3 = parsed("version\t2\t3\nsplit-category\tb\tb1\tk=1\nsplit-category\tb\tb2\tk=2\n");
  auto v4 = parsed("version\t3\t4\nrename-attribute\t*\tk\tkey\n");
  CHECK(catalog::evolution::check({v2, v4})
        == "catalog versions must follow each other: after the migration to version 2 comes one "
           "from 3");
  catalog::evolution ev({v2, v3, v4});
  CHECK(ev.base() == 1);
  CHECK(ev.current() == 4);

  auto o = offer("a", {{"k", "2"}});
  auto r = ev.apply(o, ev.base());
  CHECK(r.what == outcome::moved);
  CHECK(r.version == 4);
  CHECK(o.category() == "b2");
  CHECK(attrs_of(o) == std::map<std::string, std::string>{{"key", "2"}});

  auto stuck = offer("a", {{"k", "3"}});
  r = ev.apply(stuck, 1);
  CHECK(r.what == outcome::ambiguous);
  CHECK(r.version == 2);  // fully at 2 (renamed)
  CHECK(r.stuck_at == 3); // the split could not decide
  CHECK(stuck.category() == "b");

  // From a later version, the earlier steps are not applied again.
  auto later = offer("a", {{"k", "1"}});
  r = ev.apply(later, 3);
  CHECK(r.version == 4);
  CHECK(later.category() == "a");
  CHECK(attrs_of(later) == std::map<std::string, std::string>{{"key", "1"}});

  catalog::evolution none({});
  auto untouched = offer("a");
  CHECK(none.apply(untouched, 1).what == outcome::unchanged);
  CHECK(none.current() == 1);
}

TEST_CASE("bad files are refused with the file, the line and what is wrong") {
  CHECK(error_of("") == "m.tsv: no `version<TAB>FROM<TAB>TO` line: the file says nothing");
  CHECK(error_of("rename-category\ta\tb\n")
        == "m.tsv:1: the first directive must be `version<TAB>FROM<TAB>TO`");
  CHECK(error_of("version\t1\t3\n")
        == "m.tsv:1: a migration leads to the next version: TO must be FROM + 1 (found 1 -> 3)");
  CHECK(error_of("version\tone\t2\n")
        == "m.tsv:1: version numbers are whole numbers from 1: write version<TAB>1<TAB>2");
  CHECK(error_of("version\t1\t2\n\nrename-categories\ta\tb\n")
          .rfind("m.tsv:3: unknown directive "
                 "`rename-categories`",
                 0)
        == 0);
  CHECK(error_of("version\t1\t2\nrename-category\ta b\n")
        == "m.tsv:2: rename-category takes 2 fields, found 1: write "
           "rename-category<TAB>OLD<TAB>NEW");
  CHECK(error_of("version\t1\t2\nrename-category\ta\tb\nmerge-categories\ta|c\td\n")
        == "m.tsv:3: category `a` is already moved by an earlier line");
  CHECK(error_of("version\t1\t2\nmerge-categories\ta\td\n")
        == "m.tsv:2: merge-categories needs at least two old categories separated by |");
  CHECK(error_of("version\t1\t2\nsplit-category\ta\tb\tcolor\n")
        == "m.tsv:2: the split's condition must be ATTRIBUTE=VALUE|VALUE|..., found `color`");
  CHECK(error_of("version\t1\t2\nrename-attribute\t*\tx\ty\nrename-attribute\t*\tx\tz\n")
        == "m.tsv:3: attribute `x` of `*` is already renamed to `y`");
  CHECK(error_of("version\t1\t2\nrename-category\ta\tb\nrename-category\tb\tc\n")
        == "m.tsv: category `b` is both moved away and a target; chains belong in successive "
           "versions");
  CHECK(error_of("version\t1\t2\nversion\t2\t3\n")
        == "m.tsv:2: a second `version` line: one migration per file");
}
