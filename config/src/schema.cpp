#include "gost/config/schema.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gost::config {

namespace {

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool parse_int(const std::string& s, int64_t& out) {
  if (s.empty())
    return false;
  size_t pos = 0;
  try {
    out = std::stoll(s, &pos, 10);
  } catch (const std::exception&) {
    return false;
  }
  return pos == s.size();
}

// "250ms", "5s", "2m", "1h"; a bare number is rejected so nobody guesses the unit.
bool parse_duration_ms(const std::string& s, int64_t& out) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
    ++i;
  int64_t n = 0;
  if (i == 0 || !parse_int(s.substr(0, i), n))
    return false;
  auto unit = s.substr(i);
  if (unit == "ms")
    out = n;
  else if (unit == "s")
    out = n * 1000;
  else if (unit == "m")
    out = n * 60'000;
  else if (unit == "h")
    out = n * 3'600'000;
  else if (unit == "d")
    out = n * 86'400'000;
  else
    return false;
  return true;
}

bool parse_size(const std::string& s, int64_t& out) {
  if (s.empty())
    return false;
  int64_t mult = 1;
  auto body = s;
  switch (std::tolower(static_cast<unsigned char>(s.back()))) {
    case 'k':
      mult = 1024;
      body.pop_back();
      break;
    case 'm':
      mult = 1024 * 1024;
      body.pop_back();
      break;
    case 'g':
      mult = 1024LL * 1024 * 1024;
      body.pop_back();
      break;
    default: break;
  }
  int64_t n = 0;
  if (!parse_int(body, n))
    return false;
  out = n * mult;
  return true;
}

std::string bound_text(const key_spec& k, int64_t v) {
  switch (k.kind) {
    case value_kind::duration: return std::to_string(v) + "ms";
    case value_kind::size:
      // As a user would write it: 64k rather than 65536.
      for (auto [unit, mult] : {std::pair{"g", 1LL << 30}, {"m", 1LL << 20}, {"k", 1LL << 10}})
        if (v != 0 && v % mult == 0)
          return std::to_string(v / mult) + unit;
      return std::to_string(v);
    default: return std::to_string(v);
  }
}

std::string allowed_text(const key_spec& k) {
  std::string out;
  switch (k.kind) {
    case value_kind::string:
      if (!k.choices.empty()) {
        out = "one of";
        for (auto& c : k.choices)
          out += " " + c;
      } else {
        out = "text";
      }
      return out;
    case value_kind::boolean: return "true or false";
    case value_kind::duration: out = "a duration like 250ms, 5s, 2m, 1h, 180d"; break;
    case value_kind::size: out = "a size in bytes, k/m/g suffixes allowed"; break;
    case value_kind::integer: out = "an integer"; break;
  }
  if (k.min && k.max)
    out += " in [" + bound_text(k, *k.min) + ", " + bound_text(k, *k.max) + "]";
  else if (k.min)
    out += " >= " + bound_text(k, *k.min);
  else if (k.max)
    out += " <= " + bound_text(k, *k.max);
  return out;
}

} // namespace

const char* to_string(value_kind k) {
  switch (k) {
    case value_kind::string: return "string";
    case value_kind::integer: return "integer";
    case value_kind::boolean: return "boolean";
    case value_kind::duration: return "duration";
    case value_kind::size: return "size";
  }
  return "?";
}

