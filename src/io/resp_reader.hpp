// RespReader: bytes in, dlock::Reply values out. No I/O (hiredis's reader does the parsing).
//
// A broken or hostile server must not make the client allocate without bound: hiredis's
// default reader allocates an array for whatever element count a header announces, and keeps
// buffering an arbitrarily large bulk string. We build replies with our own object functions,
// refusing a reply whose arrays announce more than max_elements elements in total and strings
// longer than max_bulk; nesting is bounded by hiredis itself (7 levels). The element cap is per
// reply, not per array: per array, a forged header chain ("*1048576" eight times nested, 80
// bytes) would reserve 8 x max_elements elements, some 600 MB, before a single element arrives.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "dlock/reply.hpp"
#include "dlock/result.hpp"

struct redisReader;

namespace dlock::detail {

struct ReplyLimits {
  std::size_t max_elements = 1u << 20;       // per reply: all its (nested) arrays together
  std::size_t max_bulk = 512u * 1024 * 1024;  // Redis's own proto-max-bulk-len default
  // A status, error or integer line, or a header: hiredis looks for its end from its start on
  // every read, so an endless line would cost time quadratic in its length (a stalled loop).
  std::size_t max_line = 1u << 20;
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

  const ReplyLimits& limits() const noexcept { return budget_.limits; }

  // What the object functions see (through the reader's privdata): the limits, and how many
  // array elements the reply being parsed has announced so far.
  struct Budget {
    ReplyLimits limits;
    std::size_t elements = 0;
    const char* broken = nullptr;  // why an object function refused the stream, if it did
  };

 private:
  Budget budget_;
  redisReader* reader_;
};

}  // namespace dlock::detail
