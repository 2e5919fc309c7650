#pragma once
// Protobuf types as the console shows them (issue 13, items 3 and 8). A node publishes the
// files of its stage states and actor types (`files_of`, AdminService.DescribeTypes); a client
// builds a `type_pool` from what the node sent — not from the types it was built with — and
// renders any `google.protobuf.Any` as JSON, or diffs two messages field by field. The node
// keeps a pool of its own for the same (OfferHistory, the web page).
//
// Library `gost_proto_types`: linked by gost_runtime and gostctl; protobuf only.

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/any.pb.h>
#include <google/protobuf/descriptor.pb.h>

namespace google::protobuf {
class DescriptorPool;
class DynamicMessageFactory;
class SimpleDescriptorDatabase;
namespace util {
class TypeResolver;
}
} // namespace google::protobuf

namespace gost::runtime::rpc {

/// The files defining `types` and all their dependencies, each once, dependencies first.
google::protobuf::FileDescriptorSet
files_of(const std::vector<const google::protobuf::Descriptor*>& types);

/// Messages of the types in a FileDescriptorSet, decoded and rendered without generated code.
/// Immutable after construction; safe to share between threads.
class type_pool {
public:
  explicit type_pool(const google::protobuf::FileDescriptorSet& files);
  ~type_pool();
  type_pool(const type_pool&) = delete;
  type_pool& operator=(const type_pool&) = delete;

  /// The message type of a type URL (`type.googleapis.com/pkg.Name`) or full name; null when
  /// the files do not define it.
  const google::protobuf::Descriptor* find(const std::string& type_url) const;

  /// The Any's content as a message of its type; null when the type is unknown or the bytes do
  /// not parse as it.
  std::unique_ptr<google::protobuf::Message> decode(const google::protobuf::Any& any) const;

  /// The Any's content as JSON (proto3 mapping, field names as in the .proto; nested Anys
  /// decoded too) into `out`; false when its type is unknown or its bytes do not parse.
  bool to_json(const google::protobuf::Any& any, std::string& out, bool pretty = false) const;

  /// JSON as to_json, or, when that fails, `TYPE_URL (N bytes, type not published by the node)`.
  std::string render(const google::protobuf::Any& any, bool pretty = false) const;

  /// `json` (proto3 JSON) as a message of `type` (a full name or type URL), packed into `out`
  /// as an Any. Empty on success; otherwise what is wrong, naming the field: one the type does
  /// not have (with the fields it has), or the field whose value does not fit (protobuf's
  /// message, the field's path in parentheses).
  std::string from_json(const std::string& type, const std::string& json,
                        google::protobuf::Any& out) const;

  /// A file that could not be added (a duplicate name with other content); empty when none.
  const std::string& problem() const noexcept { return problem_; }

private:
  std::unique_ptr<google::protobuf::SimpleDescriptorDatabase> db_;
  std::unique_ptr<google::protobuf::DescriptorPool> pool_;
  std::unique_ptr<google::protobuf::DynamicMessageFactory> factory_;
  std::unique_ptr<google::protobuf::util::TypeResolver> resolver_;
  std::string problem_;
};

/// One difference between two messages of the same type.
struct field_change {
  enum class kind : uint8_t { changed, added, removed };
  /// `price.amount_minor`, `photos[1]`, `photos[0].url`, `attributes["color"]`.
  std::string path;
  kind what = kind::changed;
  std::string before; ///< the value as JSON; empty when added
  std::string after;  ///< empty when removed
};

/// Field-level differences from `before` to `after` (the same message type), in field-number
/// order. Lists compare element by element (a longer one has elements `added`, a shorter one
/// `removed`), maps by key, nested messages field by field; well-known types
/// (google.protobuf.*: Timestamp, Any, ...) compare whole. A message field set on one side
/// only is `added` / `removed` as a whole. Top-level fields named in `skip` are left out.
std::vector<field_change> diff_messages(const google::protobuf::Message& before,
                                        const google::protobuf::Message& after,
                                        const std::set<std::string>& skip = {});

/// `path: before -> after`, `path added: after`, `path removed: before`.
std::string to_string(const field_change& c);

/// `s` as a JSON string literal (quotes, escapes, control characters as \u00XX).
std::string json_quoted(const std::string& s);

} // namespace gost::runtime::rpc
