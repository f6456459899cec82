#include "io/resp_reader.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace dlock::detail {
namespace {

// Object functions: hiredis calls these while parsing. Children are stored in place inside
// their parent's pre-sized vector, so only the root is heap-allocated and freed.
RespReader::Budget& budget_of(const redisReadTask* task);

void* attach(const redisReadTask* task, Reply&& r) {
  if (task->parent != nullptr) {
    auto* parent = static_cast<Reply*>(task->parent->obj);
    auto& slot = parent->elements()[static_cast<std::size_t>(task->idx)];
    slot = std::move(r);
    return &slot;
  }
  return new (std::nothrow) Reply(std::move(r));
}

void* create_string(const redisReadTask* task, char* str, size_t len) {
  if (len > budget_of(task).limits.max_bulk) return nullptr;  // hiredis reports "Out of memory"
  // hiredis skips the two bytes after a bulk string's body unread (they are in its buffer): a
  // length that is off would frame everything after it wrongly, so they must be CRLF.
  if (task->type == REDIS_REPLY_STRING && (str[len] != '\r' || str[len + 1] != '\n')) {
    budget_of(task).broken = "a bulk string is not followed by CRLF (its length is wrong)";
    return nullptr;
  }
  std::string s(str, len);
  switch (task->type) {
    case REDIS_REPLY_ERROR: return attach(task, Reply::make_error(std::move(s)));
    case REDIS_REPLY_STATUS: return attach(task, Reply::make_status(std::move(s)));
    default: return attach(task, Reply::make_string(std::move(s)));
  }
}

void* create_array(const redisReadTask* task, int elements) {
  RespReader::Budget& budget = budget_of(task);
  if (elements < 0 || static_cast<std::size_t>(elements) > budget.limits.max_elements - budget.elements) return nullptr;
  budget.elements += static_cast<std::size_t>(elements);
  std::vector<Reply> v(static_cast<std::size_t>(elements));
  return attach(task, Reply::make_array(std::move(v)));
}

void* create_integer(const redisReadTask* task, long long value) {
  return attach(task, Reply::make_integer(value));
}

void* create_nil(const redisReadTask* task) { return attach(task, Reply::make_nil()); }

void free_object(void* obj) { delete static_cast<Reply*>(obj); }

redisReplyObjectFunctions functions = {create_string, create_array, create_integer, create_nil,
                                       free_object};

// The budget is reached through the root task's reader privdata.
RespReader::Budget& budget_of(const redisReadTask* task) {
  while (task->parent != nullptr) task = task->parent;
  return *static_cast<RespReader::Budget*>(task->privdata);
}

}  // namespace

RespReader::RespReader(ReplyLimits limits)
    : budget_{limits}, reader_(redisReaderCreateWithFunctions(&functions)) {
  if (reader_ == nullptr) throw std::bad_alloc();
  // hiredis copies reader->privdata into every task's privdata.
  reader_->privdata = &budget_;
}

RespReader::~RespReader() { redisReaderFree(reader_); }

Result<void> RespReader::feed(const char* data, std::size_t len) {
  if (redisReaderFeed(reader_, data, len) != REDIS_OK) {
    return Error(errc::protocol, std::string("RESP stream broken: ") + reader_->errstr);
  }
  return {};
}

Result<std::optional<Reply>> RespReader::next() {
  void* obj = nullptr;
  if (redisReaderGetReply(reader_, &obj) != REDIS_OK) {
    std::string why = reader_->errstr;
    if (budget_.broken != nullptr) why = budget_.broken;
    else if (why == "Out of memory") why = "reply exceeds dlock's size limits or memory";
    return Error(errc::protocol, "invalid reply from server: " + why);
  }
  if (obj == nullptr) {
    // What is left unconsumed is the rest of one incomplete element, whose type byte hiredis
    // has read (the current task's type). Unless it is a bulk string whose length line is
    // complete (its body is bounded below), it is one line.
    const std::size_t left = reader_->len - reader_->pos;
    if (left > budget_.limits.max_line) {
      const char* at = reader_->buf + reader_->pos;
      const bool bulk = reader_->ridx >= 0 && reader_->rstack[reader_->ridx].type == REDIS_REPLY_STRING;
      const bool bulk_body = bulk && std::memchr(at, '\n', std::min<std::size_t>(left, 32)) != nullptr;
      if (!bulk_body) {
        return Error(errc::protocol, "invalid reply from server: a line of more than " +
                                         std::to_string(budget_.limits.max_line) + " bytes");
      }
    }
    // hiredis waits for a whole bulk string before handing it over, so a forged header
    // ("$1000000000") would make us buffer whatever follows. Everything left unconsumed belongs to
    // one incomplete element (consumed bytes are discarded), so it may not outgrow max_bulk plus
    // its header.
    if (reader_->len - reader_->pos > budget_.limits.max_bulk + 32) {
      return Error(errc::protocol, "invalid reply from server: a bulk string exceeds " +
                                       std::to_string(budget_.limits.max_bulk) + " bytes");
    }
    return std::optional<Reply>{};
  }
  std::unique_ptr<Reply> root(static_cast<Reply*>(obj));
  budget_.elements = 0;  // the next reply starts with the whole budget
  return std::optional<Reply>(std::move(*root));
}

}  // namespace dlock::detail
