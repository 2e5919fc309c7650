#include "api/feed_service.hpp"

#include <cctype>

#include <google/protobuf/util/time_util.h>

#include "api/call.hpp"
#include "gost/core/blob_store.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/log.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/feeds/feed_admin.hpp"

namespace gost::runtime {

namespace {

using google::protobuf::util::TimeUtil;

const auto lg = gost::log::get("feeds");

constexpr size_t seller_max = 128;
constexpr size_t namespace_max = 64;
constexpr size_t url_max = 2048;
constexpr size_t text_max = 1024;
constexpr size_t chunk_max = 4u << 20;
constexpr int64_t period_max_ms = 366LL * 24 * 3'600'000;
constexpr int loads_default = 20;
constexpr int loads_max = 100;

/// A duration for messages: "90s", "250ms".
std::string duration_text(int64_t ms) {
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

std::string check_url(const std::string& field, const std::string& url) {
  auto scheme_end = url.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  for (auto& c : scheme)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https")
    return field + " must be an absolute http:// or https:// URL, not `" + url.substr(0, 80) + "`";
  auto authority =
    url.substr(scheme_end + 3, url.find_first_of("/?#", scheme_end + 3) - scheme_end - 3);
  if (authority.substr(authority.rfind('@') + 1).empty()) // npos + 1: the whole authority
    return field + " has no host: `" + url.substr(0, 80) + "`";
  if (url.size() > url_max)
    return field + " is " + std::to_string(url.size()) + " bytes; at most "
           + std::to_string(url_max);
  for (unsigned char c : url)
    if (c <= ' ' || c == 0x7f)
      return field + " must not hold spaces or control characters (percent-encode them)";
  return {};
}

std::string check_ref(const std::string& field, const v1::FeedRef& ref) {
  if (auto p = check_feed_seller(field + ".seller_id", ref.seller_id()); !p.empty())
    return p;
  return check_feed_namespace(field + ".namespace", ref.namespace_());
}

v1::FeedLoad::Status status_of(const std::string& s) {
  if (s == "fetching")
    return v1::FeedLoad::FETCHING;
  if (s == "queued")
    return v1::FeedLoad::QUEUED;
  if (s == "in_progress")
    return v1::FeedLoad::IN_PROGRESS;
  if (s == "failed")
    return v1::FeedLoad::FAILED;
  if (s == "succeeded")
    return v1::FeedLoad::SUCCEEDED;
  if (s == "cancelled")
    return v1::FeedLoad::CANCELLED;
  return v1::FeedLoad::STATUS_UNSPECIFIED;
}

google::protobuf::Timestamp stamp(std::chrono::system_clock::time_point t) {
  return TimeUtil::MicrosecondsToTimestamp(
    std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

/// Who asked, for the log: gostctl's x-gost-who and the peer.
std::string who_asked(grpc::CallbackServerContext* ctx) {
  auto& md = ctx->client_metadata();
  std::string w;
  if (auto i = md.find("x-gost-who"); i != md.end())
    w.assign(i->second.data(), i->second.size());
  return (w.empty() ? std::string{"(not given)"} : w) + " peer=" + ctx->peer();
}

} // namespace

std::string check_feed_seller(const std::string& field, const std::string& seller_id) {
  if (seller_id.empty() || seller_id.size() > seller_max)
    return field + " must be 1.." + std::to_string(seller_max) + " bytes (it is "
           + std::to_string(seller_id.size()) + ")";
  return {};
}

std::string check_feed_namespace(const std::string& field, const std::string& ns) {
  if (ns.empty() || ns.size() > namespace_max)
    return field + " must be 1.." + std::to_string(namespace_max) + " characters (it is "
           + std::to_string(ns.size()) + ")";
  for (char c : ns)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return field + " may hold letters, digits, '.', '_' and '-' only: `" + ns + "`";
  return {};
}

void to_proto(const persistence::feed_row& in, v1::Feed& out) {
  out.set_seller_id(in.seller_id);
  out.set_namespace_(in.ns);
  out.set_version(in.version);
  out.mutable_settings()->ParseFromString(in.settings);
  out.set_removed(in.removed);
  if (in.last_fetched_at)
    *out.mutable_last_fetched_at() = stamp(*in.last_fetched_at);
  if (in.next_fetch_at)
    *out.mutable_next_fetch_at() = stamp(*in.next_fetch_at);
  *out.mutable_created_at() = stamp(in.created_at);
  *out.mutable_updated_at() = stamp(in.updated_at);
  out.set_last_load_id(in.last_load_id);
}

void to_proto(const persistence::feed_load_row& in, v1::FeedLoad& out) {
  out.set_seller_id(in.seller_id);
  out.set_namespace_(in.ns);
  out.set_load_id(in.load_id);
  out.set_feed_version(in.feed_version);
  out.set_status(status_of(in.status));
  out.set_origin(in.origin);
  out.set_source_url(in.source_url);
  out.set_sha256(in.sha256.substr(0, in.sha256.find('.'))); // stored as the blob's name
  out.set_format(in.format);
  out.set_error_kind(in.error_kind);
  out.set_error(in.error_message);
  if (!in.statistics.empty())
    out.mutable_statistics()->ParseFromString(in.statistics);
  if (out.statistics().bytes() == 0 && in.bytes > 0)
    out.mutable_statistics()->set_bytes(in.bytes);
  out.set_attempts(in.attempts);
  *out.mutable_created_at() = stamp(in.created_at);
  *out.mutable_updated_at() = stamp(in.updated_at);
}

void to_proto(const persistence::feed_offer_error& in, v1::OfferError& out) {
  out.set_external_id(in.external_id);
  out.set_error_id(in.error_id);
  out.set_level(in.level);
  out.set_type(in.type);
  out.set_field(in.field);
  out.set_title(in.title);
  out.set_line(in.line);
  out.set_message(in.message);
}

bool feed_errors_hidden(const std::string& settings) {
  v1::FeedSettings s;
  return s.ParseFromString(settings) && s.kind() == v1::FeedSettings::PARSED;
}

std::string feed_service::check_settings(const v1::FeedSettings& s,
                                         const std::string& field) const {
  auto period_ms = s.has_period() ? TimeUtil::DurationToMilliseconds(s.period()) : 0;
  if (!v1::FeedSettings::Missing_IsValid(s.missing()))
    return field + ".missing must be DELETE or MAKE_MANUAL";
  if (s.default_address().size() > text_max)
    return field + ".default_address is " + std::to_string(s.default_address().size())
           + " bytes; at most " + std::to_string(text_max);
  switch (s.kind()) {
    case v1::FeedSettings::URL:
      if (s.url().empty())
        return field + ".url is empty: a URL feed is fetched from it (absolute http(s))";
      if (auto p = check_url(field + ".url", s.url()); !p.empty())
        return p;
      if (period_ms < settings_.min_period.count())
        return field + ".period is " + duration_text(period_ms) + "; a URL feed is fetched at most"
               + " every " + duration_text(settings_.min_period.count()) + " (feed.min_period)";
      if (period_ms > period_max_ms)
        return field + ".period is " + duration_text(period_ms) + "; at most 366 days";
      break;
    case v1::FeedSettings::UPLOAD:
    case v1::FeedSettings::PARSED:
      if (!s.url().empty())
        return field + ".url must be empty for " + v1::FeedSettings::Kind_Name(s.kind())
               + " feeds (their files come by Upload or LoadNow); kind URL is fetched from a URL";
      if (s.has_period())
        return field + ".period must be unset for " + v1::FeedSettings::Kind_Name(s.kind())
               + " feeds (only URL feeds are fetched on a schedule)";
      if (s.kind() == v1::FeedSettings::PARSED && s.source().empty())
        return field + ".source must name the system a PARSED feed's files come from";
      break;
    default: return field + ".kind must be URL, UPLOAD or PARSED";
  }
  if (s.source().size() > seller_max)
    return field + ".source is " + std::to_string(s.source().size()) + " bytes; at most "
           + std::to_string(seller_max);
  return {};
}

namespace {

persistence::feed_spec spec_of(const v1::FeedRef& ref, const v1::FeedSettings& s) {
  persistence::feed_spec spec;
  spec.seller_id = ref.seller_id();
  spec.ns = ref.namespace_();
  spec.settings = s.SerializeAsString(); // no maps: the same settings, the same bytes
  if (s.kind() == v1::FeedSettings::URL) {
    spec.url = s.url();
    spec.period_ms = TimeUtil::DurationToMilliseconds(s.period());
  }
  return spec;
}

} // namespace

persistence::pg_pool* feed_service::db_of(const std::string& seller_id) const {
  return &home_database(*where_, seller_id);
}

grpc::ServerUnaryReactor* feed_service::CreateFeed(grpc::CallbackServerContext* ctx,
                                                   const v1::CreateFeedRequest* req,
                                                   v1::CreateFeedResponse* resp) {
  auto problem = check_ref("feed", req->feed());
  if (problem.empty())
    problem = check_settings(req->settings(), "settings");
  auto* pool = db_of(req->feed().seller_id());
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto f = persistence::create_feed(*pool, spec_of(req->feed(), req->settings()));
    if (!f)
      return to_status(f.error());
    to_proto(*f, *resp->mutable_feed());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* feed_service::UpdateFeed(grpc::CallbackServerContext* ctx,
                                                   const v1::UpdateFeedRequest* req,
                                                   v1::UpdateFeedResponse* resp) {
  auto problem = check_ref("feed", req->feed());
  if (problem.empty())
    problem = check_settings(req->settings(), "settings");
  if (problem.empty() && req->expected_version() < 0)
    problem = "expected_version must not be negative (0: whatever it is)";
  auto* pool = db_of(req->feed().seller_id());
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto f = persistence::update_feed(*pool, spec_of(req->feed(), req->settings()),
                                      req->expected_version());
    if (!f)
      return to_status(f.error());
    to_proto(*f, *resp->mutable_feed());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* feed_service::DeleteFeed(grpc::CallbackServerContext* ctx,
                                                   const v1::DeleteFeedRequest* req,
                                                   v1::DeleteFeedResponse* resp) {
  auto problem = check_ref("feed", req->feed());
  auto* pool = db_of(req->feed().seller_id());
  auto who = who_asked(ctx);
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto& ref = req->feed();
    auto r = persistence::remove_feed(*pool, ref.seller_id(), ref.namespace_(), req->make_manual());
    if (!r)
      return to_status(r.error());
    if (!r->already)
      lg->info("feed removed seller={} namespace={} closing_load={} cancelled={} make_manual={} "
               "by={}",
               ref.seller_id(), ref.namespace_(), r->load_id, r->cancelled, req->make_manual(),
               who);
    resp->set_load_id(r->load_id);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* feed_service::GetFeed(grpc::CallbackServerContext* ctx,
                                                const v1::GetFeedRequest* req,
                                                v1::GetFeedResponse* resp) {
  auto problem = check_ref("feed", req->feed());
  auto* pool = db_of(req->feed().seller_id());
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto f = persistence::get_feed(*pool, req->feed().seller_id(), req->feed().namespace_());
    if (!f)
      return to_status(f.error());
    to_proto(*f, *resp->mutable_feed());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* feed_service::ListFeeds(grpc::CallbackServerContext* ctx,
                                                  const v1::ListFeedsRequest* req,
                                                  v1::ListFeedsResponse* resp) {
  auto problem = check_feed_seller("seller_id", req->seller_id());
  auto* pool = db_of(req->seller_id());
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto feeds = persistence::list_feeds(*pool, req->seller_id(), req->include_removed());
    if (!feeds)
      return to_status(feeds.error());
    for (auto& f : *feeds)
      to_proto(f, *resp->add_feeds());
    return grpc::Status::OK;
  });
}

/// One Upload call: the first message names the feed (checked, and the feed looked up, before
/// any byte is taken), the others are written to a blob as they come; at the client's end the
/// blob is finished and the load queued. Reads are one at a time, so the callbacks never run
/// side by side; a blocking step runs on the hub and goes on with the next read or the finish.
/// The writer removes its unfinished file when the call ends any other way.
class feed_service::upload final : public grpc::ServerReadReactor<v1::UploadRequest> {
public:
  upload(feed_service& svc, grpc::CallbackServerContext* ctx, v1::UploadResponse* resp)
    : svc_(svc), ctx_(ctx), resp_(resp), writer_(svc.blobs_.begin()) {
    StartRead(&msg_);
  }

  void OnReadDone(bool ok) override {
    if (!ok)
      return end();
    if (!named_)
      return first();
    if (msg_.part_case() != v1::UploadRequest::kChunk)
      return fail(invalid("chunk: after the first message (feed) every message carries a chunk"));
    auto& chunk = msg_.chunk();
    if (chunk.size() > chunk_max)
      return fail(
        invalid("chunk is " + std::to_string(chunk.size()) + " bytes; at most 4 MiB each"));
    if (writer_.bytes() + chunk.size() > svc_.settings_.max_file_bytes)
      return fail({grpc::StatusCode::RESOURCE_EXHAUSTED,
                   "the file is over " + std::to_string(svc_.settings_.max_file_bytes)
                     + " bytes (feed.max_file_bytes); nothing was stored"});
    if (!writer_.write(chunk.data(), chunk.size()))
      return fail({grpc::StatusCode::UNAVAILABLE, "cannot store the file: " + writer_.error()});
    StartRead(&msg_);
  }

  void OnDone() override { delete this; }

private:
  void first() {
    if (msg_.part_case() != v1::UploadRequest::kFeed)
      return fail(invalid("feed: the first message must name the feed (seller_id, namespace)"));
    if (auto p = check_ref("feed", msg_.feed()); !p.empty())
      return fail(invalid(p));
    if (msg_.total_bytes() < 0)
      return fail(invalid("total_bytes must not be negative (0: not given)"));
    if (static_cast<uint64_t>(msg_.total_bytes()) > svc_.settings_.max_file_bytes)
      return fail({grpc::StatusCode::RESOURCE_EXHAUSTED,
                   "total_bytes is " + std::to_string(msg_.total_bytes()) + "; at most "
                     + std::to_string(svc_.settings_.max_file_bytes) + " (feed.max_file_bytes)"});
    if (!writer_.error().empty())
      return fail({grpc::StatusCode::UNAVAILABLE, "cannot store the file: " + writer_.error()});
    named_ = true;
    ref_ = msg_.feed();
    total_ = msg_.total_bytes();
    // The feed must be there and live before the bytes come.
    svc_.hub_.run_blocking([this] {
      auto f =
        persistence::get_feed(*svc_.db_of(ref_.seller_id()), ref_.seller_id(), ref_.namespace_());
      if (!f)
        return fail(to_status(f.error()));
      if (f->removed)
        return fail({grpc::StatusCode::FAILED_PRECONDITION,
                     "the feed " + ref_.seller_id() + "/" + ref_.namespace_()
                       + " is removed; CreateFeed makes it again"});
      v1::FeedSettings s;
      s.ParseFromString(f->settings);
      parsed_ = s.kind() == v1::FeedSettings::PARSED;
      StartRead(&msg_);
    });
  }

  void end() {
    if (ctx_->IsCancelled())
      return fail({grpc::StatusCode::CANCELLED, "the upload was cancelled; nothing was stored"});
    if (!named_)
      return fail(invalid("feed: the stream ended before the first message named the feed"));
    if (writer_.bytes() == 0)
      return fail(invalid("chunk: the file is empty"));
    if (total_ != 0 && writer_.bytes() != static_cast<uint64_t>(total_))
      return fail(invalid("total_bytes is " + std::to_string(total_) + " but the stream carried "
                          + std::to_string(writer_.bytes()) + "; nothing was stored"));
    auto name = writer_.finish(parsed_ ? "json" : "xml");
    if (name.empty())
      return fail({grpc::StatusCode::UNAVAILABLE, "cannot store the file: " + writer_.error()});
    auto bytes = static_cast<int64_t>(writer_.bytes());
    svc_.hub_.run_blocking([this, name, bytes] {
      persistence::new_feed_load n;
      n.seller_id = ref_.seller_id();
      n.ns = ref_.namespace_();
      n.origin = parsed_ ? "parsed" : "upload";
      n.sha256 = name;
      n.bytes = bytes;
      n.keep_loads = svc_.settings_.keep_loads;
      auto load = persistence::create_feed_load(*svc_.db_of(n.seller_id), n);
      if (!load)
        return fail(to_status(load.error()));
      resp_->set_load_id(load->load_id);
      resp_->set_sha256(name.substr(0, name.find('.')));
      resp_->set_bytes(bytes);
      Finish(grpc::Status::OK);
    });
  }

  void fail(grpc::Status s) { Finish(std::move(s)); }

  feed_service& svc_;
  grpc::CallbackServerContext* ctx_;
  v1::UploadResponse* resp_;
  v1::UploadRequest msg_;
  blob_store::writer writer_;
  bool named_ = false;
  bool parsed_ = false;
  v1::FeedRef ref_;
  int64_t total_ = 0;
};

grpc::ServerReadReactor<v1::UploadRequest>* feed_service::Upload(grpc::CallbackServerContext* ctx,
                                                                 v1::UploadResponse* resp) {
  return new upload(*this, ctx, resp);
}

grpc::ServerUnaryReactor* feed_service::LoadNow(grpc::CallbackServerContext* ctx,
                                                const v1::LoadNowRequest* req,
                                                v1::LoadNowResponse* resp) {
  auto problem = check_ref("feed", req->feed());
  if (problem.empty() && !req->url().empty())
    problem = check_url("url", req->url());
  auto* pool = db_of(req->feed().seller_id());
  auto keep = settings_.keep_loads;
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto& ref = req->feed();
    persistence::new_feed_load n;
    n.seller_id = ref.seller_id();
    n.ns = ref.namespace_();
    n.keep_loads = keep;
    if (!req->url().empty()) {
      n.origin = "url-once";
      n.source_url = req->url();
    } else {
      auto f = persistence::get_feed(*pool, ref.seller_id(), ref.namespace_());
      if (!f)
        return to_status(f.error());
      if (f->url.empty())
        return {grpc::StatusCode::FAILED_PRECONDITION,
                "the feed " + ref.seller_id() + "/" + ref.namespace_()
                  + " has no URL to load from; give `url` (a one-shot load) or Upload"};
      n.origin = "url";
      n.source_url = f->url;
    }
    auto load = persistence::create_feed_load(*pool, n);
    if (!load)
      return to_status(load.error());
    resp->set_load_id(load->load_id);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* feed_service::ListLoads(grpc::CallbackServerContext* ctx,
                                                  const v1::ListLoadsRequest* req,
                                                  v1::ListLoadsResponse* resp) {
  auto problem = check_ref("feed", req->feed());
  if (problem.empty() && req->before_load_id() < 0)
    problem = "before_load_id must not be negative (0: from the newest)";
  if (problem.empty() && (req->limit() < 0 || req->limit() > loads_max))
    problem = "limit must be 1.." + std::to_string(loads_max) + " (0: "
              + std::to_string(loads_default) + "); it is " + std::to_string(req->limit());
  auto* pool = db_of(req->feed().seller_id());
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto& ref = req->feed();
    auto loads =
      persistence::list_feed_loads(*pool, ref.seller_id(), ref.namespace_(), req->before_load_id(),
                                   req->limit() == 0 ? loads_default : req->limit());
    if (!loads)
      return to_status(loads.error());
    for (auto& l : *loads)
      to_proto(l, *resp->add_loads());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* feed_service::GetLoad(grpc::CallbackServerContext* ctx,
                                                const v1::GetLoadRequest* req,
                                                v1::GetLoadResponse* resp) {
  auto problem = check_feed_seller("seller_id", req->seller_id());
  if (problem.empty() && req->load_id() <= 0)
    problem = "load_id must be positive (a load id ListLoads or Upload gave)";
  auto* pool = db_of(req->seller_id());
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto load = persistence::get_feed_load(*pool, req->seller_id(), req->load_id());
    if (!load)
      return to_status(load.error());
    to_proto(*load, *resp->mutable_load());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* feed_service::ListErrors(grpc::CallbackServerContext* ctx,
                                                   const v1::ListErrorsRequest* req,
                                                   v1::ListErrorsResponse* resp) {
  auto problem = check_feed_seller("seller_id", req->seller_id());
  if (problem.empty() && req->load_id() <= 0)
    problem = "load_id must be positive (a load id ListLoads or Upload gave)";
  if (problem.empty() && !req->level().empty() && req->level() != "error"
      && req->level() != "warning")
    problem = "level must be error or warning (empty: both), not `" + req->level() + "`";
  if (problem.empty() && req->type().size() > namespace_max)
    problem = "type is " + std::to_string(req->type().size()) + " bytes; at most "
              + std::to_string(namespace_max);
  if (problem.empty() && req->after_error_id() < 0)
    problem = "after_error_id must not be negative";
  uint32_t limit = 0;
  if (problem.empty())
    problem = check_page_size("limit", req->limit(), limits_, limit);
  auto* pool = db_of(req->seller_id());
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto load = persistence::get_feed_load(*pool, req->seller_id(), req->load_id());
    if (!load)
      return to_status(load.error());
    if (!req->include_hidden() && feed_errors_hidden(load->settings)) {
      resp->set_hidden(true); // seed "parsed": the system that sent the file shows them
      return grpc::Status::OK;
    }
    persistence::feed_error_query q;
    q.seller_id = req->seller_id();
    q.load_id = req->load_id();
    q.level = req->level();
    q.type = req->type();
    q.after_external_id = req->after_external_id();
    // A page starts after (after_external_id, after_error_id); from the first when neither.
    q.after_error_id =
      req->after_external_id().empty() && req->after_error_id() == 0 ? -1 : req->after_error_id();
    q.limit = static_cast<int>(limit);
    auto page = persistence::list_feed_errors(*pool, q);
    if (!page)
      return to_status(page.error());
    for (auto& e : page->errors)
      to_proto(e, *resp->add_errors());
    resp->set_total(page->total);
    return grpc::Status::OK;
  });
}

} // namespace gost::runtime
