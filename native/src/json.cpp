#include "json.h"

#include <cstdio>

namespace mgerun {

namespace {

// Decode one code point at s[i]; returns false on invalid UTF-8 (as Python's strict "utf-8" codec).
bool next_cp(const std::string& s, std::size_t& i, uint32_t& cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size();
  unsigned char c = p[i];
  if (c < 0x80) {
    cp = c;
    i += 1;
    return true;
  }
  int len;
  uint32_t min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, cp = c & 0x1F, min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, cp = c & 0x0F, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return false;
  }
  if (i + len > n) return false;
  for (int k = 1; k < len; ++k) {
    unsigned char d = p[i + k];
    if ((d & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  i += len;
  return true;
}

}  // namespace

bool valid_utf8(const std::string& s) {
  std::size_t i = 0;
  uint32_t cp;
  while (i < s.size())
    if (!next_cp(s, i, cp)) return false;
  return true;
}

std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  std::size_t i = 0;
  uint32_t cp;
  while (i < s.size()) {
    if (!next_cp(s, i, cp)) {  // not UTF-8: each byte stands for itself (never for names checked as UTF-8)
      cp = static_cast<unsigned char>(s[i]);
      ++i;
    }
    out.push_back(cp);
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string py_repr(const std::string& s) {
  std::vector<uint32_t> cps = code_points(s);
  bool single = false, dbl = false;
  for (uint32_t c : cps) {
    single |= c == '\'';
    dbl |= c == '"';
  }
  char quote = (single && !dbl) ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (uint32_t c : cps) {
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0) || c == 0xAD) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if ((c >= 0xD800 && c <= 0xDFFF) || c == 0x2028 || c == 0x2029 || (c >= 0xFFF9 && c <= 0xFFFB) ||
               c == 0xFEFF || (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) ||
               (c >= 0x2060 && c <= 0x206F) || (c >= 0xE000 && c <= 0xF8FF) || c == 0xFFFE || c == 0xFFFF) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::string py_bytes_repr(const std::string& bytes) {
  bool single = bytes.find('\'') != std::string::npos, dbl = bytes.find('"') != std::string::npos;
  char quote = (single && !dbl) ? '"' : '\'';
  std::string out = "b";
  out += quote;
  char buf[8];
  for (unsigned char c : bytes) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c >= 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string fold_case(const std::string& s) {
  std::string out;
  for (uint32_t c : code_points(s)) {
    if (c >= 'A' && c <= 'Z') {
      c += 32;
    } else if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) {
      c += 32;  // Latin-1 capitals
    } else if (c == 0xDF) {
      out += "ss";  // German sharp s folds to "ss"
      continue;
    } else if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) {
      c += 32;  // Greek capitals
    } else if (c == 0x3C2) {
      c = 0x3C3;  // final sigma
    } else if (c >= 0x410 && c <= 0x42F) {
      c += 32;  // Cyrillic capitals
    } else if (c >= 0x400 && c <= 0x40F) {
      c += 80;
    } else if (c == 0xB5) {
      c = 0x3BC;  // micro sign
    }
    append_utf8(out, c);
  }
  return out;
}

}  // namespace mgerun

#include <cmath>

#include <nlohmann/json.hpp>

namespace mgerun {

double JNode::number() const {
  switch (kind) {
    case kInt:
      return static_cast<double>(i);
    case kUInt:
      return static_cast<double>(u);
    case kBigInt:
    case kFloat:
      return d;
    default:
      return 0;
  }
}

const JNode* JNode::get(const std::string& key) const {
  if (kind != kObject) return nullptr;
  auto it = index.find(key);
  return it == index.end() ? nullptr : &members[it->second].second;
}

namespace {

constexpr std::size_t kMaxIntDigits = 4300;  // Python's limit on converting a long integer string
// Python's json reads NaN, Infinity, -Infinity and numbers beyond a double (an infinity, or an integer of any
// size); nlohmann-json reads none of them. They are rewritten to these numbers before parsing (mark values no
// writer gives), and read back as what Python reads.
const char* const kPlusInf = "8.98846567431158e307";
const char* const kMinusInf = "-8.98846567431158e307";
const char* const kNaN = "8.98846567431157e307";
const std::string kHugeInt = "1" + std::string(308, '0');

struct TooManyDigits {};

// The text with Python's extra literals and out-of-range numbers rewritten (strings untouched).
std::string python_literals(const std::string& t) {
  std::string out;
  bool changed = false;
  std::size_t i = 0, n = t.size(), copied = 0;
  auto replace = [&](std::size_t from, std::size_t to, const std::string& with) {
    out.append(t, copied, from - copied);
    out += with;
    copied = to;
    changed = true;
  };
  while (i < n) {
    char c = t[i];
    if (c == '"') {  // skip a string, escapes included
      ++i;
      while (i < n && t[i] != '"') i += t[i] == '\\' ? 2 : 1;
      ++i;
    } else if (c == 'N' && t.compare(i, 3, "NaN") == 0) {
      replace(i, i + 3, kNaN);
      i += 3;
    } else if (c == 'I' && t.compare(i, 8, "Infinity") == 0) {
      replace(i, i + 8, kPlusInf);
      i += 8;
    } else if (c == '-' && t.compare(i, 9, "-Infinity") == 0) {
      replace(i, i + 9, kMinusInf);
      i += 9;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t start = i;
      if (t[i] == '-') ++i;
      std::size_t digits_from = i;
      while (i < n && t[i] >= '0' && t[i] <= '9') ++i;
      std::size_t int_digits = i - digits_from;
      bool integer = true;
      if (i < n && t[i] == '.') {
        integer = false;
        ++i;
        while (i < n && t[i] >= '0' && t[i] <= '9') ++i;
      }
      if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        integer = false;
        ++i;
        if (i < n && (t[i] == '+' || t[i] == '-')) ++i;
        while (i < n && t[i] >= '0' && t[i] <= '9') ++i;
      }
      if (integer && int_digits > kMaxIntDigits) throw TooManyDigits{};
      if (integer && int_digits > 300) {
        replace(start, i, (t[start] == '-' ? "-" : "") + kHugeInt);
      } else if (!integer && i - start > 0) {
        double v = std::strtod(t.substr(start, i - start).c_str(), nullptr);
        if (std::isinf(v)) replace(start, i, v > 0 ? kPlusInf : kMinusInf);
      }
      if (i == start) ++i;
    } else {
      ++i;
    }
  }
  if (!changed) return t;
  out.append(t, copied, std::string::npos);
  return out;
}

// Builds JNodes from nlohmann's SAX events (its parser keeps its own stack: no recursion on nested input).
class Builder : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit Builder(std::size_t max_depth) : max_depth_(max_depth) {}
  JNode root;
  std::string error;