std::string key_spec::env_name() const {
  std::string out = "GOST_";
  for (char c : name)
    out +=
      (c == '.' || c == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

schema& schema::add(key_spec spec) {
  if (find(spec.name) != nullptr)
    throw std::logic_error("config key declared twice: " + spec.name);
  std::string err;
  if (!parse(spec, spec.default_value, "default", err))
    throw std::logic_error("bad default: " + err);
  keys_.push_back(std::move(spec));
  return *this;
}

const key_spec* schema::find(std::string_view name) const {
  for (auto& k : keys_)
    if (k.name == name)
      return &k;
  return nullptr;
}

std::optional<value> schema::parse(const key_spec& spec, const std::string& raw, std::string source,
                                   std::string& error) {
  value v;
  v.text = raw;
  v.source = std::move(source);
  bool ok = true;
  switch (spec.kind) {
    case value_kind::string:
      if (!spec.choices.empty())
        ok = std::find(spec.choices.begin(), spec.choices.end(), raw) != spec.choices.end();
      break;
    case value_kind::boolean: {
      auto l = lower(raw);
      if (l == "true" || l == "1" || l == "yes" || l == "on")
        v.number = 1;
      else if (l == "false" || l == "0" || l == "no" || l == "off")
        v.number = 0;
      else
        ok = false;
      break;
    }
    case value_kind::integer: ok = parse_int(raw, v.number); break;
    case value_kind::duration: ok = parse_duration_ms(raw, v.number); break;
    case value_kind::size: ok = parse_size(raw, v.number); break;
  }
  if (ok && spec.kind != value_kind::string && spec.kind != value_kind::boolean) {
    if ((spec.min && v.number < *spec.min) || (spec.max && v.number > *spec.max))
      ok = false;
  }
  if (!ok) {
    error = "config key `" + spec.name + "` = \"" + raw + "\" (" + v.source
            + ") is invalid: expected " + allowed_text(spec);
    return std::nullopt;
  }
  if (spec.check) {
    if (auto problem = spec.check(raw); !problem.empty()) {
      error = "config key `" + spec.name + "` = \"" + raw + "\" (" + v.source
              + ") is invalid: " + problem;
      return std::nullopt;
    }
  }
  return v;
}

std::string schema::reference_markdown(const std::string& program) const {
  std::ostringstream out;
  out << "# " << program << " configuration reference\n\n"
      << "<!-- Generated by `cmake --build <build-dir> --target config-docs` from the schema in\n"
      << "     config/src/node_config.cpp. Do not edit by hand. -->\n\n"
      << "Values are read in this order, later ones winning: the defaults below, the file given\n"
      << "by `--config FILE` (or `GOST_CONFIG`), `GOST_*` environment variables, and\n"
      << "`--key=value` arguments. Unknown keys and out-of-range values stop the node with a\n"
      << "message naming the key. The file is INI: `[pg]` followed by `dsn = \"...\"` sets\n"
      << "`pg.dsn`; `;` and `#` start comments. Every key is read once, when the node starts:\n"
      << "changing one takes a restart (nothing reloads configuration).\n\n"
      << "An application built on gost (`gost::node_builder`) reads these keys and one more\n"
      << "for each stage it registers: `stages.<id>.enabled` (boolean, default `true`; false:\n"
      << "the node does not run that stage). Its own `--help` and `--config-reference` list\n"
      << "them, after the built-in stages' keys.\n\n"
      << "| key | type | default | allowed | env | description |\n"
      << "|---|---|---|---|---|---|\n";
  for (auto& k : keys_) {
    out << "| `" << k.name << "` | " << to_string(k.kind) << " | "
        << (k.default_value.empty() ? "(empty)" : "`" + k.default_value + "`") << " | "
        << allowed_text(k) << " | `" << k.env_name() << "` | " << k.description << " |\n";
  }
  return out.str();
}

std::string schema::help_text() const {
  std::ostringstream out;
  for (auto& k : keys_) {
    out << "  --" << k.name << "=<" << to_string(k.kind)
        << ">  (default: " << (k.default_value.empty() ? "empty" : k.default_value) << "; "
        << allowed_text(k) << "; env " << k.env_name() << ")\n      " << k.description << "\n";
  }
  return out.str();
}

settings::settings(const schema& s, std::string program)
  : schema_(s), program_(std::move(program)) {
  std::string err;
  for (auto& k : s.keys())
    values_.emplace(k.name, *schema::parse(k, k.default_value, "default", err));
}

bool settings::set(const std::string& name, const std::string& text, const std::string& source,
                   std::string& error) {
  auto spec = schema_.find(name);
  if (spec == nullptr) {
    error = "unknown config key `" + name + "` (" + source + "); see `" + program_
            + " --help` for the keys";
    return false;
  }
  auto v = schema::parse(*spec, text, source, error);
  if (!v)
    return false;
  values_[name] = std::move(*v);
  return true;
}

bool settings::load_file(const std::string& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read config file " + path + " (given by --config or GOST_CONFIG)";
    return false;
  }
  std::string line;
  std::string section;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    auto where = "file " + path + ":" + std::to_string(lineno);
    auto t = trim(line);
    if (t.empty() || t[0] == ';' || t[0] == '#')
      continue;
    if (t.front() == '[') {
      if (t.back() != ']') {
        error = "malformed section header at " + where + ": " + t;
        return false;
      }
      section = trim(t.substr(1, t.size() - 2));
      continue;
    }
    auto eq = t.find('=');
    if (eq == std::string::npos) {
      error = "expected `key = value` at " + where + ", got: " + t;
      return false;
    }
    auto key = trim(t.substr(0, eq));
    auto val = trim(t.substr(eq + 1));
    if (!val.empty() && val.front() == '"') {
      auto close = val.find('"', 1);
      if (close == std::string::npos) {
        error = "unterminated string at " + where;
        return false;
      }
      auto rest = trim(val.substr(close + 1));
      if (!rest.empty() && rest[0] != ';' && rest[0] != '#') {
        error = "unexpected text after string at " + where + ": " + rest;
        return false;
      }
      val = val.substr(1, close - 1);
    } else {
      auto c = val.find_first_of(";#");
      if (c != std::string::npos)
        val = trim(val.substr(0, c));
    }
    auto full = section.empty() ? key : section + "." + key;
    if (!set(full, val, where, error))
      return false;
  }
  return true;
}

bool settings::load_env(char** envp, std::string& error) {
  if (envp == nullptr)
    return true;
  for (auto& k : schema_.keys()) {
    auto name = k.env_name();
    for (char** e = envp; *e != nullptr; ++e) {
      std::string_view kv{*e};
      if (kv.size() > name.size() && kv.compare(0, name.size(), name) == 0
          && kv[name.size()] == '=') {
        if (!set(k.name, std::string{kv.substr(name.size() + 1)}, "env " + name, error))
          return false;
      }
    }
  }
  return true;
}

const value& settings::get(std::string_view name) const {
  auto i = values_.find(name);
  if (i == values_.end())
    throw std::logic_error("config key read but not declared: " + std::string{name});
  return i->second;
}

std::string settings::dump() const {
  std::ostringstream out;
  for (auto& k : schema_.keys()) {
    auto& v = values_.at(k.name);
    auto shown = v.text.empty() ? std::string{"\"\""} : k.secret ? "(set, not shown)" : v.text;
    out << k.name << " = " << shown << "  (" << v.source << ")\n";
  }
  return out.str();
}

} // namespace gost::config
