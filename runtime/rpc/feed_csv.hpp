#pragma once
// Per-offer errors of a feed load as CSV (seed 004: "экспорт ошибок в Excel-таблицы"), one
// rendering for the node's `/feeds/errors.csv` and `gostctl feed-errors --csv`. RFC 4180:
// comma-separated, CRLF line ends, a field with a comma, quote or line break quoted (quotes
// doubled). Text a seller wrote that a spreadsheet would take for a formula (=, +, -, @, a tab
// or CR first) gets a leading apostrophe, so opening the export runs nothing.

#include <string>

#include "gost/v1/feed_service.pb.h"

namespace gost::runtime::rpc {

/// "external_id,error_id,level,type,field,title,line,message" and CRLF.
const std::string& offer_errors_csv_header();

/// One error as a CSV line (CRLF included).
std::string offer_error_csv_row(const v1::OfferError& e);

/// One field: quoted when it must be; `text` (the seller's words) is guarded from formulas.
std::string csv_field(const std::string& value, bool text);

} // namespace gost::runtime::rpc
