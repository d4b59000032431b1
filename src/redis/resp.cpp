#include "redis/resp.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <new>
#include <stdexcept>
#include <vector>

namespace rlock::redis {
namespace {

struct FreeReply {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};

/// What Redis says of a command it does not know ends with the command's
/// first arguments ("ERR unknown command 'AUTH', with args beginning with:
/// 'user' 'password'"): a password where AUTH is renamed, the lock script's
/// source where EVAL is. Error replies end up in messages on stderr, so
/// that part is never kept.
void drop_echoed_arguments(std::string& message) {
  const auto at = message.find(", with args beginning with:");
  if (at != std::string::npos) message.erase(at);
}

Reply to_reply(const redisReply& raw) {
  Reply reply;
  switch (raw.type) {
    case REDIS_REPLY_STRING:
      reply.type = Reply::Type::string;
      break;
    case REDIS_REPLY_STATUS:
      reply.type = Reply::Type::status;
      break;
    case REDIS_REPLY_ERROR:
      reply.type = Reply::Type::error;
      break;
    case REDIS_REPLY_INTEGER:
      reply.type = Reply::Type::integer;
      break;
    case REDIS_REPLY_NIL:
      reply.type = Reply::Type::nil;
      break;
    case REDIS_REPLY_ARRAY:
      reply.type = Reply::Type::array;
      break;
    default:
      throw std::logic_error(fmt::format("unknown hiredis reply type {}", raw.type));
  }
  if (raw.type == REDIS_REPLY_INTEGER) reply.integer = raw.integer;
  if (raw.str) reply.str.assign(raw.str, raw.len);
  if (reply.type == Reply::Type::error) drop_echoed_arguments(reply.str);
  reply.elements.reserve(raw.elements);
  for (std::size_t i = 0; i < raw.elements; ++i)
    reply.elements.push_back(to_reply(*raw.element[i]));
  return reply;
}

}  // namespace

void RespReader::Free::operator()(redisReader* reader) const {
  redisReaderFree(reader);
}

RespReader::RespReader(ReplyLimits limits) : m_reader(redisReaderCreate()), m_limits(limits) {
  if (!m_reader) throw std::bad_alloc();
}

// A failed feed (out of memory) leaves the reader in its error state, which
// next() reports. Bytes after a refused header never reach hiredis.
void RespReader::feed(std::string_view bytes) {
  if (!m_too_large.empty()) return;
  // The replies before a refused header are still delivered.
  const std::size_t accepted = check(bytes);
  if (accepted > 0) redisReaderFeed(m_reader.get(), bytes.data(), accepted);
}

std::size_t RespReader::check(std::string_view bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size() && !m_unchecked) {
    if (m_skip > 0) {
      const auto n = std::min<std::uint64_t>(m_skip, bytes.size() - pos);
      m_skip -= n;
      pos += n;
      if (m_skip == 0) item_done();
      continue;
    }
    // A header line: refused, it is withheld from hiredis from its start in
    // this feed (an earlier part of it is an incomplete line to hiredis).
    const std::size_t line_start = pos;
    // A line ends at the first CR LF, exactly where hiredis ends it: a bare
    // LF (or CR) is part of the line, or the two would see different
    // headers, and a length this check never saw could reach hiredis.
    auto end = bytes.find('\n', pos);
    while (end != std::string_view::npos &&
           !(end > pos ? bytes[end - 1] == '\r' : m_line.ends_with('\r')))
      end = bytes.find('\n', end + 1);
    const std::size_t stop = end == std::string_view::npos ? bytes.size() : end + 1;
    if (m_line.size() + (stop - pos) > m_limits.max_line) {
      m_too_large = fmt::format("a reply line longer than {} bytes", m_limits.max_line);
      return line_start;
    }
    m_line.append(bytes.substr(pos, stop - pos));
    pos = stop;
    if (end == std::string_view::npos) break;
    std::string_view line = m_line;
    line.remove_suffix(2);  // CR LF
    const bool ok = check_header(line);
    m_line.clear();
    if (!ok) return line_start;
  }
  return bytes.size();
}

