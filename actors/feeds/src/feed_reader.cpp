// The streaming feed reader (gost/feeds/feed_reader.hpp). libxml2 stays in this file and in
// formats.cpp: the rest of gost sees feed_ad values.
#include "gost/feeds/feed_reader.hpp"

#include <libxml/parserInternals.h>
#include <libxml/xmlreader.h>
#include <libxml/xmlschemas.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "embedded.hpp"
#include "formats.hpp"

namespace gost::feeds {

const char* to_string(feed_format f) {
  switch (f) {
    case feed_format::native: return "native";
    case feed_format::avito: return "avito";
    case feed_format::yml: return "yml";
    case feed_format::parsed: return "parsed";
  }
  return "?";
}

const char* to_string(problem_type t) {
  switch (t) {
    case problem_type::validation: return "validation";
    case problem_type::category: return "unknown_category";
    case problem_type::attribute: return "attribute";
    case problem_type::geocoding: return "geocoding";
    case problem_type::banned: return "banned";
    case problem_type::duplicate: return "duplicate";
  }
  return "?";
}

const char* to_string(problem_level l) {
  return l == problem_level::error ? "error" : "warning";
}

std::string feed_fatal::describe() const {
  std::string out;
  if (line > 0) {
    out = "line " + std::to_string(line);
    if (column > 0)
      out += ", column " + std::to_string(column);
    out += ": ";
  }
  return out + message;
}

// --- sources ---------------------------------------------------------------------------------

feed_source file_source(const std::string& path) {
  std::shared_ptr<FILE> f(std::fopen(path.c_str(), "rb"), [](FILE* p) {
    if (p)
      std::fclose(p);
  });
  feed_source src;
  if (!f) {
    auto why = "cannot open " + path + ": " + std::strerror(errno);
    src.read = [why](char*, size_t) { return -1L; };
    src.error = why;
    return src;
  }
  src.read = [f, path](char* buf, size_t n) -> long {
    auto got = std::fread(buf, 1, n, f.get());
    if (got == 0 && std::ferror(f.get()))
      return -1;
    return static_cast<long>(got);
  };
  return src;
}

feed_source memory_source(std::string_view bytes) {
  feed_source src;
  auto pos = std::make_shared<size_t>(0);
  src.read = [bytes, pos](char* buf, size_t n) -> long {
    auto k = std::min(n, bytes.size() - *pos);
    std::memcpy(buf, bytes.data() + *pos, k);
    *pos += k;
    return static_cast<long>(k);
  };
  return src;
}

// --- values ----------------------------------------------------------------------------------

std::optional<int64_t> parse_price(std::string_view text, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<int64_t> {
    if (why)
      *why = std::move(reason);
    return std::nullopt;
  };
  const std::string accepted =
    "; a price is digits with an optional point and up to two decimals, in the currency's "
    "units, e.g. 1500 or 1500.50";
  if (text.empty())
    return fail("the price is empty" + accepted);
  int64_t units = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (units > (INT64_MAX / 100 - 9) / 10)
      return fail("the price " + std::string(text) + " is too large");
    units = units * 10 + (text[i] - '0');
  }
  if (i == 0)
    return fail("the price \"" + std::string(text) + "\" is not a number" + accepted);
  int64_t minor = 0;
  if (i < text.size() && text[i] == '.') {
    size_t d = 0;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9' && d < 3; ++i, ++d)
      minor = minor * 10 + (text[i] - '0');
    if (d == 0 || d > 2)
      return fail("the price \"" + std::string(text) + "\" has " + (d == 0 ? "no" : "over two")
                  + " decimals" + accepted);
    if (d == 1)
      minor *= 10;
  }
  if (i != text.size())
    return fail("the price \"" + std::string(text) + "\" is not a plain number" + accepted);
  return units * 100 + minor;
}

bool is_absolute_http_url(std::string_view url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos)
    return false;
  std::string scheme(url.substr(0, scheme_end));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme != "http" && scheme != "https")
    return false;
  auto rest = url.substr(scheme_end + 3);
  auto host_end = rest.find_first_of("/?#");
  auto host = rest.substr(0, host_end);
  if (host.empty() || host.find_first_of(" \t\r\n") != std::string_view::npos)
    return false;
  return url.find_first_of(" \t\r\n") == std::string_view::npos;
}

