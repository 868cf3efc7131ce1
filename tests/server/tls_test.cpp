// TLS (https/wss): the server with a throwaway self-signed certificate made at
// test time, Beast + OpenSSL clients that verify it, a plain client on the TLS
// port, and the errors for bad certificate/key files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
namespace fs = std::filesystem;
using tcp = net::ip::tcp;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---- Throwaway key material (never committed): made with OpenSSL into a temp dir.

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Certificate = std::unique_ptr<X509, X509Free>;

void openssl_check(bool ok, const char* step) {
  if (!ok) throw std::runtime_error(std::string("OpenSSL failed to ") + step);
}

// EVP_PKEY_EC (P-256) or EVP_PKEY_RSA (2048 bits).
Pkey make_key(int type) {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new_id(type, nullptr),
                                                                  &EVP_PKEY_CTX_free);
  openssl_check(ctx && EVP_PKEY_keygen_init(ctx.get()) > 0, "start a key generation");
  if (type == EVP_PKEY_EC)
    openssl_check(EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx.get(), NID_X9_62_prime256v1) > 0, "choose P-256");
  else
    openssl_check(EVP_PKEY_CTX_set_rsa_keygen_bits(ctx.get(), 2048) > 0, "choose 2048 RSA bits");
  EVP_PKEY* key = nullptr;
  openssl_check(EVP_PKEY_keygen(ctx.get(), &key) > 0, "generate a key");
  return Pkey(key);
}

void add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  openssl_check(ext != nullptr && X509_add_ext(cert, ext, -1) == 1, "add a certificate extension");
  X509_EXTENSION_free(ext);
}

// Self-signed for 127.0.0.1 (the subjectAltName a verifying client checks), valid from an hour ago for a day.
Certificate make_certificate(EVP_PKEY* key) {
  Certificate cert(X509_new());
  openssl_check(cert && X509_set_version(cert.get(), 2) == 1, "create a certificate");
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("earshot tls test"), -1,
                             -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  openssl_check(X509_set_issuer_name(cert.get(), name) == 1, "set the issuer");
  openssl_check(X509_set_pubkey(cert.get(), key) == 1, "set the public key");
  add_extension(cert.get(), NID_subject_alt_name, "IP:127.0.0.1");
  add_extension(cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  openssl_check(X509_sign(cert.get(), key, EVP_sha256()) > 0, "sign the certificate");
  return cert;
}

void write_pem(const fs::path& path, const std::function<int(BIO*)>& write) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(path.c_str(), "w"), &BIO_free);
  openssl_check(bio && write(bio.get()) == 1, "write a PEM file");
}
void write_key(const fs::path& path, EVP_PKEY* key) {
  write_pem(path,
            [key](BIO* bio) { return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr); });
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
}
void write_certificate(const fs::path& path, X509* cert) {
  write_pem(path, [cert](BIO* bio) { return PEM_write_bio_X509(bio, cert); });
}

// The files of one test process, removed when it ends. The RSA key (slow to make
// under the sanitizer) is made only by the test that needs it.
class TlsFiles {
 public:
  static TlsFiles& get() {
    static TlsFiles files;
    return files;
  }
  fs::path dir;
  fs::path cert, key;  // the server's pair (EC)
  fs::path other_key;  // another EC key: does not match `cert`
  fs::path garbage;    // "PEM" that is not
  fs::path text;       // not PEM at all

  fs::path rsa_key() {
    fs::path path = dir / "rsa-key.pem";
    if (!fs::exists(path)) write_key(path, make_key(EVP_PKEY_RSA).get());
    return path;
  }

 private:
  TlsFiles() {
    std::string pattern = (fs::temp_directory_path() / "earshot-tls-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot make a temp dir " + pattern);
    dir = pattern;
    cert = dir / "cert.pem";
    key = dir / "key.pem";
    other_key = dir / "other-key.pem";
    garbage = dir / "garbage.pem";
    text = dir / "notes.txt";
    Pkey server_key = make_key(EVP_PKEY_EC);
    write_key(key, server_key.get());
    write_certificate(cert, make_certificate(server_key.get()).get());
    write_key(other_key, make_key(EVP_PKEY_EC).get());
    std::ofstream(garbage) << "-----BEGIN CERTIFICATE-----\nthis is not base64 DER at all\n-----END CERTIFICATE-----\n";
    std::ofstream(text) << "a text file, not a certificate\n";
  }
  ~TlsFiles() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

// ---- Clients. Every network step is asynchronous with a deadline, so a server
// that never answers fails the test instead of hanging it.

constexpr auto kDeadline = std::chrono::seconds(10);

// Starts one asynchronous operation and runs the client's loop until it completes.
template <class Initiate>
beast::error_code await(net::io_context& ioc, Initiate&& initiate) {
  std::optional<beast::error_code> result;
  initiate([&result](beast::error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!result && ioc.run_one_until(deadline) > 0) {
  }
  if (!result) throw std::runtime_error("no answer from the server within 10 s");
  return *result;
}

void connect(net::io_context& ioc, tcp::socket& socket, uint16_t port) {
  tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), port);
  beast::error_code ec = await(ioc, [&](auto handler) { socket.async_connect(endpoint, handler); });
  if (ec) throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " + ec.message());
}

