// Stream: the byte stream under a Connection, either a plain socket (TCP or unix) or TLS over
// TCP. The Connection's pipelining, timeouts and reconnects do not care which.
//
// Why a fresh transport per connection attempt (reset()): an OpenSSL session cannot be reused
// after its socket closed, and a new context per attempt picks up rotated certificate files.
//
// Lifetime: an asynchronous TLS operation refers to its ssl::stream until its handler runs, even
// after close(). Each operation therefore holds a reference to its transport, so reset() can
// drop the old one while handlers of its aborted operations are still queued.
//
// Not thread-safe: used on the Client's event-loop thread only, like Connection.
#pragma once

#include <asio/buffer.hpp>
#include <asio/generic/stream_protocol.hpp>
#include <asio/io_context.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "dlock/options.hpp"
#include "dlock/result.hpp"

namespace dlock::detail {

class Stream {
 public:
  using Socket = asio::generic::stream_protocol::socket;
  using Handler = std::function<void(std::error_code)>;
  using IoHandler = std::function<void(std::error_code, std::size_t)>;

  explicit Stream(asio::io_context& io);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // reset()
  //
  // Closes the current transport and makes a new, unconnected one: plain when `tls` is null
  // (or not enabled), else a new TLS session configured from *tls (already resolved, see
  // resolve_tls) for the server `host`. Fails with errc::invalid_argument when a certificate
  // file cannot be loaded any more; the stream is then plain and unconnected.
  Result<void> reset(const TlsOptions* tls, const std::string& host);

  // The lowest layer: for socket options.
  Socket& socket();
  void async_connect(const Socket::endpoint_type& endpoint, Handler done);
  bool is_tls() const noexcept;

  // The client side of the TLS handshake; on failure the error's message says what failed
  // verification (see describe_tls_failure). Plain streams complete at once, without error.
  void async_handshake(Handler done);
  void async_read_some(asio::mutable_buffer buffer, IoHandler done);
  // Writes all of `buffer`.
  void async_write(asio::const_buffer buffer, IoHandler done);
  // Closes without a TLS close_notify (a dying connection must not wait for its peer).
  // Pending operations complete with operation_aborted.
  void close() noexcept;

  // A read or write error in words, with TLS details when the stream is TLS (an alert such
  // as "certificate required" arrives on the first read under TLS 1.3).
  std::string describe(const std::error_code& ec) const;
  // True for the errors that mean the peer closed the connection (EOF, or TLS without
  // close_notify, which Redis does when it drops a client).
  static bool is_closed_by_peer(const std::error_code& ec);

 private:
  struct Transport;

  asio::io_context& io_;
  std::shared_ptr<Transport> transport_;
  TlsOptions tls_;  // of the current transport, for messages
  std::string host_;
};

}  // namespace dlock::detail
