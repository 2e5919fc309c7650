#include "rpc/proto_types.hpp"

#include <cstdio>
#include <functional>
#include <map>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor_database.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

namespace gost::runtime::rpc {

namespace pb = google::protobuf;

namespace {

constexpr const char* url_prefix = "type.googleapis.com";

std::string type_name_of(const std::string& type_url) {
  auto slash = type_url.rfind('/');
  return slash == std::string::npos ? type_url : type_url.substr(slash + 1);
}

std::string message_json(const pb::Message& m) {
  std::string out;
  pb::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  if (!pb::util::MessageToJsonString(m, &out, o).ok())
    out = "{" + m.ShortDebugString() + "}";
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

/// One value of field `f` of `m` (element `i` of a repeated field, or -1) as JSON.
std::string value_text(const pb::Message& m, const pb::FieldDescriptor* f, int i) {
  const auto* r = m.GetReflection();
  using T = pb::FieldDescriptor;
  bool rep = i >= 0;
  switch (f->cpp_type()) {
    case T::CPPTYPE_INT32:
      return std::to_string(rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f));
    case T::CPPTYPE_INT64:
      return std::to_string(rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f));
    case T::CPPTYPE_UINT32:
      return std::to_string(rep ? r->GetRepeatedUInt32(m, f, i) : r->GetUInt32(m, f));
    case T::CPPTYPE_UINT64:
      return std::to_string(rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f));
    case T::CPPTYPE_DOUBLE: return number(rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f));
    case T::CPPTYPE_FLOAT: return number(rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f));
    case T::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f)) ? "true" : "false";
    case T::CPPTYPE_ENUM: {
      auto* v = rep ? r->GetRepeatedEnum(m, f, i) : r->GetEnum(m, f);
      return json_quoted(v->name());
    }
    case T::CPPTYPE_STRING: {
      auto s = rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
      if (f->type() == T::TYPE_BYTES)
        return "(" + std::to_string(s.size()) + " bytes)";
      return json_quoted(s);
    }
    case T::CPPTYPE_MESSAGE:
      return message_json(rep ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f));
  }
  return {};
}

/// Compared whole: the well-known types (a Timestamp is one value, not seconds and nanos).
bool leaf_message(const pb::Descriptor* d) {
  return d->file()->package() == "google.protobuf";
}

void diff_into(const pb::Message& a, const pb::Message& b, const std::string& prefix,
               const std::set<std::string>* skip, std::vector<field_change>& out);

void diff_element(const pb::Message& a, const pb::Message& b, const pb::FieldDescriptor* f, int ia,
                  int ib, const std::string& path, std::vector<field_change>& out) {
  if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && !leaf_message(f->message_type())) {
    const auto& ma = ia >= 0 ? a.GetReflection()->GetRepeatedMessage(a, f, ia)
                             : a.GetReflection()->GetMessage(a, f);
    const auto& mb = ib >= 0 ? b.GetReflection()->GetRepeatedMessage(b, f, ib)
                             : b.GetReflection()->GetMessage(b, f);
    diff_into(ma, mb, path + ".", nullptr, out);
    return;
  }
  auto before = value_text(a, f, ia);
  auto after = value_text(b, f, ib);
  if (before != after)
    out.push_back({path, field_change::kind::changed, std::move(before), std::move(after)});
}

/// Map entries by their key's text.
std::map<std::string, int> map_index(const pb::Message& m, const pb::FieldDescriptor* f) {
  std::map<std::string, int> out;
  const auto* r = m.GetReflection();
  auto* key = f->message_type()->map_key();
  for (int i = 0; i < r->FieldSize(m, f); ++i)
    out[value_text(r->GetRepeatedMessage(m, f, i), key, -1)] = i;
  return out;
}

