// The `catalog.evolve` stage without a node: what it asks to run, what a run writes (the
// moved offer and its position), and that a moved or already-recorded offer is never run
// again — the "none touched twice" of issue 25 at the level of one offer.
#include <doctest/doctest.h>

#include "gost/catalog/evolve_stage.hpp"
#include "gost/v1/catalog.pb.h"

using namespace gost;

namespace {

std::shared_ptr<catalog::evolution_source> source_of(std::vector<std::string> files) {
  std::vector<catalog::migration> steps;
  for (auto& f : files) {
    auto m = catalog::migration::parse(f, "test.tsv");
    REQUIRE_MESSAGE(m, m.error);
    steps.push_back(*m.value);
  }
  auto src = std::make_shared<catalog::evolution_source>();
  src->set(std::make_shared<catalog::evolution>(std::move(steps)));
  return src;
}

v1::Offer offer(std::string category, std::map<std::string, std::string> attrs = {}) {
  v1::Offer o;
  o.set_id("o1");
  o.set_title("kept as it is");
  o.set_category(std::move(category));
  for (auto& [k, v] : attrs)
    (*o.mutable_attributes())[k] = v;
  return o;
}

const std::string merge_and_rename = "version\t1\t2\n"
                                     "merge-categories\tpets.cats|pets.kittens\tanimals.cats\n"
                                     "rename-attribute\t*\tbreed_name\tbreed\n"
                                     "split-category\tpets.misc\tanimals.birds\tkind=bird\n"
                                     "split-category\tpets.misc\tanimals.fish\tkind=fish\n";

v1::CatalogPosition state_of(const stage_result& r) {
  v1::CatalogPosition p;
  REQUIRE(r.state);
  REQUIRE(r.state->UnpackTo(&p));
  return p;
}

} // namespace

TEST_CASE("an affected offer is moved once; the stage then skips it") {
  auto stage = catalog::make_evolve_stage(source_of({merge_and_rename}));
  CHECK(stage->interests() == std::vector<std::string>{"category", "attributes"});
  auto o = offer("pets.kittens", {{"breed_name", "siamese"}});
  REQUIRE(stage->should_process(o, nullptr).what == decision::kind::process);
  auto r = stage->process(o, nullptr);
  REQUIRE(r.offer);
  CHECK(r.offer->category() == "animals.cats");
  CHECK(r.offer->attributes().at("breed") == "siamese");
  CHECK(r.offer->attributes().count("breed_name") == 0);
  CHECK(r.offer->title() == "kept as it is");
  auto pos = state_of(r);
  CHECK(pos.version() == 2);
  CHECK(pos.stuck_at() == 0);
  CHECK(pos.moved_from() == "pets.kittens");

  // The moved offer with its new state: nothing left to do.
  google::protobuf::Any held;
  held.PackFrom(pos);
  CHECK(stage->should_process(*r.offer, &held).what == decision::kind::skip);
  // Queued twice before the first run committed: the second run sees the moved offer and
  // writes nothing.
  auto again = stage->process(*r.offer, &held);
  CHECK_FALSE(again.offer);
  CHECK_FALSE(again.state);
}

TEST_CASE("an unaffected offer is skipped and gets no state") {
  auto stage = catalog::make_evolve_stage(source_of({merge_and_rename}));
  auto o = offer("transport.cars", {{"color", "red"}});
  CHECK(stage->should_process(o, nullptr).what == decision::kind::skip);
  auto r = stage->process(o, nullptr);
  CHECK_FALSE(r.offer);
  CHECK_FALSE(r.state);
}

TEST_CASE("an ambiguous offer gets the reason, not a guess, and is retried when it changes") {
  auto stage = catalog::make_evolve_stage(source_of({merge_and_rename}));
  auto o = offer("pets.misc", {{"kind", "reptile"}});
  REQUIRE(stage->should_process(o, nullptr).what == decision::kind::process);
  auto r = stage->process(o, nullptr);
  CHECK_FALSE(r.offer); // not moved
  auto pos = state_of(r);
  CHECK(pos.version() == 1);
  CHECK(pos.stuck_at() == 2);
  CHECK(pos.reason() == "split of `pets.misc`: no rule matches kind=reptile");

  google::protobuf::Any held;
  held.PackFrom(pos);
  CHECK(stage->should_process(o, &held).what == decision::kind::skip); // recorded already

  // The seller says what it is: the split decides now, and the stuck mark goes.
  (*o.mutable_attributes())["kind"] = "fish";
  REQUIRE(stage->should_process(o, &held).what == decision::kind::process);
  auto moved = stage->process(o, &held);
  REQUIRE(moved.offer);
  CHECK(moved.offer->category() == "animals.fish");
  auto after = state_of(moved);
  CHECK(after.version() == 2);
  CHECK(after.stuck_at() == 0);
  CHECK(after.reason().empty());
}

TEST_CASE("a new version moves offers already at the previous one; no versions: nothing") {
  auto stage = catalog::make_evolve_stage(source_of(
    {merge_and_rename, "version\t2\t3\nrename-category\tanimals.cats\tanimals.felines\n"}));
  v1::CatalogPosition at2;
  at2.set_version(2);
  google::protobuf::Any held;
  held.PackFrom(at2);
  auto o = offer("animals.cats", {{"breed_name", "x"}}); // breed_name is v1's: not renamed again
  REQUIRE(stage->should_process(o, &held).what == decision::kind::process);
  auto r = stage->process(o, &held);
  REQUIRE(r.offer);
  CHECK(r.offer->category() == "animals.felines");
  CHECK(r.offer->attributes().at("breed_name") == "x");
  CHECK(state_of(r).version() == 3);

  auto unset = std::make_shared<catalog::evolution_source>();
  auto idle = catalog::make_evolve_stage(unset);
  CHECK(idle->should_process(offer("pets.cats"), nullptr).what == decision::kind::skip);
  CHECK(catalog::sweep_token(3) == "catalog.evolve@3");
}