  bool null() override { return put(JNode{}); }
  bool boolean(bool v) override {
    JNode n;
    n.kind = JNode::kBool;
    n.b = v;
    return put(std::move(n));
  }
  bool number_integer(number_integer_t v) override {
    JNode n;
    n.kind = JNode::kInt;
    n.i = v;
    return put(std::move(n));
  }
  bool number_unsigned(number_unsigned_t v) override {
    JNode n;
    if (v <= static_cast<number_unsigned_t>(INT64_MAX)) {  // nlohmann reads every non-negative integer so
      n.kind = JNode::kInt;
      n.i = static_cast<int64_t>(v);
    } else {
      n.kind = JNode::kUInt;
      n.u = v;
    }
    return put(std::move(n));
  }
  bool number_float(number_float_t v, const string_t& text) override {
    JNode n;
    if (text == kPlusInf || text == kMinusInf || text == kNaN) {  // written by python_literals() below
      n.kind = JNode::kFloat;
      n.d = text == kNaN ? std::nan("") : text == kPlusInf ? HUGE_VAL : -HUGE_VAL;
      return put(std::move(n));
    }
    bool integer = text.find_first_of(".eE") == std::string::npos;
    n.kind = integer ? JNode::kBigInt : JNode::kFloat;
    n.d = v;
    return put(std::move(n));
  }
  bool string(string_t& v) override {
    JNode n;
    n.kind = JNode::kString;
    n.s = std::move(v);
    return put(std::move(n));
  }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(JNode::kObject); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(JNode::kArray); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    if (error.empty()) {
      std::string what = ex.what();
      if (what.find("number overflow") != std::string::npos) {
        overflow_at_ = position;
      }
      error = what;
    }
    return false;
  }

 private:
  bool put(JNode n) {
    if (stack_.empty()) {
      root = std::move(n);
      return true;
    }
    JNode* top = stack_.back();
    if (top->kind == JNode::kArray) {
      top->items.push_back(std::move(n));
    } else {
      auto it = top->index.find(key_);
      if (it != top->index.end()) {
        top->members[it->second].second = std::move(n);  // a key written twice: its last value, first place
      } else {
        top->index.emplace(key_, top->members.size());
        top->members.emplace_back(key_, std::move(n));
      }
    }
    return true;
  }
  JNode* last_put() {
    if (stack_.empty()) return &root;
    JNode* top = stack_.back();
    if (top->kind == JNode::kArray) return &top->items.back();
    return &top->members[top->index[key_]].second;
  }
  bool open(JNode::Kind kind) {
    if (stack_.size() >= max_depth_) {
      error = "nested too deep";
      return false;
    }
    JNode n;
    n.kind = kind;
    put(std::move(n));
    stack_.push_back(last_put());
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  std::size_t max_depth_;
  std::vector<JNode*> stack_;
  std::string key_;
  std::size_t overflow_at_ = 0;
};

}  // namespace

// Python's words for the first byte its strict UTF-8 decoder refuses.
std::string utf8_problem(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0, n = s.size();
  char buf[160];
  while (i < n) {
    std::size_t at = i;
    uint32_t cp;
    if (next_cp(s, i, cp)) continue;
    unsigned char c = p[at];
    int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    const char* reason = "invalid start byte";
    if (len) {
      reason = "invalid continuation byte";
      std::size_t k = 1;
      while (k < static_cast<std::size_t>(len) && at + k < n && (p[at + k] & 0xC0) == 0x80) ++k;
      if (at + k >= n && k < static_cast<std::size_t>(len)) reason = "unexpected end of data";
    }
    std::snprintf(buf, sizeof buf, "'utf-8' codec can't decode byte 0x%02x in position %zu: %s", c, at, reason);
    return buf;
  }
  return "invalid UTF-8";
}

JNode parse_json(const std::string& text, std::size_t max_depth) {
  if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0)
    throw JsonError("Unexpected UTF-8 BOM (decode using utf-8-sig)");
  if (!valid_utf8(text)) throw JsonError(utf8_problem(text));
  std::string rewritten;
  try {
    rewritten = python_literals(text);
  } catch (const TooManyDigits&) {
    throw JsonError("a number with thousands of digits");
  }
  Builder b(max_depth);
  bool ok = nlohmann::json::sax_parse(rewritten, &b, nlohmann::json::input_format_t::json, true);
  if (!ok) {
    if (b.error == "nested too deep") throw JsonError("nested too deep");
    throw JsonError(b.error.empty() ? "invalid JSON" : b.error);
  }
  return std::move(b.root);
}

}  // namespace mgerun
