// gostctl, feeds: a seller's feeds, one load and its per-offer errors (FeedService).
#include "gostctl/cli.hpp"

#include <cstdio>

#include <google/protobuf/util/time_util.h>

#include "gost/v1/feed_service.grpc.pb.h"
#include "rpc/feed_csv.hpp"

namespace gost::ctl {

namespace {

/// The feed verbs: feeds --seller S, feed-load SELLER LOAD_ID, feed-errors SELLER LOAD_ID.
int feeds_cmd(const cli& c) {
  using google::protobuf::util::TimeUtil;
  using gost::v1::FeedService;
  auto feeds = FeedService::NewStub(channel(c));
  auto when = [](const google::protobuf::Timestamp& t, bool set) {
    return set ? TimeUtil::ToString(t).substr(0, 19) : std::string{"-"};
  };
  if (c.cmd == "feeds") {
    if (opt(c, "seller").empty()) {
      std::fputs("gostctl feeds: give --seller S\n", stderr);
      return 2;
    }
    gost::v1::ListFeedsRequest req;
    req.set_seller_id(opt(c, "seller"));
    req.set_include_removed(c.opts.count("removed") != 0);
    gost::v1::ListFeedsResponse resp;
    grpc::ClientContext ctx;
    call_context(ctx, c);
    auto s = feeds->ListFeeds(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    std::printf("%-24s %-7s %7s %-19s %-19s %10s  %s\n", "namespace", "kind", "version",
                "next fetch (UTC)", "last fetch (UTC)", "last load", "url (period)");
    for (auto& f : resp.feeds()) {
      auto& st = f.settings();
      auto kind = gost::v1::FeedSettings::Kind_Name(st.kind());
      auto url = st.url().empty() ? std::string{"-"}
                                  : st.url() + " (" + TimeUtil::ToString(st.period()) + ")";
      std::printf(
        "%-24s %-7s %7lld %-19s %-19s %10lld  %s%s\n", f.namespace_().c_str(), kind.c_str(),
        static_cast<long long>(f.version()), when(f.next_fetch_at(), f.has_next_fetch_at()).c_str(),
        when(f.last_fetched_at(), f.has_last_fetched_at()).c_str(),
        static_cast<long long>(f.last_load_id()), url.c_str(), f.removed() ? "  [removed]" : "");
    }
    std::printf("%d feed(s)\n", resp.feeds_size());
    return 0;
  }
  if (!given(c, 2, "SELLER and LOAD_ID"))
    return 2;
  int64_t load_id = 0;
  if (!positive(c.positional[1], load_id)) {
    std::fprintf(stderr, "gostctl %s: LOAD_ID `%s` is not a load id\n", c.cmd.c_str(),
                 c.positional[1].c_str());
    return 2;
  }
  // One page of errors after `after` (external id, error id).
  auto page = [&](int32_t limit, const gost::v1::OfferError* after,
                  gost::v1::ListErrorsResponse& resp) {
    gost::v1::ListErrorsRequest req;
    req.set_seller_id(c.positional[0]);
    req.set_load_id(load_id);
    req.set_level(opt(c, "level"));
    req.set_type(opt(c, "type"));
    req.set_limit(limit);
    req.set_include_hidden(true); // operators see what sellers of parsed feeds do not
    if (after != nullptr) {
      req.set_after_external_id(after->external_id());
      req.set_after_error_id(after->error_id());
    }
    grpc::ClientContext ctx;
    call_context(ctx, c);
    return feeds->ListErrors(&ctx, req, &resp);
  };
  auto print_error = [](const gost::v1::OfferError& e) {
    std::printf("%-24s %5lld %-7s %-16s %-16s %6lld  %s%s%s\n", e.external_id().c_str(),
                static_cast<long long>(e.error_id()), e.level().c_str(), e.type().c_str(),
                e.field().c_str(), static_cast<long long>(e.line()), e.message().c_str(),
                e.title().empty() ? "" : "  | ", e.title().c_str());
  };
  auto error_head = [] {
    std::printf("%-24s %5s %-7s %-16s %-16s %6s  %s\n", "external_id", "id", "level", "type",
                "field", "line", "message | title");
  };
  if (c.cmd == "feed-load") {
    gost::v1::GetLoadRequest req;
    req.set_seller_id(c.positional[0]);
    req.set_load_id(load_id);
    gost::v1::GetLoadResponse resp;
    grpc::ClientContext ctx;
    call_context(ctx, c);
    auto s = feeds->GetLoad(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    auto& l = resp.load();
    std::printf("load %lld of %s/%s (feed version %lld): %s\n", static_cast<long long>(l.load_id()),
                l.seller_id().c_str(), l.namespace_().c_str(),
                static_cast<long long>(l.feed_version()),
                gost::v1::FeedLoad::Status_Name(l.status()).c_str());
    std::printf("origin %s%s%s  format %s  attempts %d\n", l.origin().c_str(),
                l.source_url().empty() ? "" : "  from ", l.source_url().c_str(),
                l.format().empty() ? "-" : l.format().c_str(), l.attempts());
    std::printf("file %s  created %s  updated %s\n", l.sha256().empty() ? "-" : l.sha256().c_str(),
                when(l.created_at(), true).c_str(), when(l.updated_at(), true).c_str());
    if (!l.error().empty())
      std::printf("error (%s): %s\n", l.error_kind().empty() ? "-" : l.error_kind().c_str(),
                  l.error().c_str());
    auto& st = l.statistics();
    std::printf("offers %lld  sent %lld  rejected here %lld  duplicates %lld  warnings %lld  "
                "batches %d  bytes %lld\n",
                static_cast<long long>(st.offers()), static_cast<long long>(st.sent()),
                static_cast<long long>(st.rejected_here()), static_cast<long long>(st.duplicates()),
                static_cast<long long>(st.warnings()), st.batches(),
                static_cast<long long>(st.bytes()));
    std::printf("store: added %lld  updated %lld  unchanged %lld  deleted %lld  made manual %lld  "
                "rejected %lld\n",
                static_cast<long long>(st.added()), static_cast<long long>(st.updated()),
                static_cast<long long>(st.unchanged()), static_cast<long long>(st.deleted()),
                static_cast<long long>(st.made_manual()), static_cast<long long>(st.rejected()));
    gost::v1::ListErrorsResponse errors;
    auto es = page(20, nullptr, errors);
    if (!es.ok())
      return fail(es);
    std::printf("\n%lld error(s)%s\n", static_cast<long long>(errors.total()),
                errors.total() > errors.errors_size() ? " (the first 20; all: gostctl feed-errors)"
                                                      : "");
    if (errors.errors_size() > 0)
      error_head();
    for (auto& e : errors.errors())
      print_error(e);
    return 0;
  }
  // feed-errors: every page, printed as it comes.
  bool csv = c.opts.count("csv") != 0;
  if (csv)
    std::fputs(gost::runtime::rpc::offer_errors_csv_header().c_str(), stdout);
  else
    error_head();
  gost::v1::OfferError last;
  bool any = false;
  int64_t total = 0;
  for (;;) {
    gost::v1::ListErrorsResponse resp;
    auto s = page(1000, any ? &last : nullptr, resp);
    if (!s.ok())
      return fail(s);
    total = resp.total();
    for (auto& e : resp.errors()) {
      if (csv)
        std::fputs(gost::runtime::rpc::offer_error_csv_row(e).c_str(), stdout);
      else
        print_error(e);
    }
    if (resp.errors_size() < 1000)
      break;
    last = *resp.errors().rbegin();
    any = true;
  }
  if (!csv)
    std::printf("%lld error(s)\n", static_cast<long long>(total));
  return 0;
}

} // namespace

std::vector<command> feed_commands() {
  return {
    {"feeds", "feeds", "--seller S [--removed]",
     "a seller's feeds (FeedService): namespace, kind, version, URL and\n"
     "period, next fetch, newest load; --removed lists removed ones too",
     feeds_cmd, "--removed"},
    {"feed-load", "feeds", "SELLER LOAD_ID",
     "one load of a feed: status, origin, format, fatal error, statistics\n"
     "(the processor's counts and the offer store's answers) and its\n"
     "first 20 per-offer errors (a parsed feed's hidden ones included)",
     feeds_cmd},
    {"feed-errors", "feeds", "SELLER LOAD_ID [--level error|warning] [--type T] [--csv]",
     "every per-offer error of a load, by external id: level, type, field,\n"
     "line, title, message; --csv prints them as the node's\n"
     "/feeds/errors.csv does (a header row, RFC 4180 quoting)",
     feeds_cmd, "--csv"},
  };
}

} // namespace gost::ctl
