#include "rpc/feed_csv.hpp"

namespace gost::runtime::rpc {

const std::string& offer_errors_csv_header() {
  static const std::string header = "external_id,error_id,level,type,field,title,line,message\r\n";
  return header;
}

std::string csv_field(const std::string& value, bool text) {
  std::string v;
  if (text && !value.empty()
      && (value[0] == '=' || value[0] == '+' || value[0] == '-' || value[0] == '@'
          || value[0] == '\t' || value[0] == '\r'))
    v = "'";
  v += value;
  if (v.find_first_of(",\"\r\n") == std::string::npos)
    return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"')
      out += '"';
    out += c;
  }
  return out + "\"";
}

std::string offer_error_csv_row(const v1::OfferError& e) {
  return csv_field(e.external_id(), true) + "," + std::to_string(e.error_id()) + ","
         + csv_field(e.level(), false) + "," + csv_field(e.type(), false) + ","
         + csv_field(e.field(), true) + "," + csv_field(e.title(), true) + ","
         + std::to_string(e.line()) + "," + csv_field(e.message(), true) + "\r\n";
}

} // namespace gost::runtime::rpc
