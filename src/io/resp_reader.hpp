// RespReader: bytes in, dlock::Reply values out. No I/O (hiredis's reader does the parsing).
//
// A broken or hostile server must not make the client allocate without bound: hiredis's
// default reader allocates an array for whatever element count a header announces, and keeps
// buffering an arbitrarily large bulk string. We build replies with our own object functions,
// refusing arrays larger than max_elements and strings longer than max_bulk; nesting is bounded
// by hiredis itself (7 levels).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "dlock/reply.hpp"
#include "dlock/result.hpp"

struct redisReader;

namespace dlock::detail {

struct ReplyLimits {
  std::size_t max_elements = 1u << 20;       // per array
  std::size_t max_bulk = 512u * 1024 * 1024;  // Redis's own proto-max-bulk-len default
};

class RespReader {
 public:
  explicit RespReader(ReplyLimits limits = {});
  ~RespReader();
  RespReader(const RespReader&) = delete;
  RespReader& operator=(const RespReader&) = delete;

  // Appends received bytes. Fails with errc::protocol when the stream is already broken.
  Result<void> feed(const char* data, std::size_t len);
  // The next complete reply, nullopt when more bytes are needed, or errc::protocol. After an
  // error the stream cannot be resynchronised: the connection must be closed.
  Result<std::optional<Reply>> next();

  const ReplyLimits& limits() const noexcept { return limits_; }

 private:
  ReplyLimits limits_;
  redisReader* reader_;
};

}  // namespace dlock::detail