void diff_field(const pb::Message& a, const pb::Message& b, const pb::FieldDescriptor* f,
                const std::string& path, std::vector<field_change>& out) {
  const auto* ra = a.GetReflection();
  const auto* rb = b.GetReflection();
  using kind = field_change::kind;
  if (f->is_map()) {
    auto ka = map_index(a, f);
    auto kb = map_index(b, f);
    auto* value = f->message_type()->map_value();
    for (auto& [k, i] : ka) {
      auto at = path + "[" + k + "]";
      auto j = kb.find(k);
      if (j == kb.end())
        out.push_back(
          {at, kind::removed, value_text(ra->GetRepeatedMessage(a, f, i), value, -1), {}});
      else
        diff_element(ra->GetRepeatedMessage(a, f, i), rb->GetRepeatedMessage(b, f, j->second),
                     value, -1, -1, at, out);
    }
    for (auto& [k, j] : kb)
      if (ka.count(k) == 0)
        out.push_back({path + "[" + k + "]",
                       kind::added,
                       {},
                       value_text(rb->GetRepeatedMessage(b, f, j), value, -1)});
    return;
  }
  if (f->is_repeated()) {
    int na = ra->FieldSize(a, f);
    int nb = rb->FieldSize(b, f);
    for (int i = 0; i < std::min(na, nb); ++i)
      diff_element(a, b, f, i, i, path + "[" + std::to_string(i) + "]", out);
    for (int i = nb; i < na; ++i)
      out.push_back({path + "[" + std::to_string(i) + "]", kind::removed, value_text(a, f, i), {}});
    for (int i = na; i < nb; ++i)
      out.push_back({path + "[" + std::to_string(i) + "]", kind::added, {}, value_text(b, f, i)});
    return;
  }
  if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    bool ha = ra->HasField(a, f);
    bool hb = rb->HasField(b, f);
    if (!ha && !hb)
      return;
    if (ha && !hb) {
      out.push_back({path, kind::removed, value_text(a, f, -1), {}});
      return;
    }
    if (!ha && hb) {
      out.push_back({path, kind::added, {}, value_text(b, f, -1)});
      return;
    }
  }
  diff_element(a, b, f, -1, -1, path, out);
}

void diff_into(const pb::Message& a, const pb::Message& b, const std::string& prefix,
               const std::set<std::string>* skip, std::vector<field_change>& out) {
  const auto* d = a.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (skip != nullptr && skip->count(f->name()) != 0)
      continue;
    diff_field(a, b, f, prefix + f->name(), out);
  }
}

} // namespace

std::string json_quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

pb::FileDescriptorSet files_of(const std::vector<const pb::Descriptor*>& types) {
  pb::FileDescriptorSet out;
  std::set<std::string> seen;
  std::function<void(const pb::FileDescriptor*)> add = [&](const pb::FileDescriptor* f) {
    if (!seen.insert(f->name()).second)
      return;
    for (int i = 0; i < f->dependency_count(); ++i)
      add(f->dependency(i));
    f->CopyTo(out.add_file());
  };
  for (auto* t : types)
    if (t != nullptr)
      add(t->file());
  return out;
}

type_pool::type_pool(const pb::FileDescriptorSet& files)
  : db_(std::make_unique<pb::SimpleDescriptorDatabase>()) {
  for (auto& f : files.file())
    if (!db_->Add(f) && problem_.empty())
      problem_ = "file " + f.name() + " could not be added (defined twice, differently)";
  // Built lazily from the database: the files may come in any order.
  pool_ = std::make_unique<pb::DescriptorPool>(db_.get());
  factory_ = std::make_unique<pb::DynamicMessageFactory>(pool_.get());
  resolver_.reset(pb::util::NewTypeResolverForDescriptorPool(url_prefix, pool_.get()));
}

type_pool::~type_pool() = default;

const pb::Descriptor* type_pool::find(const std::string& type_url) const {
  return pool_->FindMessageTypeByName(type_name_of(type_url));
}

std::unique_ptr<pb::Message> type_pool::decode(const pb::Any& any) const {
  const auto* d = find(any.type_url());
  if (d == nullptr)
    return nullptr;
  const auto* proto = factory_->GetPrototype(d);
  if (proto == nullptr)
    return nullptr;
  std::unique_ptr<pb::Message> m{proto->New()};
  if (!m->ParseFromString(any.value()))
    return nullptr;
  return m;
}