// A client that trusts exactly the test certificate (its own trust anchor, being
// self-signed) and checks that it was issued for 127.0.0.1.
ssl::context trusting_context(const fs::path& certfile) {
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(certfile.string());
  ctx.set_verify_mode(ssl::verify_peer);
  return ctx;
}

template <class SslStream>
beast::error_code tls_handshake(net::io_context& ioc, SslStream& stream, uint16_t port) {
  connect(ioc, beast::get_lowest_layer(stream), port);
  stream.set_verify_callback(ssl::host_name_verification("127.0.0.1"));
  return await(ioc, [&](auto handler) { stream.async_handshake(ssl::stream_base::client, handler); });
}

HttpResult https_get(uint16_t port, const std::string& target, ssl::context ctx) {
  net::io_context ioc;
  beast::ssl_stream<tcp::socket> stream(ioc, ctx);
  if (beast::error_code ec = tls_handshake(ioc, stream, port))
    throw std::runtime_error("TLS handshake failed: " + ec.message());
  http::request<http::string_body> req(http::verb::get, target, 11);
  req.set(http::field::host, "127.0.0.1");
  req.keep_alive(false);
  if (beast::error_code ec = await(ioc, [&](auto handler) { http::async_write(stream, req, handler); }))
    throw std::runtime_error("cannot send the request: " + ec.message());
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  if (beast::error_code ec = await(ioc, [&](auto handler) { http::async_read(stream, buffer, res, handler); }))
    throw std::runtime_error("no response: " + ec.message());
  HttpResult r;
  r.status = static_cast<int>(res.result_int());
  r.body = res.body();
  r.content_type = std::string(res[http::field::content_type]);
  return r;
}

HttpResult https_get(uint16_t port, const std::string& target) {
  return https_get(port, target, trusting_context(TlsFiles::get().cert));
}

class WssClient {
 public:
  WssClient(uint16_t port, const std::string& target) : ctx_(trusting_context(TlsFiles::get().cert)), ws_(ioc_, ctx_) {
    if (beast::error_code ec = tls_handshake(ioc_, ws_.next_layer(), port))
      throw std::runtime_error("TLS handshake failed: " + ec.message());
    beast::error_code ec =
        await(ioc_, [&](auto handler) { ws_.async_handshake("127.0.0.1:" + std::to_string(port), target, handler); });
    if (ec) throw std::runtime_error("WebSocket upgrade refused: " + ec.message());
  }

  void send_pcm(const std::vector<int16_t>& samples, size_t frame_bytes) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(samples.data());
    size_t total = samples.size() * 2;
    for (size_t i = 0; i < total; i += frame_bytes) send_binary(bytes + i, std::min(total - i, frame_bytes));
  }
  void send_end() { send_binary(nullptr, 0); }

  std::optional<json> read() {
    beast::flat_buffer buffer;
    if (await(ioc_, [&](auto handler) { ws_.async_read(buffer, handler); })) return std::nullopt;
    return json::parse(beast::buffers_to_string(buffer.data()));
  }
  std::vector<json> read_until_stop() {
    std::vector<json> out;
    while (auto m = read()) {
      out.push_back(*m);
      if (m->value("type", "") == "ready_to_stop") break;
    }
    return out;
  }
  int close_code() const { return static_cast<int>(ws_.reason().code); }
  // The close handshake, then TLS close_notify both ways, then TCP.
  beast::error_code close() {
    return await(ioc_, [&](auto handler) { ws_.async_close(websocket::close_code::normal, handler); });
  }

 private:
  void send_binary(const uint8_t* data, size_t size) {
    ws_.binary(true);
    beast::error_code ec = await(ioc_, [&](auto handler) { ws_.async_write(net::buffer(data, size), handler); });
    if (ec) throw std::runtime_error("cannot send audio: " + ec.message());
  }

  net::io_context ioc_;  // first: outlives the stream and whatever it still has pending
  ssl::context ctx_;
  websocket::stream<beast::ssl_stream<tcp::socket>> ws_;
};

// ---- The server over TLS.

class Tls : public ServerFixture {
 protected:
  static server::ServerConfig config() {
    server::ServerConfig config;
    config.pcm_input = true;
    config.backend = "earshot-test";
    return config;
  }
  void start_tls() {
    server::ServerConfig c = config();
    c.ssl_certfile = TlsFiles::get().cert.string();
    c.ssl_keyfile = TlsFiles::get().key.string();
    start(c);
  }
};

