#include "gost/catalog/migration.hpp"

#include <algorithm>
#include <charconv>
#include <set>

namespace gost::catalog {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    auto at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos)
      return out;
    start = at + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.back() == '\r' || s.back() == ' '))
    s = s.front() == ' ' ? s.substr(1) : s.substr(0, s.size() - 1);
  return s;
}

bool parse_int(std::string_view s, int& out) {
  if (s.empty() || s.size() > 9 || s.front() < '0' || s.front() > '9')
    return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

/// The fields each directive takes after its name, and how to write it.
struct directive {
  const char* name;
  size_t fields;
  const char* usage;
};

constexpr directive directives[] = {
  {"version", 2, "version<TAB>FROM<TAB>TO"},
  {"rename-category", 2, "rename-category<TAB>OLD<TAB>NEW"},
  {"merge-categories", 2, "merge-categories<TAB>OLD|OLD|...<TAB>NEW"},
  {"split-category", 3, "split-category<TAB>OLD<TAB>NEW<TAB>ATTRIBUTE=VALUE|VALUE|..."},
  {"rename-attribute", 3, "rename-attribute<TAB>CATEGORY or *<TAB>OLD<TAB>NEW"},
  {"map-value", 4, "map-value<TAB>CATEGORY or *<TAB>ATTRIBUTE<TAB>OLD<TAB>NEW"},
};

} // namespace

parse_result migration::parse(std::string_view text, std::string_view file) {
  migration m;
  int line_no = 0;
  auto fail = [&](const std::string& what) {
    parse_result r;
    r.error = std::string{file} + (line_no > 0 ? ":" + std::to_string(line_no) : "") + ": " + what;
    return r;
  };
  std::set<std::string> new_categories; // targets, which may not be moved again in this file
  std::set<std::string> split_sources;
  for (auto line : split(text, '\n')) {
    ++line_no;
    auto bare = trim(line);
    if (bare.empty() || bare.front() == '#')
      continue;
    auto f = split(bare, '\t');
    for (auto& x : f)
      x = trim(x);
    const directive* d = nullptr;
    for (auto& cand : directives)
      if (f[0] == cand.name)
        d = &cand;
    if (d == nullptr)
      return fail("unknown directive `" + std::string{f[0]}
                  + "` (version, rename-category, merge-categories, split-category, "
                    "rename-attribute, map-value; fields separated by tabs)");
    if (f.size() != d->fields + 1)
      return fail(std::string{d->name} + " takes " + std::to_string(d->fields) + " fields, found "
                  + std::to_string(f.size() - 1) + ": write " + d->usage);
    for (size_t i = 1; i < f.size(); ++i)
      if (f[i].empty())
        return fail(std::string{"field "} + std::to_string(i) + " of " + d->name
                    + " is empty: write " + d->usage);
    std::string_view name = d->name;
    if (name != "version" && m.to_ == 0)
      return fail("the first directive must be `version<TAB>FROM<TAB>TO`");
    if (name == "version") {
      if (m.to_ != 0)
        return fail("a second `version` line: one migration per file");
      if (!parse_int(f[1], m.from_) || !parse_int(f[2], m.to_) || m.from_ < 1)
        return fail("version numbers are whole numbers from 1: write version<TAB>1<TAB>2");
      if (m.to_ != m.from_ + 1)
        return fail("a migration leads to the next version: TO must be FROM + 1 (found "
                    + std::string{f[1]} + " -> " + std::string{f[2]} + ")");
      continue;
    }
    auto moved_once = [&](const std::string& old) -> std::string {
      if (m.renames_.count(old) || split_sources.count(old))
        return "category `" + old + "` is already moved by an earlier line";
      return {};
    };
    if (name == "rename-category" || name == "merge-categories") {
      std::string to{f[2]};
      auto olds = split(f[1], '|');
      if (name == "rename-category" && olds.size() != 1)
        return fail("rename-category moves one category; several into one is merge-categories");
      if (name == "merge-categories" && olds.size() < 2)
        return fail("merge-categories needs at least two old categories separated by |");
      for (auto o : olds) {
        std::string old{trim(o)};
        if (old.empty())
          return fail("an empty category name in `" + std::string{f[1]} + "`");
        if (old == to)
          return fail("category `" + old + "` is moved to itself");
        if (auto e = moved_once(old); !e.empty())
          return fail(e);
        m.renames_[old] = to;
      }
      new_categories.insert(to);
      continue;
    }
    if (name == "split-category") {
      std::string old{f[1]};
      if (m.renames_.count(old))
        return fail("category `" + old + "` is already moved by an earlier line");
      auto cond = f[3];
      auto eq = cond.find('=');
      if (eq == std::string_view::npos || eq == 0 || eq + 1 == cond.size())
        return fail("the split's condition must be ATTRIBUTE=VALUE|VALUE|..., found `"
                    + std::string{cond} + "`");
      split_target t;
      t.category = std::string{f[2]};
      t.attribute = std::string{trim(cond.substr(0, eq))};
      for (auto v : split(cond.substr(eq + 1), '|')) {
        if (trim(v).empty())
          return fail("an empty value in the split's condition `" + std::string{cond} + "`");
        t.values.emplace_back(trim(v));
      }
      auto& targets = m.splits_[old];
      for (auto& other : targets)
        if (other.category == t.category)
          return fail("category `" + old + "` is split into `" + t.category
                      + "` twice; put every value in one condition");
      targets.push_back(std::move(t));
      split_sources.insert(old);
      new_categories.insert(std::string{f[2]});
      continue;
    }
    if (name == "rename-attribute") {
      std::string cat{f[1]}, old{f[2]}, to{f[3]};
      if (old == to)
        return fail("attribute `" + old + "` is renamed to itself");
      auto [it, fresh] = m.attr_renames_.emplace(std::make_pair(cat, old), to);
      if (!fresh)
        return fail("attribute `" + old + "` of `" + cat + "` is already renamed to `" + it->second
                    + "`");
      continue;
    }
    // map-value
    std::string cat{f[1]}, attr{f[2]}, old{f[3]}, to{f[4]};
    auto [it, fresh] = m.values_.emplace(std::make_tuple(cat, attr, old), to);
    if (!fresh)
      return fail("value `" + old + "` of `" + attr + "` in `" + cat + "` is already mapped to `"
                  + it->second + "`");
  }
  if (m.to_ == 0) {
    line_no = 0;
    return fail("no `version<TAB>FROM<TAB>TO` line: the file says nothing");
  }
  // A name that is moved away cannot also be a target (an offer would move twice by one file).
  for (auto& c : new_categories)
    if (m.renames_.count(c) || m.splits_.count(c)) {
      line_no = 0;
      return fail("category `" + c
                  + "` is both moved away and a target; chains belong in successive versions");
    }
  parse_result r;
  r.value = std::move(m);
  return r;
}

