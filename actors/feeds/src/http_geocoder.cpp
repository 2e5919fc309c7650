// The external geocoder (`feed.geocoder_url`): asked for addresses the gazetteer cannot place.
#include <google/protobuf/util/json_util.h>

#include "gost/core/http_client.hpp"
#include "gost/feeds/unifier.hpp"
#include "gost/v1/geocoder.pb.h"

namespace gost::feeds {

namespace {

std::string url_encoded(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

class http_geocoder final : public geocoder {
public:
  http_geocoder(std::string url, std::chrono::milliseconds timeout, bool allow_private)
    : url_(std::move(url)), timeout_(timeout), allow_private_(allow_private) {}

  answer locate(const std::string& address) const override {
    answer a;
    http::request r;
    r.url =
      url_ + (url_.find('?') == std::string::npos ? "?" : "&") + "address=" + url_encoded(address);
    r.deadline = timeout_;
    r.max_body = 64 << 10;
    r.allow_private = allow_private_;
    auto resp = http::perform(r);
    if (!resp.answered()) {
      a.kind = answer::unavailable;
      a.message = resp.message;
      return a;
    }
    if (resp.status == 404) {
      a.kind = answer::not_found;
      a.message = "not known to the geocoder";
      return a;
    }
    if (!resp.success()) {
      a.kind = answer::unavailable;
      a.message = "the geocoder answered HTTP " + std::to_string(resp.status);
      return a;
    }
    v1::GeocoderAnswer g;
    google::protobuf::util::JsonParseOptions opts;
    opts.ignore_unknown_fields = true;
    if (!google::protobuf::util::JsonStringToMessage(resp.body, &g, opts).ok() || g.geo_id() <= 0) {
      a.kind = answer::unavailable; // a broken answer: the service's trouble, not the offer's
      a.message = "the geocoder's answer is not a gost.v1.GeocoderAnswer with a geo_id";
      return a;
    }
    a.kind = answer::found;
    a.geo_id = g.geo_id();
    a.region_geo_id = g.region_geo_id();
    a.region = g.region();
    a.city = g.city();
    return a;
  }

private:
  std::string url_;
  std::chrono::milliseconds timeout_;
  bool allow_private_;
};

} // namespace

std::shared_ptr<const geocoder>
make_http_geocoder(std::string url, std::chrono::milliseconds timeout, bool allow_private) {
  return std::make_shared<http_geocoder>(std::move(url), timeout, allow_private);
}

} // namespace gost::feeds