TEST_F(Tls, HealthAnswersAsOverPlainHttp) {
  start_tls();
  EXPECT_EQ(server_->url(), "https://127.0.0.1:" + std::to_string(port_));
  server::ServerConfig plain_config = config();
  plain_config.port = 0;
  server::Server plain(plain_config, fake_hooks());
  plain.start();
  EXPECT_EQ(plain.url(), "http://127.0.0.1:" + std::to_string(plain.port()));
  HttpResult over_http = http_request(plain.port(), "GET", "/health");

  HttpResult over_tls = https_get(port_, "/health");
  EXPECT_EQ(over_tls.status, 200);
  EXPECT_EQ(over_tls.content_type, over_http.content_type);
  EXPECT_EQ(over_tls.body, over_http.body);
  EXPECT_EQ(json::parse(over_tls.body), json::parse(R"({"status":"ok","backend":"earshot-test","ready":true})"));
}

TEST_F(Tls, WssStreamGivesTheSameConfigAndTranscriptAsPlainWs) {
  start_tls();
  WssClient client(port_, "/asr?language=en");
  EXPECT_EQ(client.read(), json::parse(R"({"type":"config","useAudioWorklet":true,"mode":"full"})"));
  std::vector<int16_t> pcm = to_s16(two_phrases());
  client.send_pcm(pcm, 3201);  // odd frame sizes split samples across frames
  client.send_end();
  std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back(), json::parse(R"({"type":"ready_to_stop"})"));
  const json& final_update = messages[messages.size() - 2];
  EXPECT_EQ(final_update["status"], "active_transcription");
  EXPECT_EQ(final_update["buffer_transcription"], "");
  // The plain-ws test's expectation for the same input (ws_protocol_test FullModeConfigUpdatesFinalAndReadyToStop).
  json expected = lines_alone(from_s16(pcm));
  EXPECT_EQ(final_update["lines"], expected);
  EXPECT_EQ(expected, json::parse(R"([
    {"speaker":1,"text":" w100 w100","start":"0:00:00.00","end":"0:00:01.00","detected_language":"en"},
    {"speaker":-2,"text":"","start":"0:00:01.02","end":"0:00:06.98"},
    {"speaker":1,"text":" w286 w300","start":"0:00:06.98","end":"0:00:07.98","detected_language":"en"}])"));
  EXPECT_EQ(client.close(), beast::error_code());
  EXPECT_TRUE(wait_idle());
}

TEST_F(Tls, WssDiffModeRebuildsTheSameLines) {
  start_tls();
  WssClient client(port_, "/asr?mode=diff&language=fr");
  EXPECT_EQ(client.read(), json::parse(R"({"type":"config","useAudioWorklet":true,"mode":"diff"})"));
  std::vector<int16_t> pcm = to_s16(two_phrases(0.2f, 0.1f));
  client.send_pcm(pcm, 6400);
  client.send_end();
  json lines = json::array();
  for (const json& m : client.read_until_stop()) apply_update(lines, m);
  EXPECT_EQ(lines, lines_alone(from_s16(pcm), "fr"));
}

TEST_F(Tls, WssRefusalArrivesWithItsCloseCode) {
  start_tls();
  WssClient client(port_, "/asr?mode=sideways");
  EXPECT_EQ(client.read(),
            json::parse(R"({"type":"error","error":"invalid mode 'sideways': expected 'full' or 'diff'"})"));
  EXPECT_EQ(client.read(), std::nullopt);
  EXPECT_EQ(client.close_code(), 4400);
}

// A plain-HTTP client on the TLS port gets no HTTP answer and its connection is
// closed (OpenSSL recognises the request line); a connection that sends nothing
// at all does not hold up anyone else. The server then still serves TLS clients.
TEST_F(Tls, PlainClientOnTheTlsPortIsRefusedAndTheServerKeepsServing) {
  start_tls();
  net::io_context ioc;
  tcp::socket silent(ioc);
  connect(ioc, silent, port_);

  tcp::socket plain(ioc);
  connect(ioc, plain, port_);
  const std::string request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(await(ioc, [&](auto handler) { net::async_write(plain, net::buffer(request), handler); }),
            beast::error_code());
  std::string received;
  beast::error_code ec =
      await(ioc, [&](auto handler) { net::async_read(plain, net::dynamic_buffer(received), handler); });
  EXPECT_TRUE(ec == net::error::eof || ec == net::error::connection_reset) << ec.message();
  EXPECT_EQ(received.find("HTTP/"), std::string::npos) << received;
  EXPECT_EQ(received.find("\"status\""), std::string::npos) << received;

  EXPECT_EQ(https_get(port_, "/health").status, 200);
  WssClient client(port_, "/asr");
  EXPECT_EQ(client.read().value()["type"], "config");
  client.send_pcm(to_s16(tone(0.5, 0.2f)), 3200);
  client.send_end();
  std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages[messages.size() - 2]["lines"][0]["text"], " w200");
}

