// The web console's describe view as JSON (console/web_api.hpp): states decoded with the
// types linked into the binary, one it cannot decode shown by type URL and size.
#include <doctest/doctest.h>

#include "console/web_api.hpp"
#include "gost/v1/admin.pb.h"
#include "gost/v1/events.pb.h"

using namespace gost;

TEST_CASE("offer_json decodes linked state types and names the others by type URL and size") {
  v1::InspectOfferResponse resp;
  resp.set_found(true);
  resp.set_shard(3);
  resp.mutable_offer()->set_id("o1");
  resp.mutable_offer()->set_title("a \"quoted\" <title>");
  resp.mutable_offer()->set_version(7);
  v1::AuditTrail trail;
  trail.set_runs(2);
  trail.add_entries()->set_node_id("n1");
  (*resp.mutable_states())["audit"].PackFrom(trail);
  auto& other = (*resp.mutable_states())["zz-elsewhere"];
  other.set_type_url("type.googleapis.com/some.other.Type");
  other.set_value("12345");
  (*resp.mutable_state_versions())["audit"] = 4;
  auto json = runtime::offer_json(resp);
  INFO(json);
  CHECK(json.rfind("{\"found\":true,", 0) == 0);
  CHECK(json.find("\"title\":\"a \\\"quoted\\\" \\u003ctitle\\u003e\"") != std::string::npos);
  CHECK(json.find("\"version\":\"7\"") != std::string::npos);
  CHECK(json.find("\"state_versions\":{\"audit\":\"4\"}") != std::string::npos);
  CHECK(json.find("\"states\":{\"audit\":{\"@type\":\"type.googleapis.com/gost.v1.AuditTrail\","
                  "\"entries\":[{\"node_id\":\"n1\"")
        != std::string::npos);
  CHECK(json.find("\"runs\":\"2\"") != std::string::npos);
  CHECK(json.find("\"zz-elsewhere\":{\"@type\":\"type.googleapis.com/some.other.Type\","
                  "\"bytes\":5,\"decoded\":false}}}")
        != std::string::npos);
}

TEST_CASE("entity_json decodes the entity's state and shows one without state as it is") {
  v1::InspectEntityResponse resp;
  resp.set_entity_key("bank.account/a1");
  resp.set_exists(true);
  resp.set_version(3);
  v1::AuditTrail trail;
  trail.set_runs(5);
  resp.mutable_state()->PackFrom(trail);
  auto json = runtime::entity_json(resp);
  INFO(json);
  CHECK(json.rfind("{\"entity_key\":\"bank.account/a1\",\"exists\":true,\"version\":\"3\",", 0)
        == 0);
  CHECK(json.find("\"state\":{\"@type\":\"type.googleapis.com/gost.v1.AuditTrail\",")
        != std::string::npos);
  CHECK(json.find("\"runs\":\"5\"") != std::string::npos);
  CHECK(json.back() == '}');

  v1::InspectEntityResponse bare;
  bare.set_entity_key("bank.account/none");
  auto none = runtime::entity_json(bare);
  CHECK(none.find("\"state\"") == std::string::npos);
  CHECK(none.find("\"exists\":false") != std::string::npos);
}
