#include <fstream>
#include <sstream>

#include "gost/feeds/catalog.hpp"
#include "gost/feeds/gazetteer.hpp"
#include "gost/feeds/unifier.hpp"

namespace gost::feeds {

namespace fs = std::filesystem;

namespace {

constexpr const char* files[] = {"categories.tsv", "attributes.tsv", "gazetteer.tsv"};

bool read_file(const fs::path& p, std::string& out, std::string& error) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    error = "cannot read " + p.string();
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

} // namespace

unification_data::unification_data(std::shared_ptr<const geocoder> fallback)
  : fallback_(std::move(fallback)) {
  current_ = std::make_shared<const unifier>(
    std::shared_ptr<const catalog>(&catalog::builtin(), [](const catalog*) {}),
    std::shared_ptr<const gazetteer>(&gazetteer::builtin(), [](const gazetteer*) {}), fallback_);
}

std::shared_ptr<unification_data>
unification_data::from_dir(const std::string& dir, std::shared_ptr<const geocoder> fallback,
                           std::string& error) {
  auto d = std::make_shared<unification_data>(std::move(fallback));
  d->dir_ = dir;
  if (!d->load(error))
    return nullptr;
  return d;
}

std::shared_ptr<const unifier> unification_data::current() const {
  std::lock_guard<std::mutex> g{mtx_};
  return current_;
}

bool unification_data::load(std::string& error) {
  std::vector<fs::file_time_type> stamps;
  std::string text[3];
  for (int i = 0; i < 3; ++i) {
    auto p = fs::path{dir_} / files[i];
    std::error_code ec;
    stamps.push_back(fs::last_write_time(p, ec));
    if (ec) {
      error = "cannot read " + p.string() + ": " + ec.message();
      return false;
    }
    if (!read_file(p, text[i], error))
      return false;
  }
  // Broken files are tried again only once they change again (no error line every check).
  auto refuse = [&](const std::string& why) {
    std::lock_guard<std::mutex> g{mtx_};
    stamps_ = stamps;
    error = dir_ + "/" + why;
    return false;
  };
  auto cat = catalog::parse(text[0], text[1]);
  if (!cat)
    return refuse(cat.error);
  auto geo = gazetteer::parse(text[2]);
  if (!geo)
    return refuse(geo.error);
  auto u = std::make_shared<const unifier>(std::make_shared<const catalog>(std::move(*cat.value)),
                                           std::make_shared<const gazetteer>(std::move(*geo.value)),
                                           fallback_);
  std::lock_guard<std::mutex> g{mtx_};
  current_ = std::move(u);
  stamps_ = std::move(stamps);
  return true;
}

bool unification_data::reload_if_changed(std::string& error) {
  if (dir_.empty())
    return false;
  bool changed = false;
  {
    std::lock_guard<std::mutex> g{mtx_};
    for (size_t i = 0; i < 3; ++i) {
      std::error_code ec;
      auto t = fs::last_write_time(fs::path{dir_} / files[i], ec);
      changed = changed || ec || i >= stamps_.size() || t != stamps_[i];
    }
  }
  return changed && load(error);
}

} // namespace gost::feeds
