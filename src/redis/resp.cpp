#include "redis/resp.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <new>
#include <stdexcept>
#include <vector>

namespace rlock::redis {
namespace {

struct FreeReply {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};

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
  reply.elements.reserve(raw.elements);
  for (std::size_t i = 0; i < raw.elements; ++i)
    reply.elements.push_back(to_reply(*raw.element[i]));
  return reply;
}

}  // namespace

void RespReader::Free::operator()(redisReader* reader) const {
  redisReaderFree(reader);
}

RespReader::RespReader() : m_reader(redisReaderCreate()) {
  if (!m_reader) throw std::bad_alloc();
}

// A failed feed (out of memory) leaves the reader in its error state, which
// next() reports.
void RespReader::feed(std::string_view bytes) {
  redisReaderFeed(m_reader.get(), bytes.data(), bytes.size());
}

Result<std::optional<Reply>> RespReader::next() {
  void* raw = nullptr;
  if (redisReaderGetReply(m_reader.get(), &raw) != REDIS_OK) {
    return fail(Error::Code::protocol, fmt::format("malformed reply: {}", m_reader->errstr));
  }
  if (!raw) return std::nullopt;
  const std::unique_ptr<redisReply, FreeReply> reply(static_cast<redisReply*>(raw));
  return to_reply(*reply);
}

std::string format_command(std::span<const std::string> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  char* raw = nullptr;
  const int length =
      redisFormatCommandArgv(&raw, static_cast<int>(args.size()), argv.data(), lengths.data());
  if (length < 0) throw std::bad_alloc();
  const std::unique_ptr<char, decltype(&redisFreeCommand)> command(raw, &redisFreeCommand);
  return std::string(raw, static_cast<std::size_t>(length));
}

}  // namespace rlock::redis
