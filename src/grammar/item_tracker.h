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
  // The next byte of the text. unique_comma: b is the ',' after an item of a `uniqueItems`
  // array (a parse waits at Grammar::unique_close): its array's integer prefixes are checked
  // from then on (dead_integer_prefix), those of other arrays never.
  void feed(uint8_t b, bool unique_comma = false);
  // Offsets of the bytes fed with unique_comma (to feed the same text again after a rollback).
  const std::vector<size_t>& unique_commas() const { return marks_; }
  // Whether `b`, as the next byte, would close an array item equal (JSON equality: 1 == 1.0,
  // members in any order) to an earlier item of that array.
  bool closes_duplicate(uint8_t b) const;
  // Whether the last byte fed completed an array item that can only end here (a string, an
  // object, an array) equal to an earlier item: checked before the delimiter, so the value
  // is refused at its last byte rather than left with no way to go on.
  bool completed_duplicate() const;
  // Whether the current item of a unique array is an integer prefix (-?digits) every integer completion of which
  // (at most kUniqueIntegerDigits digits, no leading zero) is an earlier item: it could only end
  // as a duplicate, so the byte that made it is refused ("0" once 0 is written; "12" once 12 and
  // 120..129 are, with a 2-digit cap). Never leaves an item without a way on: a live prefix has
  // a live completion one byte away. Numbers with a fraction or exponent are not looked at.
  bool dead_integer_prefix() const;
  // The top level is an array with an item written, not inside a string: a digit or '-' may
  // start or grow an item that dead_integer_prefix refuses.
  bool in_number_context() const;
  // Some array is open (only then can a byte close an item).
  bool in_array() const { return arrays_ > 0; }
  // The innermost container is an array with an item written and the next one not begun
  // (after a ',': where an item's first byte comes next).
  bool between_items() const {
    return !in_str_ && !levels_.empty() && levels_.back().array && !levels_.back().open &&
           !levels_.back().items.empty();
  }
  // The innermost container is an array and an item of it is being written (not inside a
  // string of it), so a ',' would close that item.
  bool item_open() const { return !in_str_ && !levels_.empty() && levels_.back().array && levels_.back().open; }
  // The finished items (canonical) of the innermost container (empty when it is no array).
  const std::vector<std::string>& items() const {
    static const std::vector<std::string> none;
    return levels_.empty() ? none : levels_.back().items;
  }
  void reset() { *this = ItemTracker(); }

 private:
  struct Level {
    bool array = false;
    bool open = false;               // an item has started and not closed
    bool unique = false;             // a ',' of it was a unique array's
    std::string cur;                 // its text so far
    std::vector<std::string> items;  // finished items, canonical
  };
  void append(uint8_t b, size_t levels);
  void feed_byte(uint8_t b, bool unique_comma);
  std::vector<Level> levels_;
  std::vector<size_t> marks_;  // see unique_commas()
  size_t fed_ = 0;
  size_t arrays_ = 0;
  bool in_str_ = false, esc_ = false;
};

// Bytes after which an item may close or be complete (the tokens worth checking).
inline constexpr std::string_view kItemEndBytes = ",]}\"";
// JSON whitespace.
inline constexpr std::string_view kWhitespaceBytes = " \n\t\r";
// Bytes that may start or grow an integer item (tokens worth checking in a number context).
inline constexpr std::string_view kIntegerBytes = "-0123456789";
// Digits of the longest integer item of a unique array (the schema bounds integer items to
// |x| <= 10^17 - 1, so no 17-digit prefix can grow).
inline constexpr size_t kUniqueIntegerDigits = 17;

// The canonical text of a JSON value (sorted members, integral numbers as integers); empty
// when the text is not one JSON value.
std::string canonical_json(std::string_view text);

}  // namespace sluice::grammar
