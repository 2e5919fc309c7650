#include "console/feed_export.hpp"

#include <cerrno>
#include <cstdlib>

#include "api/feed_service.hpp"
#include "api/status.hpp"
#include "console/web_api.hpp"
#include "gost/persistence/feeds/feed_admin.hpp"
#include "rpc/feed_csv.hpp"

namespace gost::runtime {

namespace {

constexpr int page_rows = 1000;

std::string param(const http_request& req, const char* name) {
  auto i = req.query.find(name);
  return i == req.query.end() ? std::string{} : i->second;
}

http_response bad(std::string why) {
  return http_error_of({grpc::StatusCode::INVALID_ARGUMENT, std::move(why)});
}

} // namespace

http_response feed_errors_csv(persistence::pg_pool& pool, const http_request& req,
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

void add_feed_export(admin_http& http, persistence::pg_pool& pool) {
  http.stream_route("/feeds/errors.csv", [&pool](const http_request& req, http_stream& out) {
    return feed_errors_csv(pool, req, out);
  });
}

} // namespace gost::runtime