// --- the pass --------------------------------------------------------------------------------

namespace {

/// What one pass knows; reached from libxml2's callbacks through their context pointer.
struct pass {
  feed_source& src;
  const reader_limits& limits;
  std::string prefix; ///< bytes read ahead to find the root, replayed first
  size_t prefix_pos = 0;
  uint64_t bytes = 0;
  bool too_big = false;
  bool io_failed = false;
  std::optional<feed_fatal> fatal;
  int loads_refused = 0;

  void fail(std::string kind, std::string message, int64_t line = 0, int64_t column = 0) {
    if (!fatal)
      fatal = feed_fatal{std::move(kind), std::move(message), line, column};
  }
};

// libxml2's external entity loader is process-wide. While a pass runs on a thread, the loader
// refuses everything (and counts the attempt); elsewhere it defers to the loader it replaced,
// so other users of libxml2 in the process are unchanged.
thread_local pass* current_pass = nullptr;
xmlExternalEntityLoader previous_loader = nullptr;

xmlParserInputPtr guarded_loader(const char* url, const char* id, xmlParserCtxtPtr ctxt) {
  if (auto* p = current_pass) {
    ++p->loads_refused;
    p->fail("hostile", std::string("the document refers to an external resource (")
                         + (url  ? url
                            : id ? id
                                 : "?")
                         + "); feeds may not refer to files or URLs, nothing was fetched");
    return nullptr;
  }
  return previous_loader ? previous_loader(url, id, ctxt) : nullptr;
}

struct pass_scope {
  explicit pass_scope(pass* p) { current_pass = p; }
  ~pass_scope() { current_pass = nullptr; }
};

void init_libxml() {
  static std::once_flag once;
  std::call_once(once, [] {
    xmlInitParser();
    previous_loader = xmlGetExternalEntityLoader();
    xmlSetExternalEntityLoader(guarded_loader);
  });
}

/// The native format's schema, parsed once from the embedded XSD; read-only afterwards, so
/// readers on several threads share it.
xmlSchemaPtr native_schema() {
  static xmlSchemaPtr schema = [] {
    auto xsd = embedded_feed_xsd();
    auto* ctxt = xmlSchemaNewMemParserCtxt(xsd.data(), static_cast<int>(xsd.size()));
    auto* s = xmlSchemaParse(ctxt);
    xmlSchemaFreeParserCtxt(ctxt);
    return s;
  }();
  return schema;
}

int io_read(void* ctx, char* buf, int len) {
  auto& p = *static_cast<pass*>(ctx);
  if (p.prefix_pos < p.prefix.size()) {
    auto k = std::min<size_t>(static_cast<size_t>(len), p.prefix.size() - p.prefix_pos);
    std::memcpy(buf, p.prefix.data() + p.prefix_pos, k);
    p.prefix_pos += k;
    return static_cast<int>(k);
  }
  auto got = p.src.read(buf, static_cast<size_t>(len));
  if (got < 0) {
    p.io_failed = true;
    return -1;
  }
  p.bytes += static_cast<uint64_t>(got);
  if (p.bytes > p.limits.max_file_bytes) {
    p.too_big = true;
    return -1;
  }
  return static_cast<int>(got);
}

int io_close(void*) {
  return 0;
}

/// What a DOCTYPE declares, for the refusal: "<!ENTITY name>", "an internal DTD subset", or
/// empty when it declares nothing (it only names an external DTD, which is never loaded).
std::string declarations_of(const xmlNode* dtd) {
  if (!dtd || !dtd->children)
    return {};
  for (auto* c = dtd->children; c; c = c->next)
    if (c->type == XML_ENTITY_DECL)
      return std::string("<!ENTITY ") + (c->name ? reinterpret_cast<const char*>(c->name) : "")
             + ">";
  return "an internal DTD subset";
}

void refuse_declarations(pass& p, const std::string& what, int64_t line) {
  p.fail("hostile",
         "the document declares " + what
           + "; feeds may not declare entities or a DTD (entity expansion and external "
             "entities are refused, nothing was expanded or fetched)",
         line);
}

void on_error(void* ctx, xmlErrorPtr e) {
  if (!e || e->level < XML_ERR_ERROR)
    return;
  auto& p = *static_cast<pass*>(ctx);
  std::string msg = e->message ? e->message : "unknown error";
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' '))
    msg.pop_back();
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  // The parser reads ahead of the reader: an error inside or caused by declarations (an
  // entity loop, an undeclared entity) can come before the DOCTYPE node is seen. A document
  // that declares anything is refused as such, whatever the parser tripped on first.
  if (e->domain == XML_FROM_PARSER || e->domain == XML_FROM_NAMESPACE) {
    auto* ctxt = static_cast<xmlParserCtxtPtr>(e->ctxt);
    if (ctxt && ctxt->myDoc) {
      auto what = declarations_of(reinterpret_cast<const xmlNode*>(ctxt->myDoc->intSubset));
      if (!what.empty() || ctxt->inSubset) {
        refuse_declarations(p, what.empty() ? "an internal DTD subset" : what, 0);
        return;
      }
    }
  }
  auto kind = e->domain == XML_FROM_SCHEMASV ? "schema" : "malformed";
  p.fail(kind, msg, e->line, e->int2);
}

