// A prompt's media placeholders expanded for the model (docs/spec/gemma4.md §9.4): the chat
// template writes one placeholder id per image; the model reads begin + n × placeholder + end,
// where n is the image's soft-token count, and each of the n positions takes one encoder row
// instead of its token embedding. Token ids only: the ids come from the model's vocabulary
// (the caller looks them up), so no model's markup text is written here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sluice::chat {

// A kind of media's ids (chat::ChatFormat::image / audio hold the model's; -1 where the
// vocabulary lacks one), brace-initialised in this order: placeholder, begin, end.
struct MediaMarkers {
  int32_t placeholder = -1;  // one per item in the rendered prompt; also each soft position's id
  int32_t begin = -1;        // written before an item's soft positions
  int32_t end = -1;          // and after them
};

struct ExpandedPrompt {
  std::vector<int32_t> ids;
  // Per position of `ids`: the index of its soft row (items' rows counted in order), or -1.
  std::vector<int64_t> soft_row;
};

// How many placeholder ids `ids` holds.
size_t count_placeholders(std::span<const int32_t> ids, const MediaMarkers& m);

// The prompt's length once expanded for items of `counts` soft tokens (no allocation of it).
int64_t expanded_length(size_t n_ids, std::span<const int32_t> counts);

// Replaces the i-th placeholder by begin + counts[i] × placeholder + end. Throws sluice::Error
// when the prompt has not exactly counts.size() placeholders (a text that spells one out, or a
// template that dropped an item).
ExpandedPrompt expand_placeholders(std::span<const int32_t> ids, const MediaMarkers& m,
                                   std::span<const int32_t> counts);

// One kind of media in a prompt (images, audio clips): its markers, each item's soft-token
// count in prompt order, and the noun messages use ("image", "audio clip").
struct MediaKind {
  MediaMarkers markers;
  std::span<const int32_t> counts;
  const char* noun = "item";
};

// expand_placeholders over several kinds at once (their placeholders distinct), each item
// expanded where its placeholder stands, so kinds mix in any order. Soft rows are numbered kind
// by kind: kind 0's items first (in prompt order), then kind 1's, ... Throws sluice::Error when
// a kind's placeholder count differs from its item count.
ExpandedPrompt expand_placeholders(std::span<const int32_t> ids, std::span<const MediaKind> kinds);

}  // namespace sluice::chat
