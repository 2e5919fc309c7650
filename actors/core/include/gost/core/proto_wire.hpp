#pragma once
// Writing protobuf's wire format by hand where serializing a message again would cost a copy:
// a message field whose value is already serialized bytes is appended as is (protobuf accepts
// fields in any order, and a length-delimited field is its bytes behind a tag and a length).

#include <cstdint>
#include <string>

namespace gost::wire {

/// Appends field `number` (wire type 2: bytes, string or embedded message) holding `bytes`.
inline void append_bytes(std::string& out, uint32_t number, const std::string& bytes) {
  auto varint = [&out](uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  };
  varint((static_cast<uint64_t>(number) << 3) | 2);
  varint(bytes.size());
  out += bytes;
}

} // namespace gost::wire
