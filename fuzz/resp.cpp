// Fuzz target: the RESP reply decoder (RespReader over hiredis' reader).
// The same bytes are decoded three ways -- in one piece, split at a point the
// input chooses, and one byte at a time (a split at every byte) -- and the
// three must agree: the socket may deliver a reply in any pieces.
#include "redis/resp.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using rlock::redis::Reply;
using rlock::redis::RespReader;

bool same(const Reply& a, const Reply& b) {
  if (a.type != b.type || a.str != b.str || a.integer != b.integer ||
      a.elements.size() != b.elements.size())
    return false;
  for (size_t k = 0; k < a.elements.size(); ++k)
    if (!same(a.elements[k], b.elements[k])) return false;
  return true;
}

/// What a stream decodes to: the replies, then whether it ended in an error.
struct Decoded {
  std::vector<Reply> replies;
  bool error = false;
};

/// Drains every complete reply; stops at the first protocol error.
void drain(RespReader& reader, Decoded& out) {
  while (!out.error) {
    auto next = reader.next();
    if (!next) {
      out.error = true;
      // A malformed stream stays malformed (see resp.h).
      if (reader.next()) std::abort();
      return;
    }
    if (!*next) return;
    out.replies.push_back(std::move(**next));
  }
}

Decoded decode(std::string_view data, const std::vector<size_t>& cuts) {
  RespReader reader;
  Decoded out;
  size_t from = 0;
  for (size_t cut : cuts) {
    reader.feed(data.substr(from, cut - from));
    drain(reader, out);
    from = cut;
  }
  reader.feed(data.substr(from));
  drain(reader, out);
  return out;
}

void expect_same(const Decoded& a, const Decoded& b) {
  // The error is judged at the end: a split stream may deliver the replies
  // before the bad bytes arrive, so only the totals must agree.
  if (a.error != b.error || a.replies.size() != b.replies.size()) std::abort();
  for (size_t k = 0; k < a.replies.size(); ++k)
    if (!same(a.replies[k], b.replies[k])) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto whole = decode(bytes, {});
  if (size > 0) {
    size_t cut = static_cast<unsigned char>(bytes[0]) * size / 256;
    expect_same(whole, decode(bytes, {cut}));
  }
  std::vector<size_t> every;
  for (size_t k = 1; k < size; ++k) every.push_back(k);
  expect_same(whole, decode(bytes, every));
  return 0;
}
