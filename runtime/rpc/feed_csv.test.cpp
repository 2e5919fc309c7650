// Unit: the CSV of a feed load's errors (rpc/feed_csv.hpp): RFC 4180 quoting, CRLF rows, and
// sellers' text that a spreadsheet would run as a formula defused.
#include <doctest/doctest.h>

#include "rpc/feed_csv.hpp"

using gost::runtime::rpc::csv_field;
using gost::runtime::rpc::offer_error_csv_row;
using gost::runtime::rpc::offer_errors_csv_header;

TEST_CASE("feed error CSV: header, plain rows and quoting") {
  CHECK(offer_errors_csv_header()
        == "external_id,error_id,level,type,field,title,line,message\r\n");
  gost::v1::OfferError e;
  e.set_external_id("sku-1");
  e.set_error_id(1000);
  e.set_level("error");
  e.set_type("validation");
  e.set_field("Price");
  e.set_title("Велосипед, \"горный\"");
  e.set_line(42);
  e.set_message("two\nlines");
  CHECK(offer_error_csv_row(e)
        == "sku-1,1000,error,validation,Price,\"Велосипед, \"\"горный\"\"\",42,\"two\nlines\"\r\n");
  e.set_title("");
  e.set_message("no price");
  CHECK(offer_error_csv_row(e) == "sku-1,1000,error,validation,Price,,42,no price\r\n");
}

TEST_CASE("feed error CSV: a seller's text never starts a formula") {
  CHECK(csv_field("=HYPERLINK(\"http://x\")", true) == "\"'=HYPERLINK(\"\"http://x\"\")\"");
  CHECK(csv_field("+1", true) == "'+1");
  CHECK(csv_field("-5", true) == "'-5");
  CHECK(csv_field("@SUM(A1)", true) == "'@SUM(A1)");
  CHECK(csv_field("\tx", true) == "'\tx");
  // Gost's own fields are left as they are.
  CHECK(csv_field("-5", false) == "-5");
  CHECK(csv_field("plain", true) == "plain");
  CHECK(csv_field("a\rb", false) == "\"a\rb\"");
}
