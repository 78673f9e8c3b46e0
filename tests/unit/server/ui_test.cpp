// The chat page's file server (embedded files, types, ETag, gzip) and the Origin/Host guard.
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "server/origin_guard.h"
#include "server/ui_assets.h"

namespace sluice::server {
namespace {

std::string gunzip(const std::string& z) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  std::string out(1 << 20, '\0');
  std::string all;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data()));
  zs.avail_in = static_cast<uInt>(z.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    all.append(out.data(), out.size() - zs.avail_out);
  }
  inflateEnd(&zs);
  EXPECT_EQ(rc, Z_STREAM_END);
  return all;
}

std::string header(const Reply& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

TEST(UiAssets, ServesThePageWithTypeEtagAndCsp) {
  const UiAssets ui;
  const Reply r = ui.serve("/", "", "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("/ui/main.js"), std::string::npos);
  EXPECT_NE(header(r, "Content-Security-Policy").find("script-src 'self';"), std::string::npos);
  const std::string etag = header(r, "ETag");
  ASSERT_FALSE(etag.empty());
  EXPECT_EQ(ui.serve("/", "", etag).status, 304);
  EXPECT_EQ(ui.serve("/", "", "\"other\"").status, 200);
  EXPECT_EQ(ui.serve("/ui/vendor/fonts/KaTeX_Main-Regular.woff2", "", "").content_type, "font/woff2");
  EXPECT_EQ(ui.serve("/ui/missing.js", "", "").status, 404);
}

TEST(UiAssets, GzipOnlyWhenAcceptedAndDecompressesToTheFile) {
  const UiAssets ui;
  const Reply plain = ui.serve("/ui/vendor/highlight.min.js", "", "");
  const Reply z = ui.serve("/ui/vendor/highlight.min.js", "br, gzip;q=0.8", "");
  EXPECT_EQ(header(plain, "Content-Encoding"), "");
  ASSERT_EQ(header(z, "Content-Encoding"), "gzip");
  EXPECT_LT(z.body.size(), plain.body.size());
  EXPECT_EQ(gunzip(z.body), plain.body);
  EXPECT_EQ(header(ui.serve("/ui/vendor/highlight.min.js", "gzip;q=0", ""), "Content-Encoding"), "");
  EXPECT_EQ(header(ui.serve("/ui/vendor/highlight.min.js", "identity", ""), "Content-Encoding"), "");
  // Fonts are compressed already: never gzipped again.
  EXPECT_EQ(header(ui.serve("/ui/vendor/fonts/KaTeX_Main-Regular.woff2", "gzip", ""), "Content-Encoding"), "");
}

TEST(UiAssets, PagePathsArePublic) {
  EXPECT_TRUE(UiAssets::is_page_path("/"));
  EXPECT_TRUE(UiAssets::is_page_path("/ui/main.js"));
  EXPECT_FALSE(UiAssets::is_page_path("/props"));
  EXPECT_FALSE(UiAssets::is_page_path("/v1/chat/completions"));
  EXPECT_FALSE(UiAssets::is_page_path("/uix"));
}

TEST(OriginGuard, SameOriginUnderAnAllowedNamePasses) {
  EXPECT_EQ(origin_refusal("", "anything:1", "127.0.0.1"), "");  // no Origin: not a browser request
  EXPECT_EQ(origin_refusal("http://127.0.0.1:8080", "127.0.0.1:8080", "127.0.0.1"), "");
  EXPECT_EQ(origin_refusal("http://localhost:8080", "localhost:8080", "127.0.0.1"), "");
  EXPECT_EQ(origin_refusal("http://[::1]:8080", "[::1]:8080", "::1"), "");
  EXPECT_EQ(origin_refusal("http://192.168.1.5:8080", "192.168.1.5:8080", "0.0.0.0"), "");
  EXPECT_EQ(origin_refusal("http://MyBox:8080", "mybox:8080", "mybox"), "");  // --host NAME
}

TEST(OriginGuard, CrossSiteAndRebindingAreRefused) {
  EXPECT_NE(origin_refusal("http://evil.example", "127.0.0.1:8080", "127.0.0.1"), "");
  EXPECT_NE(origin_refusal("http://127.0.0.1:9999", "127.0.0.1:8080", "127.0.0.1"), "");        // another port
  EXPECT_NE(origin_refusal("http://evil.example:8080", "evil.example:8080", "127.0.0.1"), "");  // rebinding
  EXPECT_NE(origin_refusal("null", "127.0.0.1:8080", "127.0.0.1"), "");
  EXPECT_NE(origin_refusal("http://127.0.0.1.evil.example:8080", "127.0.0.1.evil.example:8080", "127.0.0.1"), "");
}

}  // namespace
}  // namespace sluice::server