bool RespReader::check_header(std::string_view line) {
  if (line.empty()) {
    m_unchecked = true;
    return true;
  }
  const char type = line.front();
  if (type == '+' || type == '-' || type == ':') {
    item_done();
    return true;
  }
  if (type != '$' && type != '*') {
    m_unchecked = true;  // hiredis reports the malformed stream
    return true;
  }
  std::int64_t length = 0;
  const auto digits = line.substr(1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), length);
  if (error != std::errc() || end != digits.data() + digits.size()) {
    m_unchecked = true;
    return true;
  }
  if (length < 0) {  // nil
    item_done();
    return true;
  }
  const auto size = static_cast<std::uint64_t>(length);
  if (type == '$') {
    if (size > m_limits.max_bulk_bytes - m_bulk_bytes) {
      m_too_large = fmt::format("a reply of more than {} bytes", m_limits.max_bulk_bytes);
      return false;
    }
    m_bulk_bytes += size;
    m_skip = size + 2;  // the payload and its CR LF
    return true;
  }
  if (size > m_limits.max_elements - m_elements) {
    m_too_large = fmt::format("a reply of more than {} elements", m_limits.max_elements);
    return false;
  }
  m_elements += size;
  if (size == 0) {
    item_done();
  } else {
    m_open.push_back(length);
  }
  return true;
}

void RespReader::item_done() {
  while (!m_open.empty()) {
    if (--m_open.back() > 0) return;
    m_open.pop_back();  // that array is complete: one item of its parent
  }
  // A top-level reply is complete: the next one has the limits to itself.
  m_elements = 0;
  m_bulk_bytes = 0;
}

Result<std::optional<Reply>> RespReader::next() {
  void* raw = nullptr;
  if (redisReaderGetReply(m_reader.get(), &raw) != REDIS_OK) {
    return fail(Error::Code::protocol, fmt::format("malformed reply: {}", m_reader->errstr));
  }
  if (!raw) {
    if (!m_too_large.empty()) {
      return fail(Error::Code::protocol, fmt::format("refused {}", m_too_large));
    }
    return std::nullopt;
  }
  const std::unique_ptr<redisReply, FreeReply> reply(static_cast<redisReply*>(raw));
  return to_reply(*reply);
}

namespace {

/// One command as RESP appended to `out`, arguments from any range of
/// strings or string views. Written through a pointer into room made once:
/// appending piece by piece (a capacity check per header, digit and CR LF)
/// was most of a status listing's request building.
template <typename Args>
void append_resp(std::string& out, const Args& args) {
  // A header: kind, up to 20 digits, CR LF.
  constexpr std::size_t k_header = 1 + 20 + 2;
  std::size_t room = k_header;
  for (const auto& arg : args) room += k_header + arg.size() + 2;
  const std::size_t start = out.size();
  out.resize(start + room);
  char* at = out.data() + start;
  const auto header = [&at](char kind, std::size_t n) {
    *at++ = kind;
    at = std::to_chars(at, at + 20, n).ptr;
    *at++ = '\r';
    *at++ = '\n';
  };
  header('*', args.size());
  for (const auto& arg : args) {
    header('$', arg.size());
    // Bytes, not a C string (and an empty view may have no data() at all).
    at = std::copy_n(arg.data(), arg.size(), at);
    *at++ = '\r';
    *at++ = '\n';
  }
  out.resize(static_cast<std::size_t>(at - out.data()));
}

}  // namespace

std::string format_command(std::span<const std::string> args) {
  // By hand rather than hiredis' redisFormatCommandArgv, which prints every
  // length with sprintf: a status listing sends ~10 commands a lock, and
  // formatting them was a third of its instructions.
  std::string out;
  append_resp(out, args);
  return out;
}

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  append_resp(out, args);
}

}  // namespace rlock::redis
