// fuzz_resp — the client's reply path on arbitrary bytes from a (hostile) server: RespReader
// (src/io/resp_reader.*, hiredis's parser with dlock's object functions and limits), the
// resulting dlock::Reply values, and classify_error_reply (src/io/command.*).
//
// Input layout: byte 0 picks the limits (tight, small, medium, or the production defaults),
// byte 1 seeds the chunk sizes; the rest is the byte stream the server sends.
//
// Properties checked, beyond "does not crash":
//  1. Caps hold: every delivered reply nests at most kMaxDepth (8) arrays, has no string
//     longer than max_bulk, and no more array elements in total than max_elements.
//  2. Bounded memory: while parsing, the live heap (measured through the sanitizer allocator's
//     hooks, hiredis's buffer included) never exceeds what the caps allow: one reply's worth of
//     elements plus a constant factor of the bytes received. A forged header that announces a
//     huge or deeply nested reply must not be able to reserve more.
//  3. Chunking does not matter: the stream fed in pseudo-random chunks (each followed by
//     draining next(), as Connection::read does) delivers the same replies as fed at once. The
//     one allowed difference: chunked feeding may fail earlier, because a line longer than
//     max_bulk + 32 bytes is refused while incomplete (the buffering cap) but parsed when it
//     arrives whole; the chunked replies are then a prefix of the whole ones. When the input
//     is no longer than max_bulk that cannot happen, and the results must be identical.
//  4. Round trip: the delivered replies re-encoded as RESP parse back to the same replies.
//  5. Reply accessors agree with the reply: as_integer() of a string holds only for a decimal
//     integer, error_prefix() is the error's first word; classify_error_reply() gives a dlock
//     code consistent with the documented prefixes.
#include <sanitizer/allocator_interface.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "check.hpp"
#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "io/command.hpp"
#include "io/resp_reader.hpp"

namespace {

using dlock::Reply;
using dlock::detail::ReplyLimits;
using dlock::detail::RespReader;

// hiredis 0.14 refuses "nested multi bulk replies with depth > 7": 7 levels of arrays with
// elements, below which an empty array (which opens no level of its own) can still sit.
constexpr int kMaxDepth = 8;

// ---- heap meter ------------------------------------------------------------------------------
// Live bytes allocated on this thread while the meter runs, and their peak. Frees of blocks
// allocated before (or while paused) make `live` lower, never higher, so the peak is never
// overstated.
struct HeapMeter {
  long long live = 0;
  long long peak = 0;
};
thread_local HeapMeter* t_meter = nullptr;

void on_malloc(const volatile void*, std::size_t size) {
  if (HeapMeter* m = t_meter) {
    m->live += static_cast<long long>(size);
    m->peak = std::max(m->peak, m->live);
  }
}

void on_free(const volatile void* p) {
  if (HeapMeter* m = t_meter) m->live -= static_cast<long long>(__sanitizer_get_allocated_size(p));
}

// Pauses the meter for the harness's own work.
class Paused {
 public:
  Paused() : saved_(t_meter) { t_meter = nullptr; }
  ~Paused() { t_meter = saved_; }
  Paused(const Paused&) = delete;
  Paused& operator=(const Paused&) = delete;

