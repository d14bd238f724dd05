// Text helpers shared by the bundle side: UTF-8 and Python's repr() of a string, so that a refusal names a
// member or a key exactly as mgerun does ('model.onnx', "it's").
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgerun {

// Whether `s` is valid UTF-8 as Python's strict decoder takes it (no overlong forms, no surrogates, <= U+10FFFF).
bool valid_utf8(const std::string& s);
// Python's words for the first byte its strict UTF-8 decoder refuses in s.
std::string utf8_problem(const std::string& s);
// The code points of valid UTF-8 text.
std::vector<uint32_t> code_points(const std::string& s);
// One code point as UTF-8.
void append_utf8(std::string& out, uint32_t cp);
// Python's repr() of a str holding this UTF-8 text ('a', "it's", '\x00').
std::string py_repr(const std::string& s);
// Python's repr() of bytes (b'abc\x9e').
std::string py_bytes_repr(const std::string& bytes);
// The text with ASCII letters lower-cased and other letters folded as far as a bundle needs (a name that
// differs from another only in case): Python's str.casefold() for Latin-1 and Greek/Cyrillic basics.
std::string fold_case(const std::string& s);

}  // namespace mgerun

#include <memory>
#include <unordered_map>

namespace mgerun {

// A JSON value as Python's json module reads it: objects keep their keys in the order first written (a key
// written twice keeps its last value), an integer written without a fraction stays an integer however large
// (`big`: beyond 64 bits, its value then approximate), a number that overflows a double is an infinity.
struct JNode {
  enum Kind { kNull, kBool, kInt, kUInt, kBigInt, kFloat, kString, kArray, kObject } kind = kNull;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;  // kFloat and kBigInt (approximate); every number's value as a double in number()
  std::string s;
  std::vector<JNode> items;                          // kArray
  std::vector<std::pair<std::string, JNode>> members;  // kObject, in first-written order
  std::unordered_map<std::string, std::size_t> index;  // kObject: key -> position in members

  bool is_number() const { return kind == kInt || kind == kUInt || kind == kBigInt || kind == kFloat; }
  bool is_integer() const { return kind == kInt || kind == kUInt || kind == kBigInt; }
  double number() const;
  const JNode* get(const std::string& key) const;  // an object's member, or nullptr
  bool has(const std::string& key) const { return get(key) != nullptr; }
};

// Parses UTF-8 JSON text. Throws JsonError with Python's kind of reason where it can.
struct JsonError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
JNode parse_json(const std::string& text, std::size_t max_depth);

}  // namespace mgerun
