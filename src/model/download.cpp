#include "model/download.h"

#include <openssl/evp.h>

// GCC 12 with sanitizers reports a false -Wmaybe-uninitialized inside Beast's parser (an optional it
// sets before reading); the pragma covers the Boost headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#pragma GCC diagnostic pop
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <thread>
#include <variant>

#include "common/error.h"

namespace earshot::models {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct Url {
  std::string scheme, host, port, target;
  std::string origin() const { return scheme + "://" + host + ":" + port; }
};

Url parse_url(const std::string& url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) throw Error(ErrorCode::kInvalidArgument, "not a URL: " + url);
  Url u;
  u.scheme = url.substr(0, scheme_end);
  if (u.scheme != "http" && u.scheme != "https")
    throw Error(ErrorCode::kInvalidArgument, "unsupported URL scheme '" + u.scheme + "' in " + url);
  const auto authority_begin = scheme_end + 3;
  const auto path_begin = url.find_first_of("/?", authority_begin);
  std::string authority = url.substr(authority_begin, path_begin - authority_begin);
  u.target = path_begin == std::string::npos ? "/" : url.substr(path_begin);
  if (u.target[0] == '?') u.target = "/" + u.target;
  if (auto at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  u.port = u.scheme == "https" ? "443" : "80";
  if (!authority.empty() && authority[0] == '[') {  // [IPv6]:port
    const auto close = authority.find(']');
    u.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') u.port = authority.substr(close + 2);
  } else if (auto colon = authority.rfind(':'); colon != std::string::npos) {
    u.host = authority.substr(0, colon);
    u.port = authority.substr(colon + 1);
  } else {
    u.host = authority;
  }
  if (u.host.empty()) throw Error(ErrorCode::kInvalidArgument, "URL without a host: " + url);
  return u;
}

std::string resolve_location(const Url& base, const std::string& location) {
  if (location.find("://") != std::string::npos) return location;
  if (location.rfind("//", 0) == 0) return base.scheme + ":" + location;
  if (!location.empty() && location[0] == '/') return base.origin() + location;
  const std::string path = base.target.substr(0, base.target.find('?'));
  return base.origin() + path.substr(0, path.rfind('/') + 1) + location;
}

// A failure worth retrying (with a Range request for what is already on disk).
struct TransientError {
  std::string message;
};
struct Redirect {
  std::string location;
};
struct Finished {
  std::optional<uint64_t> total;
};
using Outcome = std::variant<Redirect, Finished>;

struct Request {
  const Url& url;
  const std::filesystem::path& part;
  uint64_t offset;  // bytes of the part already on disk
  const DownloadOptions& options;
  bool send_token;
};

std::optional<uint64_t> parse_u64(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + uint64_t(c - '0');
  }
  return v;
}

