// `catalog.evolve` on a running gostd (issue 25 item 1): 10,000 offers in two categories that
// a new catalog version merges, each with an attribute the version renames, beside offers the
// version does not touch and a few whose rename is ambiguous. Started with the migration, the
// node stores the version, each shard sweeps its offers once at background priority, and every
// affected offer is moved exactly once (its version rises by one, never two); the untouched
// ones are not written; the ambiguous ones keep their content and get the reason in the
// stage's state. A version changed after it was stored refuses the start. Waits on the
// database's counts, never on the clock.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gost/core/shard_hash.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/v1/catalog.pb.h"
#include "gost/v1/offer.pb.h"

#include <google/protobuf/any.pb.h>

using namespace gost;
using namespace std::chrono_literals;

namespace {

constexpr uint32_t shards = 8; // testing::node_args
constexpr int merged = 10'000; // 5,000 in each of the two merged categories
constexpr int untouched = 500;
constexpr int ambiguous = 20;

const std::string migration_v2 = "# catalog version 2: kittens are cats; colour is spelt color\n"
                                 "version\t1\t2\n"
                                 "merge-categories\tpets.cats|pets.kittens\tanimals.cats\n"
                                 "rename-attribute\t*\tcolour\tcolor\n";

/// Inserts offers as a node stores them (version 1), 1,000 per statement.
void seed(const testing::temp_db& db, const std::string& prefix, int n,
          const std::function<void(int, v1::Offer&)>& fill) {
  for (int base = 0; base < n; base += 1000) {
    std::string rows;
    for (int i = base; i < std::min(n, base + 1000); ++i) {
      v1::Offer o;
      o.set_id(prefix + std::to_string(i));
      o.set_seller_id("catalog-seller");
      o.set_title("Offer " + std::to_string(i));
      o.set_status(v1::OFFER_STATUS_ACTIVE);
      o.set_version(1);
      fill(i, o);
      rows += std::string{rows.empty() ? "" : ","} + "('" + o.id() + "',"
              + std::to_string(shard_of(o.id(), shards)) + ",'catalog-seller','',NULL,1,"
              + testing::bytea_literal(o.SerializeAsString()) + ")";
    }
    db.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, external_id, version,"
              " body) VALUES "
              + rows);
  }
}

int count(const testing::temp_db& db, const std::string& sql) {
  auto s = db.scalar(sql);
  return s.empty() ? 0 : std::stoi(s);
}

/// The offers whose id starts with `prefix`, as stored.
std::vector<v1::Offer> offers_of(const testing::temp_db& db, const std::string& prefix) {
  auto hex = db.scalar("SELECT string_agg(encode(body, 'hex'), ',') FROM offers WHERE offer_id"
                       " LIKE '"
                       + prefix + "%'");
  std::vector<v1::Offer> out;
  std::stringstream in(hex);
  for (std::string one; std::getline(in, one, ',');) {
    out.emplace_back();
    REQUIRE(out.back().ParseFromString(testing::from_hex(one)));
  }
  return out;
}

struct migrations_dir {
  std::string path = testing::temp_path("gost-catalog");
  migrations_dir() {
    std::filesystem::create_directories(path);
    write("0002.tsv", migration_v2);
  }
  ~migrations_dir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path + "/" + name) << text;
  }
};

} // namespace