 private:
  HeapMeter* saved_;
};

// ---- replies ---------------------------------------------------------------------------------

// A type-preserving RESP encoding (to_string() is not: "[1]" may be a string or an array).
void encode(const Reply& r, std::string& out) {
  switch (r.type()) {
    case Reply::Type::nil: out += "$-1\r\n"; return;
    case Reply::Type::status: out += "+" + r.str() + "\r\n"; return;
    case Reply::Type::error: out += "-" + r.str() + "\r\n"; return;
    case Reply::Type::integer: out += ":" + std::to_string(r.integer()) + "\r\n"; return;
    case Reply::Type::string: out += "$" + std::to_string(r.str().size()) + "\r\n" + r.str() + "\r\n"; return;
    case Reply::Type::array:
      out += "*" + std::to_string(r.size()) + "\r\n";
      for (const Reply& e : r.elements()) encode(e, out);
      return;
  }
}

struct Shape {
  int depth = 0;                // arrays on the deepest path
  std::size_t elements = 0;     // array elements, all arrays together
  std::size_t longest = 0;      // longest string
};

void measure(const Reply& r, int depth, Shape& s) {
  s.longest = std::max(s.longest, r.str().size());
  if (!r.is_array()) return;
  s.depth = std::max(s.depth, depth + 1);
  s.elements += r.size();
  for (const Reply& e : r.elements()) measure(e, depth + 1, s);
}

bool is_decimal(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void check_accessors(const Reply& r, const std::string& context) {
  if (r.is_string() || r.is_status()) {
    const auto v = r.as_integer();
    if (v) FUZZ_CHECK(is_decimal(r.str()), context + " as_integer of '" + r.str() + "'");
    // Up to 18 digits always fit in a long long.
    if (is_decimal(r.str()) && r.str().size() <= 18) FUZZ_CHECK(v.has_value(), context + " '" + r.str() + "'");
  }
  if (r.is_integer()) FUZZ_CHECK(r.as_integer() == r.integer(), context);
  if (!r.is_error()) {
    FUZZ_CHECK(r.error_prefix().empty(), context);
  } else {
    const std::string_view s = r.str();
    const std::string_view prefix = r.error_prefix();
    FUZZ_CHECK(prefix == s.substr(0, s.find(' ')), context + " error '" + r.str() + "'");
    const std::error_code code = dlock::detail::classify_error_reply(r);
    FUZZ_CHECK(code.category() == dlock::error_category(), context);
    const bool known = code == dlock::errc::wrong_type || code == dlock::errc::auth ||
                       code == dlock::errc::script || code == dlock::errc::server;
    FUZZ_CHECK(known, context + " error '" + r.str() + "' -> " + code.message());
    if (prefix == "WRONGTYPE") FUZZ_CHECK(code == dlock::errc::wrong_type, context);
    if (prefix == "NOAUTH" || prefix == "NOPERM" || prefix == "WRONGPASS") {
      FUZZ_CHECK(code == dlock::errc::auth, context);
    }
  }
  for (const Reply& e : r.elements()) check_accessors(e, context);
}

// ---- one run over the stream -----------------------------------------------------------------

struct Outcome {
  std::vector<std::string> replies;  // encode() of each delivered reply, in order
  bool failed = false;
  std::string error;
  long long peak_heap = 0;
};

std::string limits_text(const ReplyLimits& l) {
  return "max_elements=" + std::to_string(l.max_elements) + " max_bulk=" + std::to_string(l.max_bulk);
}

// Looks at one delivered reply: caps and accessors, then records its encoding.
void observe(const Reply& r, const ReplyLimits& limits, Outcome& out) {
  Paused paused;
  Shape s;
  measure(r, 0, s);
  const std::string context = limits_text(limits) + " reply #" + std::to_string(out.replies.size());
  FUZZ_CHECK(s.depth <= kMaxDepth, context + " depth " + std::to_string(s.depth));
  FUZZ_CHECK(s.longest <= limits.max_bulk, context + " string of " + std::to_string(s.longest));
  FUZZ_CHECK(s.elements <= limits.max_elements, context + " " + std::to_string(s.elements) + " elements");
  check_accessors(r, context);
  if (s.elements < 4096) (void)r.to_string();
  std::string e;
  encode(r, e);
  out.replies.push_back(std::move(e));
}

// Feeds `stream` in chunks of the sizes `next_chunk` returns (0: all at once), draining next()
// after each feed. The meter covers the reader's whole life.
template <class NextChunk>
Outcome run(std::string_view stream, const ReplyLimits& limits, NextChunk next_chunk) {
  Outcome out;
  HeapMeter meter;
  t_meter = &meter;
  {
    RespReader reader(limits);
    std::size_t off = 0;
    while (off < stream.size() && !out.failed) {
      std::size_t n = next_chunk();
      n = n == 0 ? stream.size() - off : std::min(n, stream.size() - off);
      if (auto fed = reader.feed(stream.data() + off, n); !fed) {
        Paused paused;
        out.failed = true;
        out.error = fed.error().message;
        break;
      }
      off += n;
      for (;;) {
        auto next = reader.next();
        if (!next) {
          Paused paused;
          FUZZ_CHECK(next.error().code == dlock::errc::protocol, next.error().message);
          out.failed = true;
          out.error = next.error().message;
          break;
        }
        if (!next->has_value()) break;
        observe(**next, limits, out);
      }
    }
  }
  t_meter = nullptr;
  out.peak_heap = meter.peak;
  return out;
}

// What the caps allow a reader to hold: the elements of one reply (the one being parsed; a
// delivered reply is handed over), a few times the bytes received (hiredis's buffer and its
// growth, the strings cut from it, one Reply per element of at least 3 bytes), and a constant.
long long heap_allowance(const ReplyLimits& l, std::size_t received) {
  const auto elements = static_cast<long long>(l.max_elements);
  return (elements + 2) * static_cast<long long>(sizeof(Reply)) +
         static_cast<long long>(received) * (4 + static_cast<long long>(sizeof(Reply)) / 3) + 16 * 1024;
}

std::string quoted(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (char c : s.substr(0, 200)) {
    auto u = static_cast<unsigned char>(c);
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u >= 0x7F) {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return "'" + out + (s.size() > 200 ? "'..." : "'");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  ReplyLimits limits;  // the production defaults
  switch (data[0] % 4) {
    case 0: limits.max_elements = 4, limits.max_bulk = 16; break;
    case 1: limits.max_elements = 64, limits.max_bulk = 256; break;
    case 2: limits.max_elements = 4096, limits.max_bulk = 64 * 1024; break;
    default: break;
  }
  std::uint32_t seed = data[1] * 2654435761u + 1;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::string context = limits_text(limits) + " stream " + quoted(stream);

  const Outcome whole = run(stream, limits, [] { return std::size_t{0}; });
  const Outcome chunked = run(stream, limits, [&seed] {
    seed = seed * 1103515245u + 12345u;
    return std::size_t{1} + (seed >> 16) % 17;
  });

  for (const Outcome* o : {&whole, &chunked}) {
    FUZZ_CHECK(o->peak_heap <= heap_allowance(limits, stream.size()),
               context + ": peak heap " + std::to_string(o->peak_heap) + " bytes, allowed " +
                   std::to_string(heap_allowance(limits, stream.size())));
  }

  // Chunking: chunked replies are a prefix of the whole ones; equal unless chunked failed.
  FUZZ_CHECK(chunked.replies.size() <= whole.replies.size(), context);
  FUZZ_CHECK(std::equal(chunked.replies.begin(), chunked.replies.end(), whole.replies.begin()), context);
  if (!chunked.failed) {
    FUZZ_CHECK(!whole.failed && chunked.replies == whole.replies, context + " whole failed: " + whole.error);
  }
  if (whole.failed) FUZZ_CHECK(chunked.failed, context);
  if (stream.size() <= limits.max_bulk) {
    FUZZ_CHECK(chunked.failed == whole.failed && chunked.replies == whole.replies,
               context + " chunked failed: " + chunked.error + " whole failed: " + whole.error);
  }

  // Round trip through the encoding.
  std::string encoded;
  for (const auto& r : whole.replies) encoded += r;
  const Outcome again = run(encoded, limits, [] { return std::size_t{0}; });
  FUZZ_CHECK(!again.failed && again.replies == whole.replies,
             context + " re-encoded " + quoted(encoded) + ": " + again.error);
  return 0;
}