template <class Stream>
Outcome exchange(Stream& stream, const Request& r) {
  auto& tcp_layer = beast::get_lowest_layer(stream);
  const auto timeout = std::chrono::seconds(r.options.timeout_seconds);
  const bool default_port = r.url.port == (r.url.scheme == "https" ? "443" : "80");
  const std::string url_text =
      r.url.scheme + "://" + r.url.host + (default_port ? "" : ":" + r.url.port) + r.url.target;

  http::request<http::empty_body> req{http::verb::get, r.url.target, 11};
  req.set(http::field::host, r.url.host);
  req.set(http::field::user_agent, "earshot-model-download");
  req.set(http::field::accept, "*/*");
  if (r.offset > 0) req.set(http::field::range, "bytes=" + std::to_string(r.offset) + "-");
  if (r.send_token) req.set(http::field::authorization, std::string("Bearer ") + std::getenv("HF_TOKEN"));
  tcp_layer.expires_after(timeout);
  beast::error_code ec;
  http::write(stream, req, ec);
  if (ec) throw TransientError{"sending the request failed: " + ec.message()};

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  // Not boost::none: Boost 1.74 compares the length against an empty optional as 'exceeded'.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  tcp_layer.expires_after(timeout);
  http::read_header(stream, buffer, parser, ec);
  if (ec) throw TransientError{"no response header: " + ec.message()};
  const auto& head = parser.get();
  const unsigned status = head.result_int();

  if (status == 301 || status == 302 || status == 303 || status == 307 || status == 308) {
    const auto location = head[http::field::location];
    if (location.empty())
      throw Error(ErrorCode::kIo, url_text + ": redirect (HTTP " + std::to_string(status) + ") without a Location");
    return Redirect{std::string(location)};
  }
  if (status == 416 && r.offset > 0) {
    // The part is as long as the file (or longer): the finished size decides.
    const std::string range(head[http::field::content_range]);
    const auto slash = range.rfind('/');
    const auto total = slash == std::string::npos ? std::nullopt : parse_u64(range.substr(slash + 1));
    if (total && *total == r.offset) return Finished{total};
    std::filesystem::remove(r.part);
    return Redirect{url_text};  // start again from zero
  }
  if (status >= 500) throw TransientError{"server error HTTP " + std::to_string(status)};
  if (status != 200 && status != 206) {
    std::string hint;
    if (status == 404) hint = " (is the model name right, and the base URL?)";
    if (status == 401 || status == 403) hint = " (a private mirror may need HF_TOKEN set)";
    throw Error(ErrorCode::kIo,
                url_text + ": HTTP " + std::to_string(status) + " " + std::string(head.reason()) + hint);
  }

  std::optional<uint64_t> total;
  bool append = false;
  if (status == 206) {
    // "bytes START-END/TOTAL"
    const std::string range(head[http::field::content_range]);
    const auto dash = range.find('-'), slash = range.rfind('/');
    const auto start = range.rfind("bytes ", 0) == 0 && dash != std::string::npos ? parse_u64(range.substr(6, dash - 6))
                                                                                  : std::nullopt;
    if (!start || *start != r.offset || slash == std::string::npos)
      throw TransientError{"server answered the range request with Content-Range '" + range + "'"};
    total = parse_u64(range.substr(slash + 1));
    append = true;
  } else if (auto length = parser.content_length()) {
    total = *length;  // a 200 to a range request: the server ignored Range and sends everything
  }

  std::ofstream out(r.part, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  if (!out) throw Error(ErrorCode::kIo, r.part.string() + ": cannot write");
  uint64_t done = append ? r.offset : 0;
  std::vector<char> chunk(256 * 1024);
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    tcp_layer.expires_after(timeout);
    http::read(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    const size_t n = chunk.size() - parser.get().body().size;
    out.write(chunk.data(), std::streamsize(n));
    if (!out) throw Error(ErrorCode::kIo, r.part.string() + ": write failed (disk full?)");
    done += n;
    if (r.options.progress && n) r.options.progress(done, total);
    if (ec) {
      out.flush();
      throw TransientError{"connection lost after " + std::to_string(done) +
                           (total ? " of " + std::to_string(*total) : "") + " bytes: " + ec.message()};
    }
  }
  out.close();
  if (!out) throw Error(ErrorCode::kIo, r.part.string() + ": write failed (disk full?)");
  return Finished{total};
}

Outcome fetch(const Request& r) {
  asio::io_context io;
  tcp::resolver resolver(io);
  beast::error_code ec;
  const auto endpoints = resolver.resolve(r.url.host, r.url.port, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot resolve host " + r.url.host + ": " + ec.message() + " (offline?)");
  beast::tcp_stream tcp_stream(io);
  tcp_stream.expires_after(std::chrono::seconds(r.options.timeout_seconds));
  tcp_stream.connect(endpoints, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot connect to " + r.url.host + ":" + r.url.port + ": " + ec.message());
  if (r.url.scheme == "http") {
    Outcome o = exchange(tcp_stream, r);
    tcp_stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    return o;
  }
  asio::ssl::context tls(asio::ssl::context::tls_client);
  tls.set_default_verify_paths();
  tls.set_verify_mode(asio::ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp_stream), tls);
  stream.set_verify_callback(asio::ssl::host_name_verification(r.url.host));
  if (!SSL_set_tlsext_host_name(stream.native_handle(), r.url.host.c_str()))
    throw Error(ErrorCode::kIo, "TLS: cannot set the server name " + r.url.host);
  stream.handshake(asio::ssl::stream_base::client, ec);
  if (ec) throw Error(ErrorCode::kIo, "TLS handshake with " + r.url.host + " failed: " + ec.message());
  Outcome o = exchange(stream, r);
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
  stream.shutdown(ec);  // servers often just close; nothing to do about errors here
  return o;
}

uint64_t size_on_disk(const std::filesystem::path& p) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(p, ec);
  return ec ? 0 : size;
}

}  // namespace