// Not XML_PARSE_NOCDATA: with a schema set, libxml2 2.9 drops CDATA merged into text from
// an expanded subtree; CDATA nodes are read as text instead (formats.cpp).
// XML_PARSE_BIG_LINES: an element keeps at most line 65535; past it the lines of text nodes
// are kept aside (line_of), so offers beyond line 65535 are reported at their own line.
constexpr int parse_options = XML_PARSE_NONET | XML_PARSE_COMPACT | XML_PARSE_BIG_LINES;

/// An element's line. libxml2 stores at most 65535 in the element; past that, with
/// XML_PARSE_BIG_LINES, a text node carries the line where it ended, so an element whose first
/// child is text (the line break and indentation before its first child element, or its
/// value) is on that line less the text's line breaks. Otherwise libxml2's own search.
int64_t line_of(const xmlNode* n) {
  if (n->line < 65535)
    return n->line;
  if (auto* c = n->children; c && c->type == XML_TEXT_NODE && c->psvi && c->content) {
    auto breaks = std::count(c->content, c->content + xmlStrlen(c->content), '\n');
    return static_cast<int64_t>(reinterpret_cast<ptrdiff_t>(c->psvi)) - breaks;
  }
  return xmlGetLineNo(n);
}

/// Reads ahead until the root element's name is known (at most 1 MiB: a prolog longer than
/// that is no feed) without reporting anything: the pass itself finds every error again.
std::string sniff_root(pass& p) {
  constexpr size_t chunk = 64 << 10, cap = 1 << 20;
  std::string root;
  while (p.prefix.size() < cap) {
    auto old = p.prefix.size();
    p.prefix.resize(old + chunk);
    auto got = p.src.read(p.prefix.data() + old, chunk);
    p.prefix.resize(old + static_cast<size_t>(std::max(got, 0L)));
    if (got < 0) {
      p.io_failed = true;
      return {};
    }
    p.bytes += static_cast<uint64_t>(got);
    auto* r = xmlReaderForMemory(p.prefix.data(), static_cast<int>(p.prefix.size()), nullptr,
                                 nullptr, parse_options | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!r)
      return {};
    xmlTextReaderSetStructuredErrorHandler(
      r, [](void*, xmlErrorPtr) {}, nullptr);
    while (xmlTextReaderRead(r) == 1) {
      auto type = xmlTextReaderNodeType(r);
      if (type == XML_READER_TYPE_DOCUMENT_TYPE && xmlTextReaderCurrentNode(r)
          && xmlTextReaderCurrentNode(r)->children)
        break; // declarations: the pass refuses them, no need to look further
      if (type == XML_READER_TYPE_ELEMENT) {
        auto* name = xmlTextReaderConstLocalName(r);
        root = name ? reinterpret_cast<const char*>(name) : "";
        break;
      }
    }
    xmlFreeTextReader(r);
    if (!root.empty() || got == 0 || p.bytes > p.limits.max_file_bytes)
      break;
  }
  return root;
}

