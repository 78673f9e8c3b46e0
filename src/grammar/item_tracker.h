// Follows the JSON text a matcher has accepted, for `uniqueItems`: for each open array, the
// text of its current item and the canonical form of its finished items, so the matcher can
// tell whether a ',' or ']' would close an item equal to an earlier one of the same array.
// A grammar cannot say "different from every earlier item"; the matcher checks it on the
// bytes (docs/structured-output.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::grammar {

class ItemTracker {
 public:
  // The next byte of the text.
  void feed(uint8_t b);
  // Whether `b`, as the next byte, would close an array item equal (JSON equality: 1 == 1.0,
  // members in any order) to an earlier item of that array.
  bool closes_duplicate(uint8_t b) const;
  // Whether the last byte fed completed an array item that can only end here (a string, an
  // object, an array) equal to an earlier item: checked before the delimiter, so the value
  // is refused at its last byte rather than left with no way to go on.
  bool completed_duplicate() const;
  // Some array is open (only then can a byte close an item).
  bool in_array() const { return arrays_ > 0; }
  void reset() { *this = ItemTracker(); }

 private:
  struct Level {
    bool array = false;
    bool open = false;               // an item has started and not closed
    std::string cur;                 // its text so far
    std::vector<std::string> items;  // finished items, canonical
  };
  void append(uint8_t b, size_t levels);
  std::vector<Level> levels_;
  size_t arrays_ = 0;
  bool in_str_ = false, esc_ = false;
};

// Bytes after which an item may close or be complete (the tokens worth checking).
inline constexpr std::string_view kItemEndBytes = ",]}\"";

// The canonical text of a JSON value (sorted members, integral numbers as integers); empty
// when the text is not one JSON value.
std::string canonical_json(std::string_view text);

}  // namespace sluice::grammar