std::string sha1_of_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, path.string() + ": cannot open");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha1(), nullptr);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    EVP_DigestUpdate(ctx.get(), buf.data(), size_t(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  std::string hex;
  for (unsigned i = 0; i < len; ++i) {
    static const char* const kDigits = "0123456789abcdef";
    hex += kDigits[digest[i] >> 4];
    hex += kDigits[digest[i] & 15];
  }
  return hex;
}

DownloadResult download_file(const DownloadOptions& options) {
  const std::filesystem::path part = options.destination.string() + ".part";
  if (options.destination.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(options.destination.parent_path(), ec);
    if (ec)
      throw Error(ErrorCode::kIo, options.destination.parent_path().string() + ": cannot create: " + ec.message());
  }
  const Url first = parse_url(options.url);
  const bool have_token = std::getenv("HF_TOKEN") && *std::getenv("HF_TOKEN");
  DownloadResult result;
  result.resumed_from = size_on_disk(part);
  std::optional<uint64_t> total;
  std::string last_error;
  bool finished = false;
  for (int attempt = 1; attempt <= options.max_attempts && !finished; ++attempt) {
    std::string url = options.url;
    try {
      for (int redirects = 0;; ++redirects) {
        const Url u = parse_url(url);
        // Credentials go only to the host they were meant for, never to a redirect target.
        const Request request{u, part, size_on_disk(part), options, have_token && u.host == first.host};
        ++result.requests;
        Outcome outcome = fetch(request);
        if (auto* done = std::get_if<Finished>(&outcome)) {
          total = done->total;
          finished = true;
          break;
        }
        if (redirects >= options.max_redirects)
          throw Error(ErrorCode::kIo,
                      options.url + ": more than " + std::to_string(options.max_redirects) + " redirects");
        url = resolve_location(u, std::get<Redirect>(outcome).location);
      }
    } catch (const TransientError& e) {
      last_error = e.message;
      if (attempt < options.max_attempts) std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
    } catch (const Error& e) {
      throw Error(e.code(), "cannot download " + options.url + ": " + e.what());
    }
  }
  if (!finished) {
    throw Error(ErrorCode::kIo, "cannot download " + options.url + " after " + std::to_string(options.max_attempts) +
                                    " attempts: " + last_error + ". Run the command again to resume from " +
                                    std::to_string(size_on_disk(part)) + " bytes.");
  }

  const uint64_t size = size_on_disk(part);
  auto reject = [&](ErrorCode code, const std::string& why) {
    std::error_code ec;
    std::filesystem::remove(part, ec);
    throw Error(code, "download of " + options.url + " rejected: " + why + "; the partial file was deleted");
  };
  if (total && size != *total)
    reject(ErrorCode::kIo,
           "size is " + std::to_string(size) + " bytes, the server announced " + std::to_string(*total));
  if (!options.expected_sha1.empty()) {
    const std::string sha1 = sha1_of_file(part);
    if (sha1 != options.expected_sha1)
      reject(ErrorCode::kInvalidModel, "SHA-1 " + sha1 + ", expected " + options.expected_sha1);
  }
  if (options.verify) {
    try {
      options.verify(part);
    } catch (const Error& e) {
      reject(e.code(), e.what());
    }
  }
  std::error_code ec;
  std::filesystem::rename(part, options.destination, ec);
  if (ec)
    throw Error(ErrorCode::kIo,
                "cannot move " + part.string() + " to " + options.destination.string() + ": " + ec.message());
  result.bytes = size;
  return result;
}

namespace {

std::filesystem::path pull_cache_dir(const PullOptions& options) {
  return options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
}

// One file of a pull: where from, where to, how it is checked; progress and retries as the pull says.
std::filesystem::path pull_file(std::string url, std::filesystem::path destination, std::string sha1,
                                std::function<void(const std::filesystem::path&)> verify, const PullOptions& options) {
  DownloadOptions d;
  d.url = std::move(url);
  d.destination = std::move(destination);
  d.expected_sha1 = std::move(sha1);
  d.verify = std::move(verify);
  d.progress = options.progress;
  d.max_attempts = options.max_attempts;
  download_file(d);
  return d.destination;
}

void verify_gguf_llm(const std::filesystem::path& part) { check_gguf_llm_header(part); }

}  // namespace

std::filesystem::path pull_model(const ModelInfo& model, const PullOptions& options) {
  const std::filesystem::path cache = pull_cache_dir(options);
  std::filesystem::path path =
      pull_file(model_url(model, options.base_url), cached_model_path(model, cache), model.sha1, model.check, options);
  if (!model.mmproj.empty()) {
    // The audio encoder belongs to the model: fetched with it, no SHA-1 known (registry.cpp).
    pull_file(mmproj_url(model, options.base_url), cached_mmproj_path(model, cache), "", verify_gguf_llm, options);
  }
  return path;
}

}  // namespace earshot::models
