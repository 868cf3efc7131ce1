// The Beast client side of the tests, compiled once.
#include "test_support.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <stdexcept>

namespace earshot::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct WsClient::Impl {
  net::io_context ioc;
  websocket::stream<tcp::socket> ws{ioc};
};

WsClient::WsClient(uint16_t port, const std::string& target, std::vector<std::pair<std::string, std::string>> headers,
                   int receive_buffer_bytes)
    : impl_(std::make_unique<Impl>()) {
  tcp::socket& socket = impl_->ws.next_layer();
  socket.open(tcp::v4());
  if (receive_buffer_bytes > 0) socket.set_option(net::socket_base::receive_buffer_size(receive_buffer_bytes));
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  impl_->ws.set_option(websocket::stream_base::decorator([headers](websocket::request_type& req) {
    for (const auto& [k, v] : headers) req.set(k, v);
  }));
  impl_->ws.read_message_max(64 << 20);
  beast::error_code ec;
  impl_->ws.handshake("127.0.0.1:" + std::to_string(port), target, ec);
  if (ec) throw std::runtime_error("WebSocket upgrade refused: " + ec.message());
}

WsClient::~WsClient() = default;

void WsClient::send_binary(const std::vector<uint8_t>& bytes) {
  impl_->ws.binary(true);
  beast::error_code ec;  // the server may already have closed (tests then read the close)
  impl_->ws.write(net::buffer(bytes), ec);
}

void WsClient::send_text(const std::string& text) {
  impl_->ws.text(true);
  beast::error_code ec;
  impl_->ws.write(net::buffer(text), ec);
}

std::optional<nlohmann::json> WsClient::read() {
  beast::flat_buffer buffer;
  beast::error_code ec;
  impl_->ws.read(buffer, ec);
  if (ec) return std::nullopt;
  return nlohmann::json::parse(beast::buffers_to_string(buffer.data()));
}

int WsClient::close_code() const { return static_cast<int>(impl_->ws.reason().code); }
std::string WsClient::close_reason() const { return std::string(impl_->ws.reason().reason.c_str()); }

void WsClient::close() {
  beast::error_code ec;
  impl_->ws.close(websocket::close_code::normal, ec);
}

void WsClient::drop() {
  beast::error_code ec;
  impl_->ws.next_layer().close(ec);
}

HttpResult http_request(uint16_t port, const std::string& method, const std::string& target, std::string body,
                        std::vector<std::pair<std::string, std::string>> headers) {
  net::io_context ioc;
  tcp::socket socket(ioc);
  tcp::resolver resolver(ioc);
  net::connect(socket, resolver.resolve("127.0.0.1", std::to_string(port)));
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = std::move(body);
  req.prepare_payload();
  beast::error_code ec;
  http::write(socket, req, ec);  // a 413 may arrive before the whole body is written
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(256 << 20);
  http::read(socket, buffer, parser, ec);
  HttpResult r;
  if (ec) return r;
  auto res = parser.release();
  r.status = static_cast<int>(res.result_int());
  r.body = res.body();
  r.content_type = std::string(res[http::field::content_type]);
  for (const auto& field : res) r.headers[std::string(field.name_string())] = std::string(field.value());
  return r;
}

}  // namespace earshot::testing
