#include "gost/feeds/unifier.hpp"

#include <map>

#include "gost/feeds/catalog.hpp"
#include "gost/feeds/gazetteer.hpp"

namespace gost::feeds {

bool unified::rejected() const {
  if (transient)
    return true;
  for (auto& p : problems)
    if (p.level == problem_level::error)
      return true;
  return false;
}

std::string unified::reason() const {
  for (auto& p : problems)
    if (p.level == problem_level::error)
      return p.field.empty() ? p.message : p.field + ": " + p.message;
  if (transient)
    for (auto& p : problems)
      if (p.type == problem_type::geocoding)
        return "not unified for now (" + p.message + "); the stored offer is kept";
  return {};
}

unifier::unifier(std::shared_ptr<const catalog> cat, std::shared_ptr<const gazetteer> geo,
                 std::shared_ptr<const geocoder> fallback)
  : catalog_(std::move(cat)), gazetteer_(std::move(geo)), fallback_(std::move(fallback)) {}

namespace {

std::string joined_path(const std::vector<std::string>& levels) {
  std::string out;
  for (auto& l : levels)
    out += (out.empty() ? "" : " / ") + l;
  return out;
}

void add(unified& u, problem_type t, problem_level l, std::string field, std::string message) {
  u.problems.push_back({t, l, std::move(field), std::move(message)});
}

void set_place(v1::Address& a, const geo_result& g) {
  a.set_region(g.region);
  a.set_city(g.city);
  a.set_geo_id(g.geo_id);
  a.set_region_geo_id(g.region_geo_id);
}

} // namespace

unified unifier::unify(feed_ad&& ad, const unify_options& opts) const {
  unified u;
  u.problems = std::move(ad.problems);
  auto& o = u.offer;
  o.set_external_id(std::move(ad.external_id));
  o.set_title(std::move(ad.title));
  o.set_description(std::move(ad.description));
  o.set_source(opts.source);
  o.set_status(ad.active ? v1::OFFER_STATUS_ACTIVE : v1::OFFER_STATUS_INACTIVE);
  if (ad.price_minor) {
    o.mutable_price()->set_amount_minor(*ad.price_minor);
    o.mutable_price()->set_currency(ad.currency.empty() ? "RUB" : ad.currency);
  }
  for (size_t i = 0; i < ad.photos.size(); ++i) {
    auto* p = o.add_photos();
    p->set_url(std::move(ad.photos[i]));
    p->set_order(static_cast<int32_t>(i));
  }
  if (!ad.video.empty())
    o.add_videos()->set_url(std::move(ad.video));

  // Category, then its attributes.
  const category* cat = ad.category.empty() ? nullptr : catalog_->find(ad.category);
  if (cat) {
    o.set_category(cat->id);
  } else if (!ad.category.empty()) {
    add(u, problem_type::category, problem_level::error, "category",
        "the category \"" + joined_path(ad.category)
          + "\" is not in the catalog; name one of its categories or a synonym "
            "(docs/feed-format.md)");
  }
  if (cat) {
    // Values of one attribute given several times (Avito option lists) are joined in order.
    std::map<std::string, std::string> values;
    for (auto& [name, value] : ad.attributes) {
      auto r = catalog_->resolve(*cat, name, value);
      if (r.error == attribute_error::unknown_attribute) {
        add(u, problem_type::attribute, problem_level::warning, name,
            r.message.empty() ? "not an attribute of " + cat->path + "; ignored" : r.message);
        continue;
      }
      if (!r) {
        add(u, problem_type::attribute, problem_level::error, name, r.message);
        continue;
      }
      auto& slot = values[r.id];
      if (slot.empty())
        slot = std::move(r.value);
      else if (slot != r.value)
        slot += ", " + r.value;
    }
    for (auto& [id, v] : values)
      (*o.mutable_attributes())[id] = std::move(v);
  }

  // Address: coordinates snap to the nearest place and are kept; a text is geocoded.
  auto* addr = o.mutable_address();
  auto text = !ad.address.empty() ? std::move(ad.address) : opts.default_address;
  addr->set_text(text);
  if (ad.lat && ad.lon) {
    addr->mutable_geo()->set_lat(*ad.lat);
    addr->mutable_geo()->set_lon(*ad.lon);
    auto g = gazetteer_->nearest(*ad.lat, *ad.lon);
    if (g)
      set_place(*addr, g);
    else
      add(u, problem_type::geocoding, problem_level::error, "coordinates", g.error);
  } else if (!text.empty()) {
    auto g = gazetteer_->locate(text);
    if (g) {
      set_place(*addr, g);
    } else if (!fallback_) {
      add(u, problem_type::geocoding, problem_level::error, "address", g.error);
    } else {
      auto a = fallback_->locate(text);
      if (a.kind == geocoder::answer::found) {
        addr->set_region(a.region);
        addr->set_city(a.city);
        addr->set_geo_id(a.geo_id);
        addr->set_region_geo_id(a.region_geo_id);
      } else if (a.kind == geocoder::answer::not_found) {
        add(u, problem_type::geocoding, problem_level::error, "address",
            g.error + "; the geocoder does not know it either");
      } else {
        u.transient = true;
        add(u, problem_type::geocoding, problem_level::warning, "address",
            "the geocoder is unavailable: " + a.message);
      }
    }
  } else {
    add(u, problem_type::geocoding, problem_level::error, "address",
        "the offer has neither an address nor coordinates, and the feed sets no default address");
  }
  if (o.title().empty() && !u.rejected())
    add(u, problem_type::validation, problem_level::error, "title", "the offer has no title");
  return u;
}

} // namespace gost::feeds
