#pragma once
// Per-offer errors of a feed load as a CSV file on the admin HTTP listener (seed 004: errors
// "экспорт ... в Excel-таблицы"; MISSION F2), for operators and the tools behind them:
//
//   GET /feeds/errors.csv?seller=S&load=N[&level=error|warning][&type=T][&include_hidden=1]
//
// The header row, then one row per error in (external_id, error_id) order (rpc/feed_csv.hpp),
// streamed page by page as read (1000 rows per short read transaction: memory stays one page,
// however many errors the load has). A parsed feed's errors are hidden as ListErrors hides
// them (seed "parsed") unless include_hidden=1. Errors before the first row: 400 naming the
// parameter, 404 for a load that does not exist, 503 while the database is away (JSON, as the
// console's /api/ answers).

#include <memory>

#include "console/admin_http.hpp"

namespace gost::persistence {
class shard_placement;
}

namespace gost::runtime {

/// The web console's feed view: a seller's feeds with their newest loads (status, counts,
/// errors), GET /api/feeds?seller=S[&loads=N] (1..100, default 10) as JSON of FeedService's
/// messages: {"feeds": [Feed...], "loads": {"<namespace>": [FeedLoad...]}}. Both routes read
/// the seller's home group's database only (`where`, ADR 0023).
http_response feeds_json(const persistence::shard_placement& where, const http_request& req);

/// Adds the routes to `http` (before it starts); `where` outlives it.
void add_feed_export(admin_http& http, std::shared_ptr<const persistence::shard_placement> where);

/// The route's answer (the route calls it; tests may too).
http_response feed_errors_csv(const persistence::shard_placement& where, const http_request& req,
                              http_stream& out);

} // namespace gost::runtime
