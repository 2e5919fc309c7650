#include "console/web_api.hpp"

#include <algorithm>
#include <future>
#include <memory>
#include <set>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "api/admin_service.hpp"
#include "console/series.hpp"
#include "console/web_assets.hpp"
#include "rpc/proto_types.hpp"

namespace gost::runtime {

namespace {

using namespace std::chrono_literals;

std::string quote(const std::string& s) {
  return rpc::json_quoted(s);
}

http_response json_error(int status, const std::string& code, const std::string& msg) {
  return http_response::json(status,
                             "{\"error\":" + quote(msg) + ",\"code\":" + quote(code) + "}\n");
}

/// gRPC's codes as HTTP's, one to one where HTTP has one.
http_response from_status(const grpc::Status& st) {
  static const std::pair<grpc::StatusCode, std::pair<int, const char*>> table[] = {
    {grpc::StatusCode::INVALID_ARGUMENT, {400, "INVALID_ARGUMENT"}},
    {grpc::StatusCode::OUT_OF_RANGE, {400, "OUT_OF_RANGE"}},
    {grpc::StatusCode::NOT_FOUND, {404, "NOT_FOUND"}},
    {grpc::StatusCode::FAILED_PRECONDITION, {409, "FAILED_PRECONDITION"}},
    {grpc::StatusCode::RESOURCE_EXHAUSTED, {429, "RESOURCE_EXHAUSTED"}},
    {grpc::StatusCode::UNAVAILABLE, {503, "UNAVAILABLE"}},
    {grpc::StatusCode::DEADLINE_EXCEEDED, {504, "DEADLINE_EXCEEDED"}},
  };
  for (auto& [code, http] : table)
    if (st.error_code() == code)
      return json_error(http.first, http.second, st.error_message());
  return json_error(500, "INTERNAL", st.error_message());
}

google::protobuf::util::JsonPrintOptions print_options() {
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true; // a zero is shown as 0, not left out
  o.preserve_proto_field_names = true;    // the names of the .proto, as gostctl and the docs say
  return o;
}

/// A stage state as JSON: decoded with the node's own generated descriptors when its type is
/// linked into this binary; else its type URL and size.
std::string state_json(const google::protobuf::Any& any) {
  std::string out;
  if (google::protobuf::util::MessageToJsonString(any, &out, print_options()).ok())
    return out;
  return "{\"@type\":" + quote(any.type_url()) + ",\"bytes\":" + std::to_string(any.value().size())
         + ",\"decoded\":false}";
}

/// A 400 naming the first parameter the endpoint does not take, or nothing.
bool unknown_params(const http_request& req, std::set<std::string> takes, http_response& out) {
  for (auto& [name, value] : req.query)
    if (takes.count(name) == 0) {
      std::string list;
      for (auto& t : takes)
        list += (list.empty() ? "" : ", ") + t;
      out = json_error(400, "INVALID_ARGUMENT",
                       "unknown parameter `" + name + "` for " + req.path
                         + " (it takes: " + (list.empty() ? std::string{"none"} : list) + ")");
      return true;
    }
  return false;
}

/// A whole number in [lo, hi] from a parameter; false (and a 400 naming it) otherwise.
bool number_param(const http_request& req, const std::string& name, int64_t lo, int64_t hi,
                  int64_t& value, http_response& out, const std::string& suffix = "") {
  auto it = req.query.find(name);
  if (it == req.query.end())
    return true;
  auto text = it->second;
  if (!suffix.empty() && text.size() > suffix.size()
      && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0)
    text.resize(text.size() - suffix.size());
  bool ok = !text.empty() && text.size() <= 18
            && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (ok)
    value = std::stoll(text);
  if (!ok || value < lo || value > hi) {
    out = json_error(400, "INVALID_ARGUMENT",
                     name + " must be a whole number from " + std::to_string(lo) + " to "
                       + std::to_string(hi) + ", not `" + it->second + "`");
    return false;
  }
  return true;
}

/// Runs one of admin_service's reads and waits for it (bounded: the read's own timeout and a
/// margin); the response lives in a slot `done` keeps, so a late answer writes into memory
/// still owned.
template <class Resp, class Call, class Render>
http_response answer(admin_service& admin, Call call, Render render) {
  struct slot {
    Resp resp;
    std::promise<grpc::Status> done;
  };
  auto s = std::make_shared<slot>();
  auto result = s->done.get_future();
  call(&s->resp, [s](grpc::Status st) { s->done.set_value(std::move(st)); });
  if (result.wait_for(admin.timeout() + 5s) != std::future_status::ready)
    return json_error(504, "DEADLINE_EXCEEDED", "the node did not answer in time; try again");
  auto st = result.get();
  if (!st.ok())
    return from_status(st);
  return render(s->resp);
}

template <class Resp>
http_response plain(const Resp& r) {
  return http_response::json(200, to_json(r) + "\n");
}

} // namespace

std::string to_json(const google::protobuf::Message& m) {
  std::string out;
  if (auto st = google::protobuf::util::MessageToJsonString(m, &out, print_options()); !st.ok())
    throw std::runtime_error("cannot render " + m.GetTypeName()
                             + " as JSON: " + std::string{st.message()});
  return out;
}

std::string offer_json(const v1::InspectOfferResponse& resp) {
  v1::InspectOfferResponse rest = resp;
  rest.clear_states();
  auto out = to_json(rest);
  std::vector<std::string> stages;
  for (auto& [stage, any] : resp.states())
    stages.push_back(stage);
  std::sort(stages.begin(), stages.end());
  std::string states = "{";
  for (auto& stage : stages)
    states +=
      (states.size() > 1 ? "," : "") + quote(stage) + ":" + state_json(resp.states().at(stage));
  states += "}";
  out.pop_back(); // the closing brace
  return out + (out.size() > 1 ? "," : "") + "\"states\":" + states + "}";
}

std::string entity_json(const v1::InspectEntityResponse& resp) {
  v1::InspectEntityResponse rest = resp;
  rest.clear_state();
  auto out = to_json(rest);
  if (!resp.has_state())
    return out;
  out.pop_back(); // the closing brace
  return out + ",\"state\":" + state_json(resp.state()) + "}";
}

void add_web_console(admin_http& http, admin_service& admin, trace_hook trace,
                     std::shared_ptr<const series_ring> series) {
  for (size_t i = 0; i < web::asset_count; ++i) {
    auto& a = web::assets[i];
    http_response page{200, std::string{a.type}, std::string{a.body}};
    http.route(std::string{a.path}, [page](const http_request&) { return page; });
    if (a.path == "/")
      http.route("/console", [page](const http_request&) { return page; });
  }
  auto* svc = &admin;
  http.json_under("/api/"); // a bad escape, an unknown endpoint: JSON as every answer there
  http.route("/api/top", [svc](const http_request& req) {
    http_response bad;
    if (unknown_params(req, {}, bad))
      return bad;
    return answer<v1::TopResponse>(
      *svc, [svc](auto* resp, auto done) { svc->top(resp, std::move(done)); },
      plain<v1::TopResponse>);
  });
  http.route("/api/stages", [svc](const http_request& req) {
    http_response bad;
    if (unknown_params(req, {}, bad))
      return bad;
    return answer<v1::ListStagesResponse>(
      *svc, [svc](auto* resp, auto done) { svc->list_stages(resp, std::move(done)); },
      plain<v1::ListStagesResponse>);
  });
  http.route("/api/nodes", [svc](const http_request& req) {
    http_response bad;
    if (unknown_params(req, {}, bad))
      return bad;
    return answer<v1::ListNodesResponse>(
      *svc, [svc](auto* resp, auto done) { svc->list_nodes(resp, std::move(done)); },
      plain<v1::ListNodesResponse>);
  });
  http.route("/api/shards", [svc](const http_request& req) {
    http_response bad;
    if (unknown_params(req, {}, bad))
      return bad;
    return answer<v1::ListShardsResponse>(
      *svc, [svc](auto* resp, auto done) { svc->list_shards(resp, std::move(done)); },
      plain<v1::ListShardsResponse>);
  });
  http.route("/api/offer", [svc](const http_request& req) {
    http_response bad;
    if (unknown_params(req, {"id"}, bad))
      return bad;
    auto id = req.query.find("id");
    if (id == req.query.end() || id->second.empty())
      return json_error(400, "INVALID_ARGUMENT", "id is required: /api/offer?id=OFFER_ID");
    v1::InspectOfferRequest in;
    in.set_offer_id(id->second);
    return answer<v1::InspectOfferResponse>(
      *svc, [svc, in](auto* resp, auto done) { svc->inspect_offer(in, resp, std::move(done)); },
      [&](const v1::InspectOfferResponse& r) {
        if (!r.found())
          return json_error(404, "NOT_FOUND", "offer " + id->second + " does not exist");
        return http_response::json(200, offer_json(r) + "\n");
      });
  });
  http.route("/api/entity", [svc](const http_request& req) {
    http_response bad;
    if (unknown_params(req, {"kind", "id"}, bad))
      return bad;
    auto kind = req.query.find("kind");
    auto id = req.query.find("id");
    if (kind == req.query.end() || kind->second.empty() || id == req.query.end()
        || id->second.empty())
      return json_error(400, "INVALID_ARGUMENT",
                        "kind and id are required: /api/entity?kind=KIND&id=ID");
    v1::InspectEntityRequest in;
    in.set_kind(kind->second);
    in.set_id(id->second);
    return answer<v1::InspectEntityResponse>(
      *svc,
      [svc, in](auto* resp, auto done) {
        svc->inspect_entity(in, resp, std::move(done), svc->timeout());
      },
      [&](const v1::InspectEntityResponse& r) {
        if (!r.exists())
          return json_error(404, "NOT_FOUND",
                            "entity " + kind->second + "/" + id->second
                              + " does not exist (nothing was ever sent to it)");
        return http_response::json(200, entity_json(r) + "\n");
      });
  });
  http.route("/api/series", [series](const http_request& req) {
    http_response bad;
    if (unknown_params(req, {}, bad))
      return bad;
    if (!series)
      return json_error(501, "UNIMPLEMENTED", "no samples kept on this node");
    return http_response::json(200, series->json() + "\n");
  });
  http.route("/api/deadletters", [svc](const http_request& req) {
    http_response bad;
    if (unknown_params(req, {"stage", "limit", "after"}, bad))
      return bad;
    int64_t limit = 0;
    if (!number_param(req, "limit", 1, 1000000, limit, bad))
      return bad;
    v1::ListDeadLettersRequest in;
    in.set_page_size(static_cast<uint32_t>(limit));
    if (auto s = req.query.find("stage"); s != req.query.end())
      in.mutable_filter()->set_stage_id(s->second);
    if (auto a = req.query.find("after"); a != req.query.end())
      in.set_page_token(a->second);
    return answer<v1::ListDeadLettersResponse>(
      *svc, [svc, in](auto* resp, auto done) { svc->list_dead_letters(in, resp, std::move(done)); },
      plain<v1::ListDeadLettersResponse>);
  });
  http.stream_route("/api/trace", [trace](const http_request& req, http_stream& out) {
    http_response bad;
    if (unknown_params(req, {"offer", "for", "max"}, bad))
      return bad;
    trace_query q;
    auto offer = req.query.find("offer");
    if (offer == req.query.end() || offer->second.empty())
      return json_error(400, "INVALID_ARGUMENT", "offer is required: /api/trace?offer=OFFER_ID");
    q.offer_id = offer->second;
    int64_t secs = q.duration.count(), max = q.max;
    if (!number_param(req, "for", 1, 3600, secs, bad, "s")
        || !number_param(req, "max", 1, 100000, max, bad))
      return bad;
    q.duration = std::chrono::seconds{secs};
    q.max = static_cast<uint32_t>(max);
    if (!trace)
      return json_error(501, "UNIMPLEMENTED", "trace not available on this node");
    return trace(q, out);
  });
}

http_response http_error_of(const grpc::Status& st) {
  return from_status(st);
}

} // namespace gost::runtime
