#include "console/feed_export.hpp"

#include <cerrno>
#include <cstdlib>

#include <google/protobuf/struct.pb.h>

#include "api/feed_service.hpp"
#include "api/status.hpp"
#include "console/web_api.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/feeds/feed_admin.hpp"
#include "rpc/feed_csv.hpp"

namespace gost::runtime {

namespace {

constexpr int page_rows = 1000;

std::string param(const http_request& req, const char* name) {
  auto i = req.query.find(name);
  return i == req.query.end() ? std::string{} : i->second;
}

/// A JSON string literal.
std::string to_json_string(const std::string& s) {
  google::protobuf::Value v;
  v.set_string_value(s);
  return to_json(v);
}

http_response bad(std::string why) {
  return http_error_of({grpc::StatusCode::INVALID_ARGUMENT, std::move(why)});
}

} // namespace

http_response feed_errors_csv(const persistence::shard_placement& where, const http_request& req,
                              http_stream& out) {
  persistence::feed_error_query q;
  q.seller_id = param(req, "seller");
  if (auto p = check_feed_seller("seller", q.seller_id); !p.empty())
    return bad(p);
  auto load = param(req, "load");
  errno = 0;
  char* end = nullptr;
  q.load_id = std::strtoll(load.c_str(), &end, 10);
  if (load.empty() || *end != '\0' || errno != 0 || q.load_id <= 0)
    return bad("load must be a load id (a positive number), not `" + load.substr(0, 40) + "`");
  q.level = param(req, "level");
  if (!q.level.empty() && q.level != "error" && q.level != "warning")
    return bad("level must be error or warning (absent: both)");
  q.type = param(req, "type");
  if (q.type.size() > 64)
    return bad("type is at most 64 bytes");
  auto& pool = home_database(where, q.seller_id);
  auto row = persistence::get_feed_load(pool, q.seller_id, q.load_id);
  if (!row)
    return http_error_of(to_status(row.error()));
  bool hidden = param(req, "include_hidden") != "1" && feed_errors_hidden(row->settings);
  if (!out.begin("text/csv; charset=utf-8") || !out.write(rpc::offer_errors_csv_header()))
    return {};
  if (hidden) // seed "parsed": the system that sent the file shows them
    return {};
  v1::OfferError e;
  auto err = persistence::for_each_feed_error(
    pool, q, page_rows, [&](const std::vector<persistence::feed_offer_error>& page) {
      std::string chunk;
      for (auto& r : page) {
        to_proto(r, e);
        chunk += rpc::offer_error_csv_row(e);
      }
      return out.write(chunk); // false: the client went away (or the node stops)
    });
  // Begun already (the status sent): a failure half-way is said in a last line no row can be
  // (rows start with a field, never '#'), so a cut file is not taken for a whole one.
  if (err)
    out.write("# the export stopped early: " + to_status(err).error_message() + "; retry\r\n");
  return {};
}

http_response feeds_json(const persistence::shard_placement& where, const http_request& req) {
  auto seller = param(req, "seller");
  if (auto p = check_feed_seller("seller", seller); !p.empty())
    return bad(p);
  int loads = 10;
  if (auto n = param(req, "loads"); !n.empty()) {
    char* end = nullptr;
    loads = static_cast<int>(std::strtol(n.c_str(), &end, 10));
    if (*end != '\0' || loads < 1 || loads > 100)
      return bad("loads must be a number from 1 to 100 (the newest loads shown per feed)");
  }
  auto& pool = home_database(where, seller);
  auto feeds = persistence::list_feeds(pool, seller, true);
  if (!feeds)
    return http_error_of(to_status(feeds.error()));
  // {"feeds": [Feed, ...], "loads": {"<namespace>": [FeedLoad, ...]}}: FeedService's messages.
  std::string out = "{\"feeds\":[";
  std::string by_ns;
  v1::Feed f;
  v1::FeedLoad l;
  for (auto& row : *feeds) {
    to_proto(row, f);
    out += (out.back() == '[' ? "" : ",") + to_json(f);
    auto rows = persistence::list_feed_loads(pool, seller, row.ns, 0, loads);
    if (!rows)
      return http_error_of(to_status(rows.error()));
    std::string list;
    for (auto& r : *rows) {
      to_proto(r, l);
      list += (list.empty() ? "" : ",") + to_json(l);
    }
    by_ns += (by_ns.empty() ? "" : ",") + to_json_string(row.ns) + ":[" + list + "]";
  }
  return http_response::json(200, out + "],\"loads\":{" + by_ns + "}}\n");
}

void add_feed_export(admin_http& http, std::shared_ptr<const persistence::shard_placement> where) {
  http.route("/api/feeds", [where](const http_request& req) { return feeds_json(*where, req); });
  http.json_under("/feeds/"); // its errors are JSON (the CSV is the answer, not the refusal)
  http.stream_route("/feeds/errors.csv", [where](const http_request& req, http_stream& out) {
    return feed_errors_csv(*where, req, out);
  });
}

} // namespace gost::runtime
