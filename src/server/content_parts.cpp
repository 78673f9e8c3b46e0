#include "server/content_parts.h"

#include <array>
#include <span>
#include <utility>

#include "base/error.h"
#include "server/api_error.h"
#include "server/base64.h"

namespace sluice::server {

using ojson = nlohmann::ordered_json;

namespace {

// An http(s) URL → its body, fetched within the server's limits when it allows URLs.
std::string remote_url_bytes(const std::string& url, const std::string& where, const ImageInput& in) {
  if (!in.allow_urls)
    bad_part(where,
             "remote image URLs are not fetched (the server was started without --allow-image-urls): send the image "
             "inline as a data: URL (data:image/png;base64,...)");
  try {
    return fetch_url(url, in.fetch);
  } catch (const Error& e) {
    bad_part(where, std::string(e.what()) + " (" + url.substr(0, 200) + ")");
  }
}

// "data:image/png;base64,...." (or, with --allow-image-urls, an http(s) URL) → the bytes.
std::string image_url_bytes(const std::string& url, const std::string& where, const ImageInput& in) {
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) return remote_url_bytes(url, where, in);
  if (url.rfind("data:", 0) != 0)
    bad_part(where, in.allow_urls ? "image_url.url must be a data: URL or an http(s) URL"
                                  : "image_url.url must be a data: URL (data:image/png;base64,...)");
  const size_t comma = url.find(',');
  if (comma == std::string::npos) bad_part(where, "the data: URL has no ',' before its data");
  const std::string_view meta(url.data() + 5, comma - 5);
  constexpr std::string_view kB64 = ";base64";
  if (meta.size() < kB64.size() || meta.substr(meta.size() - kB64.size()) != kB64)
    bad_part(where, "the data: URL must be base64-encoded (data:image/...;base64,...)");
  const std::string_view mime = meta.substr(0, meta.size() - kB64.size());
  if (!mime.empty() && mime.rfind("image/", 0) != 0)
    bad_part(where, "the data: URL's media type '" + std::string(mime) + "' is not an image type");
  std::string bytes = decode_base64(std::string_view(url).substr(comma + 1), where, "image");
  if (bytes.empty()) bad_part(where, "the image's data is empty");
  return bytes;
}

}  // namespace

int detail_tokens(const std::string& detail, const ImageInput& in) {
  if (detail == "low") return 70;
  if (detail == "high") return 1120;
  return in.default_tokens;  // "auto"
}

ImagePart parse_image_part(const ojson& part, const std::string& where, const ImageInput* in) {
  if (in == nullptr)
    bad_part(where,
             "images are not supported by this model: the server was started without a vision projector "
             "(--mmproj FILE)");
  if (!part.contains("image_url")) bad_part(where, "an image_url part needs an 'image_url' object");
  const ojson& iu = part.at("image_url");
  // {"image_url": "data:..."} as some clients send it, or {"image_url": {"url": ...}}.
  const ojson* url = iu.is_string() ? &iu : nullptr;
  std::string detail = "auto";
  if (iu.is_object()) {
    if (iu.contains("url")) url = &iu.at("url");
    if (iu.contains("detail") && !iu.at("detail").is_null()) {
      if (!iu.at("detail").is_string()) bad_part(where, "image_url.detail must be \"low\", \"high\" or \"auto\"");
      detail = iu.at("detail").get<std::string>();
      if (detail != "low" && detail != "high" && detail != "auto")
        bad_part(where, "image_url.detail must be \"low\", \"high\" or \"auto\"");
    }
  }
  if (url == nullptr || !url->is_string()) bad_part(where, "image_url.url must be a string (a data: URL)");
  ImagePart p;
  p.where = where;
  p.bytes = image_url_bytes(url->get_ref<const std::string&>(), where, *in);
  p.tokens = detail_tokens(detail, *in);
  return p;
}

namespace {

media::PreprocessedImage preprocess_part(const ImagePart& part, const ImageInput& in) {
  try {
    const auto* data = reinterpret_cast<const uint8_t*>(part.bytes.data());
    const media::RgbImage img = media::decode_image({data, part.bytes.size()}, "image", in.limits);
    return media::preprocess_image(img, part.tokens);
  } catch (const Error& e) {
    bad_part(part.where, e.what());
  }
}

}  // namespace

ImagePrompt expand_images(std::vector<int32_t> ids, const std::vector<ImagePart>& parts, const ImageInput& in,
                          const api::Engine& engine) {
  ImagePrompt out;
  if (parts.empty()) {
    out.ids = std::move(ids);
    return out;
  }
  if (chat::count_placeholders(ids, in.markers) != parts.size())
    throw ApiError(400,
                   "messages: the rendered prompt has " + std::to_string(chat::count_placeholders(ids, in.markers)) +
                       " image placeholders for " + std::to_string(parts.size()) +
                       " images (a text part that spells out the placeholder, or a chat template that drops images)",
                   "invalid_request_error", "messages");
  // Every image decoded and sized first: a prompt the context cannot hold is refused before
  // any encoder work, and the running total stops a flood of images early.
  std::vector<media::PreprocessedImage> pre;
  std::vector<int32_t> counts;
  for (const ImagePart& part : parts) {
    pre.push_back(preprocess_part(part, in));
    counts.push_back(pre.back().n_soft_tokens());
    out.image_tokens += counts.back();
    const int64_t n = chat::expanded_length(ids.size(), counts);
    const auto why = engine.check_admissible(static_cast<int32_t>(std::min<int64_t>(n, INT32_MAX)));
    if (why)
      throw ApiError(400,
                     *why + " (with " + part.where + " the images take " + std::to_string(out.image_tokens) +
                         " tokens; \"detail\": \"low\" takes 70 per image)",
                     "invalid_request_error", "messages", "context_length_exceeded");
  }
  auto soft = std::make_shared<api::SoftTokens>();
  soft->width = in.text_width;
  soft->blocks = in.blocks;
  soft->rows.resize(static_cast<size_t>(out.image_tokens) * static_cast<size_t>(in.text_width));
  size_t at = 0;
  for (size_t i = 0; i < pre.size(); ++i) {
    try {
      in.encode(pre[i], soft->rows.data() + at);
    } catch (const api::ShuttingDown&) {  // the request was fine: another replica can take it
      throw ApiError(503, "the server is shutting down; send the request to another replica", "server_error");
    } catch (const Error& e) {  // a grid the tower cannot take
      bad_part(parts[i].where, e.what());
    }
    at += static_cast<size_t>(pre[i].n_soft_tokens()) * static_cast<size_t>(in.text_width);
  }
  chat::ExpandedPrompt e = chat::expand_placeholders(ids, in.markers, counts);
  soft->at.reserve(e.soft_row.size());
  for (int64_t r : e.soft_row) soft->at.push_back(r < 0 ? nullptr : soft->rows.data() + r * in.text_width);
  out.ids = std::move(e.ids);
  out.soft = std::move(soft);
  return out;
}

}  // namespace sluice::server