apply_result migration::apply(v1::Offer& offer) const {
  auto category = offer.category();
  auto attrs = offer.attributes(); // a copy: the offer is left alone when ambiguous
  auto ambiguous = [](std::string why) { return apply_result{outcome::ambiguous, std::move(why)}; };

  if (auto r = renames_.find(category); r != renames_.end()) {
    category = r->second;
  } else if (auto s = splits_.find(category); s != splits_.end()) {
    std::vector<const split_target*> matches;
    std::string seen;
    for (auto& t : s->second) {
      auto a = attrs.find(t.attribute);
      if (seen.find(t.attribute + "=") == std::string::npos)
        seen += (seen.empty() ? "" : ", ") + t.attribute + "="
                + (a == attrs.end() ? std::string{"(none)"} : a->second);
      if (a == attrs.end())
        continue;
      for (auto& v : t.values)
        if (a->second == v) {
          matches.push_back(&t);
          break;
        }
    }
    if (matches.size() != 1) {
      std::string why = "split of `" + category + "`: ";
      if (matches.empty())
        return ambiguous(why + "no rule matches " + seen);
      why += "rules for";
      for (auto* t : matches)
        why += " `" + t->category + "`";
      return ambiguous(why + " all match " + seen);
    }
    category = matches.front()->category;
  }

  // Attribute renames: the category's own rule, else the `*` one.
  std::vector<std::pair<std::string, std::string>> renames; // old -> new present in the offer
  for (auto& [name, value] : attrs) {
    auto r = attr_renames_.find({category, name});
    if (r == attr_renames_.end())
      r = attr_renames_.find({"*", name});
    if (r != attr_renames_.end())
      renames.emplace_back(name, r->second);
  }
  for (auto& [old, to] : renames) {
    auto value = attrs.at(old);
    if (auto has = attrs.find(to); has != attrs.end() && has->second != value) {
      bool renamed_too = false; // `to` itself moves on by another rename of this file
      for (auto& other : renames)
        renamed_too = renamed_too || other.first == to;
      if (!renamed_too)
        return ambiguous("attribute `" + old + "` becomes `" + to + "`, but the offer has both (`"
                         + value + "` and `" + has->second + "`)");
    }
  }
  if (!renames.empty()) {
    google::protobuf::Map<std::string, std::string> next;
    for (auto& [name, value] : attrs) {
      auto to = name;
      for (auto& [o, t] : renames)
        if (o == name)
          to = t;
      next[to] = value;
    }
    attrs = std::move(next);
  }
  for (auto& [name, value] : attrs) {
    auto v = values_.find({category, name, value});
    if (v == values_.end())
      v = values_.find({"*", name, value});
    if (v != values_.end())
      value = v->second;
  }

  bool moved = category != offer.category();
  if (!moved) {
    moved = attrs.size() != static_cast<size_t>(offer.attributes().size());
    for (auto& [name, value] : attrs) {
      auto was = offer.attributes().find(name);
      moved = moved || was == offer.attributes().end() || was->second != value;
    }
  }
  if (!moved)
    return {};
  offer.set_category(category);
  *offer.mutable_attributes() = std::move(attrs);
  return {outcome::moved, {}};
}

std::string evolution::check(const std::vector<migration>& steps) {
  for (size_t i = 1; i < steps.size(); ++i)
    if (steps[i].from() != steps[i - 1].to())
      return "catalog versions must follow each other: after the migration to version "
             + std::to_string(steps[i - 1].to()) + " comes one from "
             + std::to_string(steps[i].from());
  return {};
}

evolution::evolution(std::vector<migration> steps) : steps_(std::move(steps)) {}

evolution::result evolution::apply(v1::Offer& offer, int from) const {
  result r;
  r.version = std::max(from, base());
  for (auto& step : steps_) {
    if (step.from() < r.version)
      continue;
    auto a = step.apply(offer);
    if (a.what == outcome::ambiguous) {
      r.what = outcome::ambiguous;
      r.stuck_at = step.to();
      r.reason = std::move(a.reason);
      return r;
    }
    if (a.what == outcome::moved)
      r.what = outcome::moved;
    r.version = step.to();
  }
  return r;
}

} // namespace gost::catalog
