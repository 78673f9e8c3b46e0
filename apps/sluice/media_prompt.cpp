#include "apps/sluice/media_prompt.h"

#include <cstdio>

#include "apps/sluice/audio_tower.h"
#include "apps/sluice/engine_session.h"
#include "apps/sluice/image_tower.h"
#include "base/error.h"
#include "chat/media_expand.h"
#include "media/preprocess.h"

namespace sluice::app {

void configure_media(const ImageArgs& images, const AudioArgs& audio, SessionOptions& session) {
  if (!images.images.empty() && images.mmproj.empty())
    fail("--image needs --mmproj FILE (the vision projector that goes with the model)");
  if (!audio.clips.empty() && images.mmproj.empty())
    fail(
        "--audio needs --mmproj FILE (the projector with the audio tower that goes with the model: Gemma 4 "
        "E2B/E4B's)");
  session.mmproj = images.mmproj;
  session.mmproj_audio = !audio.clips.empty();
  // Without --audio the vision tower loads as it always did (a wrong --mmproj fails at start).
  session.mmproj_vision = !images.images.empty() || audio.clips.empty();
}

std::string place_media_markers(const std::string& text, size_t n_images, size_t n_audio) {
  return place_markers(place_markers(text, "<|audio|>", n_audio), "<|image|>", n_images);
}

namespace {

EncodedItems encode_images(const ImageArgs& a, EngineSession& sess) {
  EncodedItems out;
  if (a.images.empty()) return out;
  ImageTower* tower = sess.image_tower();
  if (tower == nullptr) fail("--image needs --mmproj FILE (the vision projector that goes with the model)");
  if (!media::is_supported_budget(a.tokens)) fail("--image-tokens %d: expected 70, 140, 280, 560 or 1120", a.tokens);
  for (const std::string& path : a.images) out.counts.push_back(encode_image(path, a.tokens, *tower, out.rows));
  return out;
}

EncodedItems encode_clips(const AudioArgs& a, EngineSession& sess) {
  EncodedItems out;
  if (a.clips.empty()) return out;
  AudioTower* tower = sess.audio_tower();
  if (tower == nullptr) fail("--audio needs --mmproj FILE (the projector with the audio tower)");
  for (const std::string& path : a.clips) out.counts.push_back(encode_audio_clip(path, *tower, out.rows, a.layout()));
  return out;
}

// Throws naming the clips when the prompt they are part of leaves no room in the context.
void check_fits_context(size_t n_prompt, const AudioArgs& a, const std::vector<int32_t>& counts, int ctx_size) {
  if (a.clips.empty() || n_prompt < static_cast<size_t>(ctx_size)) return;
  std::string clips;
  for (size_t i = 0; i < a.clips.size(); ++i)
    clips += (i ? ", " : "") + a.clips[i] + " (" + std::to_string(counts[i]) + " tokens)";
  fail("the prompt with audio %s is %zu tokens, past the context of %d: raise --ctx-size or shorten the audio",
       clips.c_str(), n_prompt, ctx_size);
}

}  // namespace

EncodedMedia encode_media(const ImageArgs& images, const AudioArgs& audio, EngineSession& sess) {
  EncodedMedia m;
  m.images = encode_images(images, sess);
  m.audio = encode_clips(audio, sess);
  m.blocks = !images.images.empty() && sess.image_tower()->bidirectional_images();
  if (m.blocks && !audio.clips.empty())
    fail("this mmproj's images attend bidirectionally (a 26B/31B tower): audio clips cannot share their prompt");
  return m;
}

MediaPrompt place_media(const std::vector<int32_t>& ids, const EncodedMedia& m, const AudioArgs& audio,
                        EngineSession& sess, const Tokenizer& tok) {
  std::vector<int32_t> all = m.images.counts;  // as many markers as items, else expansion fails
  all.insert(all.end(), m.audio.counts.begin(), m.audio.counts.end());
  check_fits_context(static_cast<size_t>(chat::expanded_length(ids.size(), all)), audio, m.audio.counts,
                     sess.ctx_size());
  std::vector<chat::MediaKind> kinds;
  const chat::ChatFormat format = model_chat_format(sess.file(), tok);
  if (!m.images.counts.empty()) kinds.push_back({image_markers(format), m.images.counts, "image"});
  if (!m.audio.counts.empty()) kinds.push_back({audio_markers(format), m.audio.counts, "audio clip"});
  MediaPrompt out;
  if (kinds.empty()) {
    out.ids = ids;
    return out;
  }
  chat::ExpandedPrompt e;
  try {
    e = chat::expand_placeholders(ids, kinds);
  } catch (const Error& err) {
    fail("%s (one '<|image|>' per --image, one '<|audio|>' per --audio)", err.what());
  }
  auto soft = std::make_shared<engine::SoftTokens>();
  soft->width = sess.spec().n_embd;
  soft->blocks = m.blocks;
  soft->rows = m.images.rows;
  soft->rows.insert(soft->rows.end(), m.audio.rows.begin(), m.audio.rows.end());
  for (int64_t r : e.soft_row) soft->at.push_back(r < 0 ? nullptr : soft->rows.data() + r * soft->width);
  out.ids = std::move(e.ids);
  out.soft = std::move(soft);
  return out;
}

MediaPrompt expand_media(const std::vector<int32_t>& ids, const ImageArgs& images, const AudioArgs& audio,
                         EngineSession& sess, const Tokenizer& tok) {
  if (images.images.empty() && audio.clips.empty() && !images.mmproj.empty())
    std::fprintf(stderr, "--mmproj given without --image or --audio: no media here\n");
  return place_media(ids, encode_media(images, audio, sess), audio, sess, tok);
}

}  // namespace sluice::app
