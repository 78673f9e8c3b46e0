// llama.cpp's load-time rules keyed on token *text* (spec §2.1 "post-processing", §11):
// the end-of-turn / FIM tokens found by name, "unused" control tokens, and the set of
// end-of-generation (EOG) tokens with its model-specific exceptions. These rules change
// token attributes, and attributes decide special-token matching and rendering, so they
// must run before the special-token index and the piece cache are built.
#include <algorithm>
#include <set>
#include <span>

#include "tokenizer/vocab.h"

namespace sluice::tok {

namespace {

using Names = std::span<const std::string_view>;

// Text lists from llama.cpp src/llama-vocab.cpp (the "auto-detect special tokens by text"
// block). They name tokens of many model families; only a few exist in Gemma vocabularies.
constexpr std::string_view kEotNames[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "<|end_of_text|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "<\xEF\xBD\x9C"
                                          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                          "<end_of_utterance>"};
constexpr std::string_view kEomNames[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreNames[] = {"<|fim_prefix|>",
                                             "<fim-prefix>",
                                             "<fim_prefix>",
                                             "<\xEF\xBD\x9C"
                                             "fim\xE2\x96\x81"
                                             "begin\xEF\xBD\x9C>",
                                             "<PRE>",
                                             "\xE2\x96\x81<PRE>",
                                             "<|code_prefix|>",
                                             "<|prefix|>"};
constexpr std::string_view kFimSufNames[] = {"<|fim_suffix|>",
                                             "<fim-suffix>",
                                             "<fim_suffix>",
                                             "<\xEF\xBD\x9C"
                                             "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                             "<SUF>",
                                             "\xE2\x96\x81<SUF>",
                                             "<|code_suffix|>",
                                             "<|suffix|>"};
constexpr std::string_view kFimMidNames[] = {"<|fim_middle|>",
                                             "<fim-middle>",
                                             "<fim_middle>",
                                             "<\xEF\xBD\x9C"
                                             "fim\xE2\x96\x81"
                                             "end\xEF\xBD\x9C>",
                                             "<MID>",
                                             "\xE2\x96\x81<MID>",
                                             "<|code_middle|>",
                                             "<|middle|>"};
constexpr std::string_view kFimPadNames[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepNames[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepNames[] = {"<|file_sep|>"};
// Spec §11: every token with one of these texts stops generation (and becomes CONTROL).
constexpr std::string_view kEogNames[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>",
                                          "<\xEF\xBD\x9C"
                                          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                          "[e~["};
// gpt-oss channel markers that llama.cpp always renders (set to USER_DEFINED).
constexpr std::string_view kAlwaysRenderNames[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

bool in(Names names, std::string_view s) { return std::find(names.begin(), names.end(), s) != names.end(); }

}  // namespace

void derive_special_tokens(Vocab& v) {
  // llama.cpp walks its text -> id hash map, whose order is unspecified; where a list
  // matches several tokens, sluice takes the lowest id. Each distinct text is visited once,
  // with its first id (the one text lookups return).
  auto unique = [&](int32_t id) { return v.find(v.text(id)) == id; };
  auto force_control = [&](int32_t id) { v.attrs[id] |= kAttrControl; };

  struct Detect {
    Names names;
    int32_t* id;
  };
  const Detect detects[] = {{kEotNames, &v.eot},        {kEomNames, &v.eom},        {kFimPreNames, &v.fim_pre},
                            {kFimSufNames, &v.fim_suf}, {kFimMidNames, &v.fim_mid}, {kFimPadNames, &v.fim_pad},
                            {kFimRepNames, &v.fim_rep}, {kFimSepNames, &v.fim_sep}};
  for (int32_t id = 0; id < v.n_vocab; ++id) {
    if (!unique(id)) continue;
    const std::string_view t = v.text(id);
    for (size_t k = 0; k < std::size(detects); ++k) {
      // An id from the file (e.g. tokenizer.ggml.eot_token_id) is never replaced.
      if (*detects[k].id == kNoToken && in(detects[k].names, t)) {
        *detects[k].id = id;
        force_control(id);  // "control-looking token ... was not control-type"
      }
    }
  }

  // Control tokens whose text contains "unused" (Gemma's <unused0>..) are also UNUSED:
  // still matched by special parsing, never rendered unless asked for.
  for (int32_t id = 0; id < v.n_vocab; ++id) {
    if (!unique(id) || !(v.attrs[id] & kAttrControl) || (v.attrs[id] & kAttrUnused)) continue;
    if (v.text(id).find("unused") != std::string_view::npos) v.attrs[id] |= kAttrUnused;
  }

  std::set<int32_t> eog;
  for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep})
    if (id != kNoToken) eog.insert(id);
  for (int32_t id = 0; id < v.n_vocab; ++id) {
    if (!unique(id)) continue;
    if (in(kEogNames, v.text(id))) {
      eog.insert(id);
      force_control(id);
    }
  }
  for (int32_t id = 0; id < v.n_vocab; ++id)
    if (unique(id) && in(kAlwaysRenderNames, v.text(id))) v.attrs[id] = kAttrUserDefined;

  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id != kNoToken) eog.insert(id);

  // gpt-oss / solar-open: "<|end|>" is not a stop token when "<|return|>" and "<|call|>"
  // (or "<|calls|>" and "<|flush|>") are.
  {
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = kNoToken;
    for (int32_t id : eog) {
      const std::string_view t = v.text(id);
      if (t == "<|return|>") has_return = true;
      else if (t == "<|call|>" || t == "<|calls|>") has_call = true;
      else if (t == "<|flush|>") has_flush = true;
      else if (t == "<|end|>") end_id = id;
    }
    if (end_id != kNoToken && ((has_return && has_call) || (has_call && has_flush))) {
      eog.erase(end_id);
      v.attrs[end_id] = kAttrUserDefined;
    }
  }
  // Gemma 4 (PR #21492): "</s>" is ordinary text when "<|tool_response>" is a stop token.
  {
    bool has_marker = false;
    int32_t s_id = kNoToken;
    for (int32_t id : eog) {
      const std::string_view t = v.text(id);
      if (t == "<|tool_response>" || t == "<|plamo:eos|>") has_marker = true;
      else if (t == "</s>") s_id = id;
    }
    if (has_marker && s_id != kNoToken) {
      eog.erase(s_id);
      v.attrs[s_id] = kAttrNormal;
    }
  }

  v.eog.assign(eog.begin(), eog.end());
  v.eog_flag.assign(static_cast<size_t>(v.n_vocab), 0);
  for (int32_t id : v.eog) v.eog_flag[id] = 1;
}

}  // namespace sluice::tok
