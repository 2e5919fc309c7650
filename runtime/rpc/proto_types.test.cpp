// Unit: a pool built from a FileDescriptorSet (as gostctl builds it from DescribeTypes) renders
// states of a type nobody here was compiled with; diffs of offers and of states.
#include <doctest/doctest.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/timestamp.pb.h>

#include "gost/v1/offer.pb.h"
#include "rpc/proto_types.hpp"

namespace pb = google::protobuf;
using gost::runtime::rpc::diff_messages;
using gost::runtime::rpc::field_change;
using gost::runtime::rpc::files_of;
using gost::runtime::rpc::to_string;
using gost::runtime::rpc::type_pool;

namespace {

/// `shop.v9.Stock { int64 count = 1; repeated string where = 2; google.protobuf.Timestamp
/// checked_at = 3; Level level = 4 }`, written by hand: no generated code knows it.
pb::FileDescriptorSet stock_files() {
  pb::FileDescriptorSet set;
  // Its dependency first, as a node sends it.
  pb::Timestamp::descriptor()->file()->CopyTo(set.add_file());
  auto* f = set.add_file();
  f->set_name("shop/v9/stock.proto");
  f->set_package("shop.v9");
  f->set_syntax("proto3");
  f->add_dependency("google/protobuf/timestamp.proto");
  auto* e = f->add_enum_type();
  e->set_name("Level");
  auto* v = e->add_value();
  v->set_name("LEVEL_UNSPECIFIED");
  v->set_number(0);
  v = e->add_value();
  v->set_name("LEVEL_LOW");
  v->set_number(1);
  auto* m = f->add_message_type();
  m->set_name("Stock");
  auto field = [&](const char* name, int n, pb::FieldDescriptorProto::Type t,
                   pb::FieldDescriptorProto::Label l = pb::FieldDescriptorProto::LABEL_OPTIONAL,
                   const char* type_name = nullptr) {
    auto* fd = m->add_field();
    fd->set_name(name);
    fd->set_json_name(name);
    fd->set_number(n);
    fd->set_type(t);
    fd->set_label(l);
    if (type_name != nullptr)
      fd->set_type_name(type_name);
  };
  field("count", 1, pb::FieldDescriptorProto::TYPE_INT64);
  field("where", 2, pb::FieldDescriptorProto::TYPE_STRING,
        pb::FieldDescriptorProto::LABEL_REPEATED);
  field("checked_at", 3, pb::FieldDescriptorProto::TYPE_MESSAGE,
        pb::FieldDescriptorProto::LABEL_OPTIONAL, ".google.protobuf.Timestamp");
  field("level", 4, pb::FieldDescriptorProto::TYPE_ENUM, pb::FieldDescriptorProto::LABEL_OPTIONAL,
        ".shop.v9.Level");
  return set;
}

/// The wire bytes of a Stock, made through the pool (the way a stage of another build would).
pb::Any stock_any(const type_pool& pool, int64_t count, std::vector<std::string> where) {
  pb::Any probe;
  probe.set_type_url("type.googleapis.com/shop.v9.Stock");
  auto m = pool.decode(probe); // an empty Stock
  REQUIRE(m);
  const auto* d = m->GetDescriptor();
  const auto* r = m->GetReflection();
  r->SetInt64(m.get(), d->FindFieldByName("count"), count);
  for (auto& w : where)
    r->AddString(m.get(), d->FindFieldByName("where"), w);
  auto* ts = r->MutableMessage(m.get(), d->FindFieldByName("checked_at"));
  ts->GetReflection()->SetInt64(ts, ts->GetDescriptor()->FindFieldByName("seconds"), 1'700'000'000);
  r->SetEnumValue(m.get(), d->FindFieldByName("level"), 1);
  pb::Any any;
  any.set_type_url(probe.type_url());
  any.set_value(m->SerializeAsString());
  return any;
}

} // namespace

TEST_CASE("a pool from a FileDescriptorSet renders a state of a type not linked in as JSON") {
  // Not in the generated pool: only the set defines it.
  REQUIRE(pb::DescriptorPool::generated_pool()->FindMessageTypeByName("shop.v9.Stock") == nullptr);
  type_pool pool{stock_files()};
  CHECK(pool.problem().empty());
  REQUIRE(pool.find("type.googleapis.com/shop.v9.Stock") != nullptr);
  auto any = stock_any(pool, 7, {"a", "b"});
  std::string json;
  REQUIRE(pool.to_json(any, json));
  CHECK(
    json
    == R"({"count":"7","where":["a","b"],"checked_at":"2023-11-14T22:13:20Z","level":"LEVEL_LOW"})");
  CHECK(pool.render(any) == json);
}

TEST_CASE("an unknown type renders as its type URL, byte count and why") {
  type_pool pool{stock_files()};
  pb::Any any;
  any.set_type_url("type.googleapis.com/other.Thing");
  any.set_value("abc");
  std::string json;
  CHECK_FALSE(pool.to_json(any, json));
  CHECK_FALSE(pool.decode(any));
  CHECK(pool.render(any)
        == "type.googleapis.com/other.Thing (3 bytes, type not published by the node)");
}

TEST_CASE("files_of holds a type's file after its dependencies, each once") {
  auto set = files_of({gost::v1::Offer::descriptor(), gost::v1::Offer::descriptor()});
  REQUIRE(set.file_size() == 2);
  CHECK(set.file(0).name() == "google/protobuf/timestamp.proto");
  CHECK(set.file(1).name() == "gost/v1/offer.proto");
  // And a pool built from it knows the type without the generated code's pool.
  type_pool pool{set};
  CHECK(pool.find("gost.v1.Offer") != nullptr);
  CHECK(pool.find("gost.v1.Offer") != gost::v1::Offer::descriptor());
}

TEST_CASE("the diff of two offers names each changed field") {
  gost::v1::Offer a;
  a.set_title("Bike");
  a.mutable_price()->set_amount_minor(100);
  a.mutable_price()->set_currency("RUB");
  a.add_photos()->set_url("p0");
  (*a.mutable_attributes())["color"] = "red";
  (*a.mutable_attributes())["size"] = "L";
  a.set_version(3);
  auto b = a;
  b.mutable_price()->set_amount_minor(150);
  b.add_photos()->set_url("p1");
  b.set_status(gost::v1::OFFER_STATUS_ACTIVE);
  (*b.mutable_attributes())["color"] = "blue";
  b.mutable_attributes()->erase("size");
  (*b.mutable_attributes())["wheels"] = "2";
  b.set_version(4);
  b.mutable_updated_at()->set_seconds(5);
  std::vector<std::string> lines;
  for (auto& c : diff_messages(a, b, {"version", "updated_at"}))
    lines.push_back(to_string(c));
  CHECK(lines
        == std::vector<std::string>{
          R"(attributes["color"]: "red" -> "blue")",
          R"(attributes["size"] removed: "L")",
          R"(attributes["wheels"] added: "2")",
          "price.amount_minor: 100 -> 150",
          R"(photos[1] added: {"url":"p1"})",
          R"(status: "OFFER_STATUS_UNSPECIFIED" -> "OFFER_STATUS_ACTIVE")",
        });
  // Without the skip list, the version and the new timestamp show too.
  auto all = diff_messages(a, b);
  CHECK(all.size() == lines.size() + 2);
  CHECK(diff_messages(a, a).empty());
  // Removed list elements and a message unset.
  auto c = a;
  c.clear_photos();
  c.clear_price();
  auto back = diff_messages(a, c);
  REQUIRE(back.size() == 2);
  CHECK(to_string(back[0]) == R"(price removed: {"amount_minor":"100","currency":"RUB"})");
  CHECK(back[0].what == field_change::kind::removed);
  CHECK(to_string(back[1]) == R"(photos[0] removed: {"url":"p0"})");
}

TEST_CASE("the diff of two states decoded through the pool") {
  type_pool pool{stock_files()};
  auto before = pool.decode(stock_any(pool, 7, {"a"}));
  auto after = pool.decode(stock_any(pool, 9, {"a", "b"}));
  REQUIRE(before);
  REQUIRE(after);
  std::vector<std::string> lines;
  for (auto& c : diff_messages(*before, *after))
    lines.push_back(to_string(c));
  CHECK(lines == std::vector<std::string>{R"(count: 7 -> 9)", R"(where[1] added: "b")"});
  // A Timestamp is one value, not seconds and nanos.
  const auto* d = after->GetDescriptor();
  auto* ts = after->GetReflection()->MutableMessage(after.get(), d->FindFieldByName("checked_at"));
  ts->GetReflection()->SetInt64(ts, ts->GetDescriptor()->FindFieldByName("seconds"), 1'700'000'060);
  auto with_time = diff_messages(*before, *after);
  REQUIRE(with_time.size() == 3);
  CHECK(to_string(with_time[2])
        == R"(checked_at: "2023-11-14T22:13:20Z" -> "2023-11-14T22:14:20Z")");
}

TEST_CASE("JSON becomes an Any of a type only the pool knows; a field that does not fit is named") {
  type_pool pool{stock_files()};
  pb::Any any;
  CHECK(pool.from_json("shop.v9.Stock", R"({"count":"7","where":["a"],"level":"LEVEL_LOW"})", any)
        == "");
  CHECK(any.type_url() == "type.googleapis.com/shop.v9.Stock");
  CHECK(pool.render(any) == R"({"count":"7","where":["a"],"level":"LEVEL_LOW"})");
  // A key the type lacks: named, with the fields it has.
  auto unknown = pool.from_json("type.googleapis.com/shop.v9.Stock", R"({"counts":1})", any);
  CHECK(
    unknown
    == "`counts` is not a field of shop.v9.Stock (its fields: count, where, checked_at, level)");
  // A value that does not fit its field: the field is named.
  auto bad = pool.from_json("shop.v9.Stock", R"({"count":"many"})", any);
  CHECK(bad.find("count") != std::string::npos);
  CHECK(bad.find("many") != std::string::npos);
  // Not JSON at all, and a type the node did not publish.
  CHECK_FALSE(pool.from_json("shop.v9.Stock", "{", any).empty());
  CHECK(pool.from_json("shop.v9.Other", "{}", any)
        == "type shop.v9.Other is not among the types the node published");
}