size_t utf8_chars(const char* s, size_t bytes) {
  size_t n = 0;
  for (size_t i = 0; i < bytes; ++i)
    n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
  return n;
}

struct reader_deleter {
  void operator()(xmlTextReaderPtr r) const { xmlFreeTextReader(r); }
};

} // namespace

read_summary read_feed(feed_source& src, const reader_limits& limits, const ad_callback& on_ad) {
  init_libxml();
  pass p{src, limits};
  pass_scope scope(&p);
  read_summary out;

  auto root = sniff_root(p);
  if (p.bytes > limits.max_file_bytes)
    p.too_big = true;
  // JSON Lines (a parsed feed) starts with '{', after an optional BOM and blanks.
  auto first =
    p.prefix.find_first_not_of(" \t\r\n", p.prefix.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0);
  if (!p.too_big && first != std::string::npos && p.prefix[first] == '{') {
    out.format = feed_format::parsed;
    read_json_lines(
      [&p](char* buf, size_t n) {
        return static_cast<long>(io_read(&p, buf, static_cast<int>(n)));
      },
      limits, on_ad, out,
      [&p](feed_fatal f) {
        if (!p.fatal)
          p.fatal = std::move(f);
      });
    if (p.too_big)
      p.fatal =
        feed_fatal{"limit", "the file is larger than " + std::to_string(limits.max_file_bytes)
                              + " bytes (feed.max_file_bytes)"};
    else if (p.io_failed)
      p.fatal = feed_fatal{"io", "reading the feed failed: "
                                   + (src.error.empty() ? std::string("source error") : src.error)};
    out.bytes = p.bytes;
    out.fatal = std::move(p.fatal);
    return out;
  }
  auto format = format_of_root(root);
  const bool native = format && *format == feed_format::native;

  std::unique_ptr<xmlTextReader, reader_deleter> reader(
    xmlReaderForIO(io_read, io_close, &p, nullptr, nullptr, parse_options));
  if (!reader) {
    out.fatal = feed_fatal{"io", "cannot start the XML reader"};
    return out;
  }
  xmlTextReaderSetStructuredErrorHandler(reader.get(), on_error, &p);
  if (native) {
    auto* schema = native_schema();
    if (!schema || xmlTextReaderSetSchema(reader.get(), schema) != 0) {
      out.fatal = feed_fatal{"io", "the native feed schema could not be loaded"};
      return out;
    }
  }

  auto* r = reader.get();
  std::unique_ptr<format_reader> fmt;
  auto over_offers = [&](int64_t line) {
    if (++out.offers <= limits.max_offers)
      return false;
    p.fail("limit",
           "over " + std::to_string(limits.max_offers) + " offers in one feed (feed.max_offers)",
           line);
    return true;
  };
  int ret = 0;
  // After an expanded subtree, Next() already stands on the following node: take it as read.
  bool positioned = false;
  while (!p.fatal && !p.too_big) {
    if (!positioned && (ret = xmlTextReaderRead(r)) != 1)
      break;
    positioned = false;
    auto type = xmlTextReaderNodeType(r);
    if (type == XML_READER_TYPE_DOCUMENT_TYPE) {
      auto what = declarations_of(xmlTextReaderCurrentNode(r));
      if (!what.empty()) {
        refuse_declarations(p, what, xmlTextReaderGetParserLineNumber(r));
        break;
      }
      continue;
    }
    if (type == XML_READER_TYPE_TEXT || type == XML_READER_TYPE_CDATA
        || type == XML_READER_TYPE_SIGNIFICANT_WHITESPACE) {
      auto* v = reinterpret_cast<const char*>(xmlTextReaderConstValue(r));
      auto n = v ? std::strlen(v) : 0;
      if (n > limits.max_field_chars && utf8_chars(v, n) > limits.max_field_chars)
        p.fail("limit",
               "a text of " + std::to_string(utf8_chars(v, n)) + " characters; the limit is "
                 + std::to_string(limits.max_field_chars) + " (feed.max_field_chars)",
               xmlGetLineNo(xmlTextReaderCurrentNode(r)));
      continue;
    }
    if (type != XML_READER_TYPE_ELEMENT)
      continue;

    auto depth = xmlTextReaderDepth(r) + 1;
    // The node's own line (the parser's is ahead of the reader).
    int64_t line = xmlGetLineNo(xmlTextReaderCurrentNode(r));
    if (depth > limits.max_depth) {
      p.fail("limit",
             "elements nested " + std::to_string(depth) + " deep; the limit is "
               + std::to_string(limits.max_depth) + " (feed.max_depth)",
             line);
      break;
    }
    if (xmlTextReaderHasAttributes(r) == 1) {
      while (xmlTextReaderMoveToNextAttribute(r) == 1) {
        auto* v = reinterpret_cast<const char*>(xmlTextReaderConstValue(r));
        auto n = v ? std::strlen(v) : 0;
        if (n > limits.max_field_chars && utf8_chars(v, n) > limits.max_field_chars)
          p.fail("limit",
                 "an attribute value of " + std::to_string(utf8_chars(v, n))
                   + " characters; the limit is " + std::to_string(limits.max_field_chars)
                   + " (feed.max_field_chars)",
                 line);
      }
      xmlTextReaderMoveToElement(r);
      if (p.fatal)
        break;
    }
    auto* lname = xmlTextReaderConstLocalName(r);
    std::string_view name = lname ? reinterpret_cast<const char*>(lname) : "";
    if (depth == 1) {
      auto f = format_of_root(name);
      if (!f) {
        p.fail("format",
               "the root element is <" + std::string(name)
                 + ">; a feed is gost's native <feed>, an Avito Autoload <Ads> or a Yandex "
                   "YML <yml_catalog>",
               line);
        break;
      }
      if (native != (*f == feed_format::native)) {
        // The root was not found ahead (a prolog over 1 MiB): the schema would be missing.
        p.fail("format", "the root element could not be found in the first 1 MiB", line);
        break;
      }
      out.format = f;
      fmt = make_format_reader(*f, limits);
      continue;
    }
    auto role = fmt->classify(depth, name);
    if (role == element_role::descend || role == element_role::skip)
      continue;
    if (role == element_role::item && over_offers(line))
      break;
    if (role == element_role::item && !on_ad)
      continue; // checking only: read through the offer node by node
    // A side table (YML categories) or an offer to extract: take its subtree at once.
    auto* node = xmlTextReaderExpand(r);
    if (!node || p.fatal)
      break;
    std::string why;
    if (role == element_role::side) {
      if (!fmt->side(node, why)) {
        p.fail("limit", why, line);
        break;
      }
    } else {
      feed_ad ad;
      ad.line = line_of(node); // its subtree is read now: its first text child too
      if (!fmt->item(node, depth, ad, why)) {
        p.fail("limit", why, line);
        break;
      }
      if (!on_ad(std::move(ad))) {
        out.stopped = true;
        break;
      }
    }
    if ((ret = xmlTextReaderNext(r)) != 1)
      break;
    positioned = true;
  }
  if (p.too_big)
    p.fatal = feed_fatal{"limit", "the file is larger than " + std::to_string(limits.max_file_bytes)
                                    + " bytes (feed.max_file_bytes)"};
  else if (p.io_failed)
    p.fatal = feed_fatal{"io", "reading the feed failed: "
                                 + (src.error.empty() ? std::string("source error") : src.error)};
  if (!p.fatal && !out.stopped) {
    if (ret < 0 && !p.fatal)
      p.fail("malformed", "the document is not well-formed XML",
             xmlTextReaderGetParserLineNumber(r), xmlTextReaderGetParserColumnNumber(r));
    else if (!out.format)
      p.fail("format", "the document has no root element");
    else if (native && xmlTextReaderIsValid(r) != 1)
      p.fail("schema", "the document does not match the native feed schema (feed.xsd)");
  }
  out.bytes = p.bytes;
  out.fatal = std::move(p.fatal);
  return out;
}

} // namespace gost::feeds