TEST_CASE("a new catalog version moves every affected offer once; ambiguous ones get a reason") {
  testing::temp_db db;
  std::string port_file = testing::temp_path("gostd-catalog");
  { // a first start makes the schema; it stops cleanly (its leases released)
    testing::child_process first(GOSTD_PATH, testing::node_args(db, port_file));
    testing::read_ports(first, port_file);
    first.signal(SIGTERM);
    REQUIRE(first.wait(60s) == 0);
  }
  std::filesystem::remove(port_file);

  seed(db, "m-", merged, [](int i, v1::Offer& o) {
    o.set_category(i % 2 == 0 ? "pets.cats" : "pets.kittens");
    (*o.mutable_attributes())["colour"] = i % 3 == 0 ? "black" : "grey";
    (*o.mutable_attributes())["age"] = std::to_string(i % 15);
  });
  seed(db, "u-", untouched, [](int, v1::Offer& o) {
    o.set_category("transport.cars");
    (*o.mutable_attributes())["brand"] = "Lada";
  });
  seed(db, "a-", ambiguous, [](int, v1::Offer& o) {
    o.set_category("transport.cars");
    (*o.mutable_attributes())["colour"] = "red";
    (*o.mutable_attributes())["color"] = "blue";
  });

  migrations_dir dir;
  auto started = std::chrono::steady_clock::now();
  testing::child_process node(
    GOSTD_PATH, testing::node_args(db, port_file, {"--stages.catalog.migrations=" + dir.path}));
  testing::read_ports(node, port_file);
  CHECK(db.scalar("SELECT version || ' ' || source FROM catalog_versions")
        == "2 " + dir.path + "/0002.tsv");

  // Every affected offer moved, and every shard's sweep recorded as done.
  bool moved = testing::eventually(120s, [&] {
    return count(db, "SELECT count(*) FROM offers WHERE offer_id LIKE 'm-%' AND version > 1")
             == merged
           && count(db, "SELECT count(*) FROM rescan_sweeps WHERE token = 'catalog.evolve@2'"
                        " AND done")
                == static_cast<int>(shards);
  });
  REQUIRE_MESSAGE(moved, node.output());
  // ... and the stage's queue drained (the ambiguous ones ran too).
  REQUIRE(testing::eventually(60s, [&] {
    return count(db, "SELECT count(*) FROM stage_states WHERE stage_id = 'catalog.evolve'"
                     " AND due_at_us IS NOT NULL")
             == 0
           && count(db, "SELECT count(*) FROM stage_states WHERE stage_id = 'catalog.evolve'"
                        " AND state IS NOT NULL")
                == merged + ambiguous;
  }));
  MESSAGE("moved " << merged << " offers in "
                   << std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count()
                   << " ms (node start included)");

  // None touched twice: each moved offer is at version 2 exactly; the others were not written.
  CHECK(count(db, "SELECT count(*) FROM offers WHERE offer_id LIKE 'm-%' AND version = 2")
        == merged);
  CHECK(count(db, "SELECT count(*) FROM offers WHERE offer_id NOT LIKE 'm-%' AND version <> 1")
        == 0);
  CHECK(count(db, "SELECT sum(enqueued) FROM rescan_sweeps WHERE token = 'catalog.evolve@2'")
        == merged + ambiguous);

  int checked = 0;
  for (auto& o : offers_of(db, "m-")) {
    auto i = std::stoi(o.id().substr(2));
    CHECK(o.category() == "animals.cats");
    CHECK(o.attributes().count("colour") == 0);
    CHECK(o.attributes().at("color") == (i % 3 == 0 ? "black" : "grey"));
    CHECK(o.attributes().at("age") == std::to_string(i % 15));
    CHECK(o.title() == "Offer " + std::to_string(i));
    ++checked;
  }
  CHECK(checked == merged);

  // The moved offers' position: version 2, where they came from.
  auto state_hex = db.scalar("SELECT encode(state, 'hex') FROM stage_states WHERE offer_id = 'm-1'"
                             " AND stage_id = 'catalog.evolve'");
  google::protobuf::Any any;
  REQUIRE(any.ParseFromString(testing::from_hex(state_hex)));
  v1::CatalogPosition pos;
  REQUIRE(any.UnpackTo(&pos));
  CHECK(pos.version() == 2);
  CHECK(pos.moved_from() == "pets.kittens");

  // The ambiguous ones: unchanged, with the reason in their state.
  for (auto& o : offers_of(db, "a-")) {
    CHECK(o.attributes().at("colour") == "red");
    CHECK(o.attributes().at("color") == "blue");
  }
  auto reasons = db.scalar("SELECT string_agg(DISTINCT encode(state, 'hex'), ',') FROM stage_states"
                           " WHERE offer_id LIKE 'a-%' AND stage_id = 'catalog.evolve'");
  REQUIRE(any.ParseFromString(testing::from_hex(reasons)));
  REQUIRE(any.UnpackTo(&pos));
  CHECK(pos.version() == 1);
  CHECK(pos.stuck_at() == 2);
  CHECK(pos.reason()
        == "attribute `colour` becomes `color`, but the offer has both (`red` and"
           " `blue`)");

  // A stored version never changes: the same version with other rules refuses the start.
  node.signal(SIGTERM);
  REQUIRE(node.wait(60s) >= 0);
  dir.write("0002.tsv", migration_v2 + "rename-attribute\t*\tage\tyears\n");
  std::filesystem::remove(port_file);
  testing::child_process refused(
    GOSTD_PATH, testing::node_args(db, port_file, {"--stages.catalog.migrations=" + dir.path}));
  CHECK(refused.wait(60s) != 0);
  CHECK_MESSAGE(refused.output().find("catalog version 2 is stored with other rules")
                  != std::string::npos,
                refused.output());
}
