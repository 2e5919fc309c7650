#pragma once
// The web console on the admin HTTP listener (docs/console.md, "The web page"): the page
// itself (runtime/console/web/, compiled in: web_assets.hpp) and its read-only JSON endpoints
// under /api/, each answered by the same admin_service function as its gostctl RPC and
// rendered from that RPC's protobuf response (proto3 JSON, field names as in the .proto).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "console/admin_http.hpp"

namespace grpc {
class Status;
}

namespace google::protobuf {
class Message;
}

namespace gost::v1 {
class InspectOfferResponse;
class InspectEntityResponse;
} // namespace gost::v1

namespace gost::runtime {

class admin_service;
class series_ring;

/// What /api/trace?offer=ID&for=S&max=N asks for, checked before the hook sees it.
struct trace_query {
  std::string offer_id;
  std::chrono::seconds duration{60}; ///< `for`: 1..3600 s
  uint32_t max = 1000;               ///< `max`: 1..100000 events
};

/// The live trace's HTTP side. Streams the offer's events as they happen, one JSON object per
/// line: `out.begin("application/x-ndjson; charset=utf-8")`, then one `out.write(json + "\n")`
/// per event, until `duration` passed, `max` events were sent or `out.write` answers false
/// (the browser went away, the node stops; while no event comes, `out.open()` says the same
/// without writing: ask it every 100 ms or so); or returns an error response without `begin`
/// (404 for an unknown offer, ...). It runs on a thread of its own, at most two at once.
/// Empty (no trace on this node yet): /api/trace answers 501 "trace not available on this
/// node", which the page shows in its "Live trace" panel.
using trace_hook = std::function<http_response(const trace_query&, http_stream& out)>;

/// /api/offer's answer: the describe view as JSON, each stage state decoded on its own with
/// the types linked into this binary; one it cannot decode shows its type URL and size
/// (`"decoded": false`) without hiding the others.
std::string offer_json(const v1::InspectOfferResponse& resp);

/// /api/entity's answer: the entity describe view as JSON, its state decoded as /api/offer's
/// stage states are (or shown by type URL and size).
std::string entity_json(const v1::InspectEntityResponse& resp);

/// A message as the console's JSON: the .proto's field names, zeros shown.
std::string to_json(const google::protobuf::Message& m);

/// A failed gRPC call's answer as the endpoints give it: `{"error", "code"}` with the HTTP
/// status of the gRPC code.
http_response http_error_of(const grpc::Status& st);

/// Adds to `http` (before it starts): the page at / and /console with its scripts and style,
/// and /api/{top,stages,nodes,shards,offer,entity,deadletters,trace,series}; /api/series
/// renders `series` (null: answered 501, as /api/trace without its hook).
void add_web_console(admin_http& http, admin_service& admin, trace_hook trace,
                     std::shared_ptr<const series_ring> series = nullptr);

} // namespace gost::runtime
