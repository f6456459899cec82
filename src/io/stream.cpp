#include "io/stream.hpp"

#include <asio/connect.hpp>
#include <asio/post.hpp>
#include <asio/ssl/context.hpp>
#include <asio/ssl/error.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/write.hpp>
#include <optional>

#include "io/tls_context.hpp"

namespace dlock::detail {

// One connection attempt's transport. The context is declared before the TLS stream so that it
// is destroyed after it.
struct Stream::Transport {
  explicit Transport(asio::io_context& io) : plain(io) {}
  Transport(asio::io_context& io, std::unique_ptr<asio::ssl::context> c)
      : plain(io), ctx(std::move(c)), tls(std::in_place, io, *ctx) {}

  Socket& socket() { return tls ? tls->next_layer() : plain; }

  Socket plain;  // unused under TLS (the TLS stream owns its socket)
  std::unique_ptr<asio::ssl::context> ctx;
  std::optional<asio::ssl::stream<Socket>> tls;
};

Stream::Stream(asio::io_context& io) : io_(io), transport_(std::make_shared<Transport>(io)) {}

Stream::~Stream() { close(); }

bool Stream::is_tls() const noexcept { return transport_->tls.has_value(); }

Stream::Socket& Stream::socket() { return transport_->socket(); }

Result<void> Stream::reset(const TlsOptions* tls, const std::string& host) {
  close();
  transport_ = std::make_shared<Transport>(io_);
  if (tls == nullptr || !tls->enabled) return {};
  auto ctx = make_tls_context(*tls);
  if (!ctx) return ctx.error();
  auto t = std::make_shared<Transport>(io_, std::move(*ctx));
  if (auto ok = configure_session(t->tls->native_handle(), *tls, host); !ok) return ok;
  transport_ = std::move(t);
  tls_ = *tls;
  host_ = host;
  return {};
}

void Stream::async_connect(const Socket::endpoint_type& endpoint, Handler done) {
  transport_->socket().async_connect(endpoint,
                                     [t = transport_, done = std::move(done)](std::error_code ec) { done(ec); });
}

void Stream::async_handshake(Handler done) {
  if (!transport_->tls) {
    asio::post(io_, [done = std::move(done)] { done({}); });
    return;
  }
  transport_->tls->async_handshake(asio::ssl::stream_base::client,
                                   [t = transport_, done = std::move(done)](std::error_code ec) { done(ec); });
}

void Stream::async_read_some(asio::mutable_buffer buffer, IoHandler done) {
  auto handler = [t = transport_, done = std::move(done)](std::error_code ec, std::size_t n) { done(ec, n); };
  if (transport_->tls) return transport_->tls->async_read_some(buffer, std::move(handler));
  transport_->plain.async_read_some(buffer, std::move(handler));
}

void Stream::async_write(asio::const_buffer buffer, IoHandler done) {
  // A composed write keeps calling write_some on its stream between partial writes: the
  // transport must live until the whole operation ends, even when reset() dropped it.
  auto handler = [t = transport_, done = std::move(done)](std::error_code ec, std::size_t n) { done(ec, n); };
  if (transport_->tls) return asio::async_write(*transport_->tls, buffer, std::move(handler));
  asio::async_write(transport_->plain, buffer, std::move(handler));
}

void Stream::close() noexcept {
  std::error_code ignored;
  transport_->socket().close(ignored);
}

std::string Stream::describe(const std::error_code& ec) const {
  if (!transport_->tls) return ec.message();
  return describe_tls_failure(transport_->tls->native_handle(), ec, tls_, host_);
}

bool Stream::is_closed_by_peer(const std::error_code& ec) {
  return ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
}

}  // namespace dlock::detail