// Guards the test itself: the clients above really verify the server's certificate.
TEST_F(Tls, ClientThatDoesNotTrustTheCertificateFailsTheHandshake) {
  start_tls();
  ssl::context untrusting(ssl::context::tls_client);  // no trust anchor at all
  untrusting.set_verify_mode(ssl::verify_peer);
  net::io_context ioc;
  beast::ssl_stream<tcp::socket> stream(ioc, untrusting);
  beast::error_code ec = tls_handshake(ioc, stream, port_);
  EXPECT_TRUE(ec);
  EXPECT_THAT(ec.message(), HasSubstr("certificate verify failed"));
  EXPECT_EQ(https_get(port_, "/health").status, 200);
}

// ---- Bad TLS files: start() throws a kInvalidArgument Error that names the file.

class TlsFilesRefused : public ::testing::Test {
 protected:
  // The message of the Error that start() throws for this pair, or "" when it starts.
  static std::string start_error(const fs::path& cert, const fs::path& key) {
    server::ServerConfig config;
    config.port = 0;
    config.pcm_input = true;
    config.ssl_certfile = cert.string();
    config.ssl_keyfile = key.string();
    server::Server server(config, fake_hooks());
    try {
      server.start();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      return e.what();
    }
    return "";
  }
  TlsFiles& files = TlsFiles::get();
};

TEST_F(TlsFilesRefused, MissingCertificate) {
  fs::path missing = files.dir / "no-such-cert.pem";
  EXPECT_EQ(start_error(missing, files.key),
            "cannot read TLS certificate '" + missing.string() + "': No such file or directory");
}

TEST_F(TlsFilesRefused, MissingKey) {
  fs::path missing = files.dir / "no-such-key.pem";
  EXPECT_EQ(start_error(files.cert, missing),
            "cannot read TLS key '" + missing.string() + "': No such file or directory");
}

// OpenSSL's own reason follows in parentheses; its wording varies between versions.
TEST_F(TlsFilesRefused, GarbagePemAsTheCertificate) {
  EXPECT_THAT(start_error(files.garbage, files.key),
              StartsWith("cannot load TLS certificate '" + files.garbage.string() +
                         "': not a usable PEM certificate chain (OpenSSL: "));
}

TEST_F(TlsFilesRefused, TextFileAsTheCertificate) {
  EXPECT_THAT(start_error(files.text, files.key), StartsWith("cannot load TLS certificate '" + files.text.string() +
                                                             "': not a usable PEM certificate chain (OpenSSL: "));
}

TEST_F(TlsFilesRefused, GarbagePemAsTheKey) {
  EXPECT_THAT(start_error(files.cert, files.garbage), StartsWith("cannot load TLS key '" + files.garbage.string() +
                                                                 "': not a usable PEM private key (OpenSSL: "));
}

TEST_F(TlsFilesRefused, CertificateAndKeySwapped) {
  EXPECT_THAT(start_error(files.key, files.cert),
              StartsWith("cannot load TLS key '" + files.cert.string() + "': not a usable PEM private key (OpenSSL: "));
}

TEST_F(TlsFilesRefused, KeyOfTheSameTypeThatDoesNotMatch) {
  EXPECT_EQ(start_error(files.cert, files.other_key),
            "TLS key '" + files.other_key.string() + "' does not match the certificate '" + files.cert.string() + "'");
}

// An RSA key for an EC certificate lands in another slot of the OpenSSL context,
// where loading it alone does not compare it with the certificate: the server
// used to start and then fail every handshake.
TEST_F(TlsFilesRefused, KeyOfAnotherTypeThatDoesNotMatch) {
  fs::path rsa_key = files.rsa_key();
  EXPECT_EQ(start_error(files.cert, rsa_key),
            "TLS key '" + rsa_key.string() + "' does not match the certificate '" + files.cert.string() + "'");
}

TEST_F(TlsFilesRefused, TheRightPairStarts) { EXPECT_EQ(start_error(files.cert, files.key), ""); }

TEST_F(TlsFilesRefused, OnlyOneOfThePair) {
  EXPECT_THAT(start_error(files.cert, ""), HasSubstr("TLS needs both --ssl-certfile and --ssl-keyfile"));
  EXPECT_THAT(start_error("", files.key), HasSubstr("TLS needs both --ssl-certfile and --ssl-keyfile"));
}

}  // namespace
}  // namespace earshot::testing