bool type_pool::to_json(const pb::Any& any, std::string& out, bool pretty) const {
  if (find(any.type_url()) == nullptr)
    return false;
  pb::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.add_whitespace = pretty;
  out.clear();
  auto url = std::string{url_prefix} + "/" + type_name_of(any.type_url());
  return pb::util::BinaryToJsonString(resolver_.get(), url, any.value(), &out, o).ok();
}

namespace {

/// The first key of `value` (a JSON object parsed as a Struct) that is no field of `d`, as a
/// path (`deposit.amount`), with the fields `d` (or the nested message) has; empty when every
/// key names a field. Keys may be the .proto names or their JSON (lowerCamel) names.
std::string unknown_field(const pb::Descriptor* d, const pb::Struct& value,
                          const std::string& prefix) {
  for (auto& [key, v] : value.fields()) {
    const auto* f = d->FindFieldByName(key);
    for (int i = 0; f == nullptr && i < d->field_count(); ++i)
      if (d->field(i)->json_name() == key)
        f = d->field(i);
    if (f == nullptr) {
      std::string known;
      for (int i = 0; i < d->field_count(); ++i)
        known += (i > 0 ? ", " : "") + d->field(i)->name();
      return "`" + prefix + key + "` is not a field of " + d->full_name()
             + " (its fields: " + (known.empty() ? std::string{"none"} : known) + ")";
    }
    if (f->type() == pb::FieldDescriptor::TYPE_MESSAGE && !f->is_map() && !f->is_repeated()
        && v.has_struct_value() && f->message_type()->file()->package() != "google.protobuf")
      if (auto inner = unknown_field(f->message_type(), v.struct_value(), prefix + key + ".");
          !inner.empty())
        return inner;
  }
  return {};
}

} // namespace

std::string type_pool::from_json(const std::string& type, const std::string& json,
                                 pb::Any& out) const {
  const auto* d = find(type);
  const auto* proto = d == nullptr ? nullptr : factory_->GetPrototype(d);
  if (proto == nullptr)
    return "type " + type_name_of(type) + " is not among the types the node published";
  std::unique_ptr<pb::Message> m{proto->New()};
  auto st = pb::util::JsonStringToMessage(json, m.get());
  if (st.ok()) {
    out.set_type_url(std::string{url_prefix} + "/" + d->full_name());
    out.set_value(m->SerializeAsString());
    return {};
  }
  // protobuf names a value that does not fit, not always a key the type lacks: find that.
  pb::Struct keys;
  if (pb::util::JsonStringToMessage(json, &keys).ok())
    if (auto unknown = unknown_field(d, keys, ""); !unknown.empty())
      return unknown;
  return std::string{st.message()}; // names the field: (deposit.amount_minor): invalid value
                                    // "x" for type TYPE_INT64
}

std::string type_pool::render(const pb::Any& any, bool pretty) const {
  std::string out;
  if (to_json(any, out, pretty))
    return out;
  return (any.type_url().empty() ? std::string{"(no type URL)"} : any.type_url()) + " ("
         + std::to_string(any.value().size()) + " bytes, type not published by the node)";
}

std::vector<field_change> diff_messages(const pb::Message& before, const pb::Message& after,
                                        const std::set<std::string>& skip) {
  std::vector<field_change> out;
  if (before.GetDescriptor()->full_name() != after.GetDescriptor()->full_name())
    return {{"", field_change::kind::changed, before.GetDescriptor()->full_name(),
             after.GetDescriptor()->full_name()}};
  diff_into(before, after, "", &skip, out);
  return out;
}

std::string to_string(const field_change& c) {
  switch (c.what) {
    case field_change::kind::added: return c.path + " added: " + c.after;
    case field_change::kind::removed: return c.path + " removed: " + c.before;
    case field_change::kind::changed: break;
  }
  return c.path + ": " + c.before + " -> " + c.after;
}

} // namespace gost::runtime::rpc
