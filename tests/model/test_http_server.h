// A small HTTP/1.1 server on 127.0.0.1 (ephemeral port) for download tests: serves
// byte strings with Range support, redirects, and can misbehave on purpose
// (drop the connection midway, flip a byte, ignore Range). One connection at a time.
#pragma once

#include <atomic>
// GCC 12 with sanitizers reports a false -Wmaybe-uninitialized inside Beast's parser.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#pragma GCC diagnostic pop
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace earshot::testing {

class TestHttpServer {
 public:
  struct Seen {
    std::string target;
    std::string range;  // the Range header, empty when absent
  };

  TestHttpServer() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { loop(); });
  }
  ~TestHttpServer() {
    stopping_ = true;
    // Wake the blocking accept with one last connection.
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket s(io);
    boost::system::error_code ec;
    s.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
    thread_.join();
  }

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void serve(const std::string& target, std::string body) {
    std::lock_guard lock(mu_);
    bodies_[target] = std::move(body);
  }
  void redirect(const std::string& target, const std::string& location) {
    std::lock_guard lock(mu_);
    redirects_[target] = location;
  }
  // The next `times` responses with a body stop after `bytes` body bytes and close the connection.
  void drop_after(size_t bytes, int times) {
    std::lock_guard lock(mu_);
    drop_after_ = bytes;
    drops_left_ = times;
  }
  // Bodies are served with the byte at `offset` flipped.
  void corrupt_byte_at(size_t offset) {
    std::lock_guard lock(mu_);
    corrupt_at_ = offset;
  }
  void ignore_range(bool ignore) {
    std::lock_guard lock(mu_);
    ignore_range_ = ignore;
  }
  std::vector<Seen> requests() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  void loop() {
    while (true) {
      boost::asio::ip::tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (stopping_) return;
      if (!ec) handle(socket);
    }
  }

  void handle(boost::asio::ip::tcp::socket& socket) {
    namespace http = boost::beast::http;
    boost::beast::flat_buffer buffer;
    http::request<http::empty_body> req;
    boost::system::error_code ec;
    http::read(socket, buffer, req, ec);
    if (ec) return;
    const std::string target(req.target());
    const std::string range(req[http::field::range]);
    std::unique_lock lock(mu_);
    seen_.push_back({target, range});
    std::string head;
    std::string body;
    size_t send_limit = std::string::npos;
    if (auto r = redirects_.find(target); r != redirects_.end()) {
      head = "HTTP/1.1 302 Found\r\nLocation: " + r->second + "\r\nContent-Length: 0\r\n";
    } else if (auto b = bodies_.find(target); b != bodies_.end()) {
      std::string full = b->second;
      if (corrupt_at_ && *corrupt_at_ < full.size()) full[*corrupt_at_] ^= 0x5A;
      size_t start = 0;
      if (!range.empty() && !ignore_range_) start = std::stoull(range.substr(range.find('=') + 1));
      if (start >= full.size() && start > 0) {
        head = "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" + std::to_string(full.size()) +
               "\r\nContent-Length: 0\r\n";
      } else {
        body = full.substr(start);
        head = start > 0 ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(start) + "-" +
                               std::to_string(full.size() - 1) + "/" + std::to_string(full.size()) + "\r\n"
                         : "HTTP/1.1 200 OK\r\n";
        head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
        if (drops_left_ > 0) {
          --drops_left_;
          send_limit = drop_after_;
        }
      }
    } else {
      head = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n";
    }
    lock.unlock();
    head += "Connection: close\r\n\r\n";
    boost::asio::write(socket, boost::asio::buffer(head), ec);
    if (!ec && !body.empty())
      boost::asio::write(socket, boost::asio::buffer(body.data(), std::min(send_limit, body.size())), ec);
    socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> bodies_;
  std::map<std::string, std::string> redirects_;
  size_t drop_after_ = 0;
  int drops_left_ = 0;
  std::optional<size_t> corrupt_at_;
  bool ignore_range_ = false;
  std::vector<Seen> seen_;
};

}  // namespace earshot::testing
