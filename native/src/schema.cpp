#include "schema.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <stdexcept>
#include <vector>

namespace mgerun {

extern const unsigned char manifest_schema[];
extern const std::size_t manifest_schema_size;

// ------------------------------------------------------------------ regular expressions

namespace {

struct RNode;
using Seq = std::vector<RNode>;

struct RNode {
  enum Kind { kChar, kAny, kClass, kGroup, kLookahead, kBegin, kEnd } kind = kChar;
  uint32_t ch = 0;
  bool negate = false;                                   // class, lookahead
  std::vector<std::pair<uint32_t, uint32_t>> ranges;     // class
  std::vector<Seq> alternatives;                         // group, lookahead
  int min = 1, max = 1;                                  // quantifier; max -1: unbounded
  bool single() const { return kind == kChar || kind == kAny || kind == kClass; }
};

class Regex {
 public:
  explicit Regex(const std::string& pattern) : p_(code_points(pattern)) {
    std::size_t i = 0;
    top_ = alternation(i);
    if (i != p_.size()) fail("unbalanced )");
  }

  bool search(const std::vector<uint32_t>& s) const {
    for (std::size_t start = 0; start <= s.size(); ++start) {
      if (alt(top_, s, start, [](std::size_t) { return true; })) return true;
      if (anchored()) break;
    }
    return false;
  }

 private:
  using Cont = std::function<bool(std::size_t)>;

  [[noreturn]] void fail(const char* why) const { throw std::runtime_error(std::string("schema pattern: ") + why); }

  bool anchored() const {
    for (const Seq& s : top_)
      if (s.empty() || s[0].kind != RNode::kBegin) return false;
    return true;
  }

  std::vector<Seq> alternation(std::size_t& i) {
    std::vector<Seq> alts(1);
    while (i < p_.size() && p_[i] != ')') {
      if (p_[i] == '|') {
        alts.emplace_back();
        ++i;
        continue;
      }
      alts.back().push_back(atom(i));
    }
    return alts;
  }

  uint32_t escape(std::size_t& i, bool* is_class, RNode* cls) {
    uint32_t c = p_[i++];
    auto hex = [&](int n) {
      uint32_t v = 0;
      for (int k = 0; k < n; ++k) {
        if (i >= p_.size()) fail("short escape");
        uint32_t h = p_[i++];
        v = v * 16 + (h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
      }
      return v;
    };
    *is_class = false;
    switch (c) {
      case 'u':
        return hex(4);
      case 'x':
        return hex(2);
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'd':
        *is_class = true;
        cls->ranges.push_back({'0', '9'});
        return 0;
      case 'w':
        *is_class = true;
        cls->ranges.insert(cls->ranges.end(), {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}});
        return 0;
      case 's':
        *is_class = true;
        cls->ranges.insert(cls->ranges.end(), {{' ', ' '}, {'\t', '\r'}});
        return 0;
      default:
        return c;
    }
  }

  RNode atom(std::size_t& i) {
    RNode n;
    uint32_t c = p_[i++];
    if (c == '^') {
      n.kind = RNode::kBegin;
      return n;
    }
    if (c == '$') {
      n.kind = RNode::kEnd;
      return n;
    }
    if (c == '(') {
      n.kind = RNode::kGroup;
      if (i + 1 < p_.size() && p_[i] == '?') {
        if (p_[i + 1] == '!' || p_[i + 1] == '=') {
          n.kind = RNode::kLookahead;
          n.negate = p_[i + 1] == '!';
        } else if (p_[i + 1] != ':') {
          fail("unsupported group");
        }
        i += 2;
      }
      n.alternatives = alternation(i);
      if (i >= p_.size()) fail("unclosed (");
      ++i;
    } else if (c == '.') {
      n.kind = RNode::kAny;
    } else if (c == '[') {
      n.kind = RNode::kClass;
      if (i < p_.size() && p_[i] == '^') {
        n.negate = true;
        ++i;
      }
      bool first = true;
      while (i < p_.size() && (p_[i] != ']' || first)) {
        first = false;
        uint32_t lo = p_[i++];
        if (lo == '\\') {
          bool is_class;
          lo = escape(i, &is_class, &n);
          if (is_class) continue;
        }
        uint32_t hi = lo;
        if (i + 1 < p_.size() && p_[i] == '-' && p_[i + 1] != ']') {
          ++i;
          hi = p_[i++];
          if (hi == '\\') {
            bool is_class;
            hi = escape(i, &is_class, &n);
          }
        }
        n.ranges.push_back({lo, hi});
      }
      if (i >= p_.size()) fail("unclosed [");
      ++i;
    } else if (c == '\\') {
      bool is_class;
      uint32_t e = escape(i, &is_class, &n);
      if (is_class)
        n.kind = RNode::kClass;
      else
        n.ch = e;
    } else {
      n.ch = c;
    }
    // a quantifier
    if (i < p_.size() && n.kind != RNode::kBegin && n.kind != RNode::kEnd && n.kind != RNode::kLookahead) {
      uint32_t q = p_[i];
      if (q == '*') {
        n.min = 0, n.max = -1, ++i;
      } else if (q == '+') {
        n.min = 1, n.max = -1, ++i;
      } else if (q == '?') {
        n.min = 0, n.max = 1, ++i;
      } else if (q == '{') {
        std::size_t j = i + 1;
        int a = 0, b = -1;
        bool digits = false;
        while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') a = a * 10 + static_cast<int>(p_[j++] - '0'), digits = true;
        if (digits && j < p_.size() && p_[j] == '}') {
          b = a, i = j + 1;
          n.min = a, n.max = b;
        } else if (digits && j < p_.size() && p_[j] == ',') {
          ++j;
          int bb = 0;
          bool d2 = false;
          while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') bb = bb * 10 + static_cast<int>(p_[j++] - '0'), d2 = true;
          if (j < p_.size() && p_[j] == '}') {
            n.min = a, n.max = d2 ? bb : -1, i = j + 1;
          }
        }
      }
      if (i < p_.size() && (p_[i] == '?' || p_[i] == '+') && (q == '*' || q == '+' || q == '?' || q == '{'))
        fail("lazy or possessive quantifiers");
    }
    return n;
  }

  static bool one(const RNode& n, uint32_t c) {
    switch (n.kind) {
      case RNode::kChar:
        return c == n.ch;
      case RNode::kAny:
        return c != '\n';
      case RNode::kClass: {
        bool in = false;
        for (auto& r : n.ranges) in |= c >= r.first && c <= r.second;
        return in != n.negate;
      }
      default:
        return false;
    }
  }

  bool alt(const std::vector<Seq>& alts, const std::vector<uint32_t>& s, std::size_t pos, const Cont& k) const {
    for (const Seq& seq : alts)
      if (seq_at(seq, 0, s, pos, k)) return true;
    return false;
  }

  bool seq_at(const Seq& seq, std::size_t idx, const std::vector<uint32_t>& s, std::size_t pos,
              const Cont& k) const {
    if (idx == seq.size()) return k(pos);
    const RNode& n = seq[idx];
    if (n.kind == RNode::kBegin) return pos == 0 && seq_at(seq, idx + 1, s, pos, k);
    if (n.kind == RNode::kEnd)
      return (pos == s.size() || (pos + 1 == s.size() && s[pos] == '\n')) && seq_at(seq, idx + 1, s, pos, k);
    if (n.kind == RNode::kLookahead) {
      bool found = alt(n.alternatives, s, pos, [](std::size_t) { return true; });
      return found != n.negate && seq_at(seq, idx + 1, s, pos, k);
    }
    if (n.single()) {  // greedy: as many as match, then fewer (a loop, not a recursion per character)
      std::size_t most = 0;
      std::size_t limit = n.max < 0 ? s.size() - pos : static_cast<std::size_t>(n.max);
      while (most < limit && pos + most < s.size() && one(n, s[pos + most])) ++most;
      if (most < static_cast<std::size_t>(n.min)) return false;
      for (std::size_t m = most + 1; m-- > static_cast<std::size_t>(n.min);)
        if (seq_at(seq, idx + 1, s, pos + m, k)) return true;
      return false;
    }
    // a group, repeated min..max times (greedy)
    std::function<bool(std::size_t, int)> rep = [&](std::size_t at, int count) -> bool {
      if (n.max < 0 || count < n.max) {
        bool more = alt(n.alternatives, s, at, [&](std::size_t next) {
          return next != at && rep(next, count + 1);  // an empty repetition ends the loop
        });
        if (more) return true;
      }
      return count >= n.min && seq_at(seq, idx + 1, s, at, k);
    };
    return rep(pos, 0);
  }

  std::vector<uint32_t> p_;
  std::vector<Seq> top_;
};

}  // namespace

bool regex_search(const std::string& pattern, const std::string& text) {
  static std::map<std::string, std::unique_ptr<Regex>> cache;
  auto it = cache.find(pattern);
  if (it == cache.end()) it = cache.emplace(pattern, std::make_unique<Regex>(pattern)).first;
  return it->second->search(code_points(text));
}

// ------------------------------------------------------------------ the schema walk

namespace {

using Path = std::vector<std::string>;  // keys, and "[N]" for list positions

bool is_identifier(const std::string& k) {
  if (k.empty() || k.size() > 64) return false;
  auto c0 = static_cast<unsigned char>(k[0]);
  if (!(std::isalpha(c0) || c0 == '_')) return false;
  for (unsigned char c : k)
    if (!(std::isalnum(c) || c == '_')) return false;
  return true;
}

std::string path_text(const Path& path) {
  std::string t;
  for (const std::string& key : path) {
    if (!key.empty() && key[0] == '\x01') {  // a list position
      t += "[" + key.substr(1) + "]";
    } else if (is_identifier(key)) {
      t += t.empty() ? key : "." + key;
    } else {
      std::vector<uint32_t> cps = code_points(key);
      std::string shown = key;
      if (cps.size() > 40) {
        shown.clear();
        for (std::size_t i = 0; i < 40; ++i) append_utf8(shown, cps[i]);
        shown += "...";
      }
      t += "[" + py_repr(shown) + "]";
    }
  }
  return t.empty() ? "(top)" : t;
}

std::string index_key(std::size_t i) { return "\x01" + std::to_string(i); }

struct Problem {
  Path path;
  std::string reason;
};
using Found = std::optional<Problem>;

std::string py_float(double v) {  // Python's repr of a float
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  // Python writes 1e-05 as 1e-05, 100.0 with its ".0", 1e+16 as 1e+16
  if (s.find_first_of(".einn") == std::string::npos) s += ".0";
  auto e = s.find('e');
  if (e != std::string::npos) {
    std::string mant = s.substr(0, e), ex = s.substr(e + 1);
    char sign = ex[0];
    std::string digits = ex.substr(1);
    while (digits.size() > 2 && digits[0] == '0') digits.erase(0, 1);
    if (digits.size() < 2) digits = "0" + digits;
    s = mant + "e" + sign + digits;
  }
  return s;
}

std::string json_number_text(const JNode& v) {
  switch (v.kind) {
    case JNode::kInt:
      return std::to_string(v.i);
    case JNode::kUInt:
      return std::to_string(v.u);
    case JNode::kBigInt: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f", v.d);
      return buf;
    }
    default:
      return py_float(v.d);
  }
}

// json.dumps of a scalar, cut to 60 characters (schema.py _show)
std::string show(const JNode& v) {
  std::string t;
  switch (v.kind) {
    case JNode::kNull:
      t = "null";
      break;
    case JNode::kBool:
      t = v.b ? "true" : "false";
      break;
    case JNode::kString: {
      t = "\"";
      char buf[16];
      for (uint32_t c : code_points(v.s)) {
        if (c == '"' || c == '\\') {
          t += '\\';
          t += static_cast<char>(c);
        } else if (c == '\n') {
          t += "\\n";
        } else if (c == '\r') {
          t += "\\r";
        } else if (c == '\t') {
          t += "\\t";
        } else if (c == '\b') {
          t += "\\b";
        } else if (c == '\f') {
          t += "\\f";
        } else if (c < 0x20 || c > 0x7E) {
          if (c > 0xFFFF) {
            uint32_t x = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (x >> 10), 0xDC00 + (x & 0x3FF));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
          }
          t += buf;
        } else {
          t += static_cast<char>(c);
        }
      }
      t += "\"";
      break;
    }
    case JNode::kArray:
    case JNode::kObject:
      t = "...";
      break;
    default:
      if (v.kind == JNode::kFloat && std::isnan(v.d))
        t = "NaN";
      else if (v.kind == JNode::kFloat && std::isinf(v.d))
        t = v.d > 0 ? "Infinity" : "-Infinity";
      else
        t = json_number_text(v);
  }
  return t.size() <= 60 ? t : t.substr(0, 57) + "...";
}

std::string kind_of(const JNode& v) {
  switch (v.kind) {
    case JNode::kNull:
      return "null";
    case JNode::kBool:
      return "true or false";
    case JNode::kFloat:
      if (std::isnan(v.d)) return "NaN";
      if (std::isinf(v.d)) return "an infinity";
      return "a number";
    case JNode::kInt:
    case JNode::kUInt:
    case JNode::kBigInt:
      return "a number";
    case JNode::kString:
      return "a string";
    case JNode::kArray:
      return "a list";
    case JNode::kObject:
      return "an object";
  }
  return "?";
}

bool is(const std::string& kind, const JNode& v) {
  if (kind == "object") return v.kind == JNode::kObject;
  if (kind == "array") return v.kind == JNode::kArray;
  if (kind == "string") return v.kind == JNode::kString;
  if (kind == "integer") return v.is_integer();
  if (kind == "number") return v.is_integer() || (v.kind == JNode::kFloat && std::isfinite(v.d));
  if (kind == "boolean") return v.kind == JNode::kBool;
  if (kind == "null") return v.kind == JNode::kNull;
  throw std::runtime_error("unknown JSON Schema type " + kind);
}

const char* type_name(const std::string& k) {
  if (k == "object") return "an object";
  if (k == "array") return "a list";
  if (k == "string") return "a string";
  if (k == "integer") return "a whole number";
  if (k == "number") return "a number";
  if (k == "boolean") return "true or false";
  if (k == "null") return "null";
  return "?";
}

// JSON's equality: true and 1 differ, 1 and 1.0 do not, objects compare by keys
bool equal(const JNode& a, const JNode& b) {
  if (a.kind == JNode::kBool || b.kind == JNode::kBool) return a.kind == b.kind && a.b == b.b;
  if (a.is_number() && b.is_number()) {
    if (a.kind == JNode::kInt && b.kind == JNode::kInt) return a.i == b.i;
    if (a.kind == JNode::kUInt && b.kind == JNode::kUInt) return a.u == b.u;
    return a.number() == b.number();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case JNode::kNull:
      return true;
    case JNode::kString:
      return a.s == b.s;
    case JNode::kArray:
      if (a.items.size() != b.items.size()) return false;
      for (std::size_t i = 0; i < a.items.size(); ++i)
        if (!equal(a.items[i], b.items[i])) return false;
      return true;
    case JNode::kObject:
      if (a.members.size() != b.members.size()) return false;
      for (auto& [k, v] : a.members) {
        const JNode* o = b.get(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    default:
      return false;
  }
}

std::vector<std::string> kinds_of(const JNode& type) {
  std::vector<std::string> out;
  if (type.kind == JNode::kString)
    out.push_back(type.s);
  else
    for (auto& t : type.items) out.push_back(t.s);
  return out;
}

class Walk {
 public:
  explicit Walk(const JNode& root) : root_(root) {}

  const JNode& resolve(const std::string& ref) const {
    if (ref.empty() || ref[0] != '#') throw std::runtime_error("only local references are supported");
    const JNode* node = &root_;
    std::size_t i = 1;
    while (i <= ref.size()) {
      std::size_t j = ref.find('/', i);
      if (j == std::string::npos) j = ref.size();
      std::string part = ref.substr(i, j - i);
      if (!part.empty()) {
        std::string key;
        for (std::size_t k = 0; k < part.size(); ++k) {
          if (part[k] == '~' && k + 1 < part.size()) {
            key += part[k + 1] == '1' ? '/' : '~';
            ++k;
          } else {
            key += part[k];
          }
        }
        node = node->get(key);
        if (!node) throw std::runtime_error("schema reference " + ref + " not found");
      }
      i = j + 1;
    }
    return *node;
  }

  std::string describe(const JNode& schema) const {
    if (schema.kind == JNode::kBool) return schema.b ? "anything" : "nothing";
    if (schema.kind != JNode::kObject) return "nothing";
    if (auto r = schema.get("$ref")) return describe(resolve(r->s));
    if (auto c = schema.get("const")) return show(*c);
    if (auto e = schema.get("enum")) {
      std::string t = "one of ";
      for (std::size_t i = 0; i < e->items.size() && i < 8; ++i) t += (i ? ", " : "") + show(e->items[i]);
      if (e->items.size() > 8) t += ", ...";
      return t;
    }
    if (auto ty = schema.get("type")) {
      auto kinds = kinds_of(*ty);
      std::string t;
      for (std::size_t i = 0; i < kinds.size(); ++i) t += (i ? " or " : "") + std::string(type_name(kinds[i]));
      if (auto m = schema.get("minimum")) {
        bool numeric = false;
        for (auto& k : kinds) numeric |= k == "integer" || k == "number";
        if (numeric) t += " >= " + json_number_text(*m);
      }
      return t;
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto list = schema.get(key)) {
        std::string t;
        for (std::size_t i = 0; i < list->items.size(); ++i) t += (i ? " or " : "") + describe(list->items[i]);
        return t;
      }
    }
    return "another value";
  }

  std::optional<std::vector<std::string>> types(const JNode& schema) const {
    if (schema.kind != JNode::kObject) return std::nullopt;
    if (auto r = schema.get("$ref")) return types(resolve(r->s));
    if (auto t = schema.get("type")) return kinds_of(*t);
    std::vector<const JNode*> values;
    if (auto c = schema.get("const"))
      values.push_back(c);
    else if (auto e = schema.get("enum"))
      for (auto& v : e->items) values.push_back(&v);
    else
      return std::nullopt;
    std::vector<std::string> out;  // sorted, as schema.py's sorted(set)
    for (const char* k : {"array", "boolean", "integer", "null", "number", "object", "string"}) {
      for (auto* v : values)
        if (is(k, *v)) {
          out.push_back(k);
          break;
        }
    }
    return out;
  }

  Found check(const JNode& schema, const JNode& value, Path& path) const {
    if (schema.kind == JNode::kBool) {
      if (schema.b) return std::nullopt;
      return Problem{path, "not allowed here"};
    }
    if (schema.kind != JNode::kObject) return std::nullopt;
    // the keywords in schema.py's _CHECKS order, each checker once
    if (auto r = schema.get("$ref"))
      if (auto f = check(resolve(r->s), value, path)) return f;
    if (auto t = schema.get("type")) {
      auto kinds = kinds_of(*t);
      bool ok = false;
      for (auto& k : kinds) ok |= is(k, value);
      if (!ok) {
        std::string want;
        for (std::size_t i = 0; i < kinds.size(); ++i) want += (i ? " or " : "") + std::string(type_name(kinds[i]));
        return Problem{path, "expected " + want + ", got " + kind_of(value)};
      }
    }
    if (auto c = schema.get("const"))
      if (!equal(value, *c)) return Problem{path, "expected " + show(*c)};
    if (auto e = schema.get("enum")) {
      bool ok = false;
      for (auto& allowed : e->items) ok |= equal(value, allowed);
      if (!ok) {
        JNode only;
        only.kind = JNode::kObject;
        only.index.emplace("enum", 0);
        only.members.emplace_back("enum", *e);
        return Problem{path, "expected " + describe(only)};
      }
    }
    if (schema.has("minimum") || schema.has("maximum") || schema.has("exclusiveMinimum") ||
        schema.has("exclusiveMaximum")) {
      if (is("number", value)) {
        double v = value.number();
        struct {
          const char* key;
          const char* words;
        } bounds[] = {{"minimum", ">="}, {"maximum", "<="}, {"exclusiveMinimum", ">"}, {"exclusiveMaximum", "<"}};
        for (auto& b : bounds) {
          const JNode* bound = schema.get(b.key);
          if (!bound) continue;
          bool fails = compare_fails(value, *bound, b.words);
          (void)v;
          if (fails)
            return Problem{path, std::string("expected a number ") + b.words + " " + json_number_text(*bound) +
                                     ", got " + show(value)};
        }
      }
    }
    if (schema.has("minLength") || schema.has("maxLength") || schema.has("pattern")) {
      if (value.kind == JNode::kString) {
        std::size_t len = code_points(value.s).size();
        if (auto m = schema.get("minLength")) {
          if (static_cast<double>(len) < m->number())
            return Problem{path, m->number() == 1 ? "expected a string that is not empty" : "too short"};
        }
        if (auto m = schema.get("maxLength")) {
          if (static_cast<double>(len) > m->number())
            return Problem{path, "longer than " + json_number_text(*m) + " characters"};
        }
        if (auto p = schema.get("pattern")) {
          if (!regex_search(p->s, value.s)) return Problem{path, show(value) + " is not of the form this field takes"};
        }
      }
    }
    if (schema.has("minItems") || schema.has("maxItems") || schema.has("items") || schema.has("uniqueItems")) {
      if (value.kind == JNode::kArray) {
        if (auto m = schema.get("minItems")) {
          if (static_cast<double>(value.items.size()) < m->number())
            return Problem{path, m->number() == 1 ? "expected a list that is not empty" : "too few items"};
        }
        if (auto m = schema.get("maxItems")) {
          if (static_cast<double>(value.items.size()) > m->number())
            return Problem{path, "more than " + json_number_text(*m) + " items"};
        }
        if (auto items = schema.get("items")) {
          for (std::size_t i = 0; i < value.items.size(); ++i) {
            path.push_back(index_key(i));
            auto f = check(*items, value.items[i], path);
            path.pop_back();
            if (f) return f;
          }
        }
        if (auto u = schema.get("uniqueItems"); u && u->kind == JNode::kBool && u->b) {
          for (std::size_t i = 0; i < value.items.size(); ++i) {
            for (std::size_t j = 0; j < i; ++j) {
              if (unique_equal(value.items[i], value.items[j])) {
                path.push_back(index_key(i));
                Problem p{path, "listed twice"};
                path.pop_back();
                return p;
              }
            }
          }
        }
      }
    }
    if (schema.has("required") || schema.has("dependentRequired") || schema.has("minProperties") ||
        schema.has("maxProperties") || schema.has("properties") || schema.has("additionalProperties")) {
      if (value.kind == JNode::kObject) {
        if (auto req = schema.get("required")) {
          for (auto& key : req->items) {
            if (!value.has(key.s)) {
              path.push_back(key.s);
              Problem p{path, "missing"};
              path.pop_back();
              return p;
            }
          }
        }
        if (auto dep = schema.get("dependentRequired")) {
          for (auto& [key, needed] : dep->members) {
            if (!value.has(key)) continue;
            for (auto& other : needed.items) {
              if (!value.has(other.s)) {
                path.push_back(other.s);
                Problem p{path, "missing (it goes with " + py_repr(key) + ")"};
                path.pop_back();
                return p;
              }
            }
          }
        }
        if (auto m = schema.get("minProperties"))
          if (static_cast<double>(value.members.size()) < m->number())
            return Problem{path, "expected an object that is not empty"};
        if (auto m = schema.get("maxProperties"))
          if (static_cast<double>(value.members.size()) > m->number())
            return Problem{path, "more than " + json_number_text(*m) + " keys"};
        const JNode* properties = schema.get("properties");
        const JNode* extra = schema.get("additionalProperties");
        for (auto& [key, item] : value.members) {
          const JNode* sub = properties ? properties->get(key) : nullptr;
          Found f;
          path.push_back(key);
          if (sub) {
            f = check(*sub, item, path);
          } else if (extra && extra->kind == JNode::kBool && !extra->b) {
            f = Problem{path, "not a key this object has"};
          } else if (extra) {
            f = check(*extra, item, path);
          }
          path.pop_back();
          if (f) return f;
        }
      }
    }
    if (auto a = schema.get("anyOf"))
      if (auto f = one_of(a->items, value, path, false)) return f;
    if (auto a = schema.get("oneOf"))
      if (auto f = one_of(a->items, value, path, true)) return f;
    if (auto a = schema.get("allOf"))
      for (auto& part : a->items)
        if (auto f = check(part, value, path)) return f;
    if (auto cond = schema.get("if")) {
      bool valid = !check(*cond, value, path).has_value();
      if (auto branch = schema.get(valid ? "then" : "else"))
        if (auto f = check(*branch, value, path)) return f;
    }
    return std::nullopt;
  }

 private:
  static bool compare_fails(const JNode& v, const JNode& b, const std::string& words) {
    // exact for two integers of 64 bits, else as doubles (Python compares ints with floats exactly; close enough)
    long double x, y;
    if (v.kind == JNode::kInt) x = v.i; else if (v.kind == JNode::kUInt) x = v.u; else x = v.d;
    if (b.kind == JNode::kInt) y = b.i; else if (b.kind == JNode::kUInt) y = b.u; else y = b.d;
    if (words == ">=") return x < y;
    if (words == "<=") return x > y;
    if (words == ">") return x <= y;
    return x >= y;
  }

  static bool unique_equal(const JNode& a, const JNode& b) {
    // schema.py's _unique_key: strings, bools, null by type and value; numbers by value; the rest as sorted JSON
    if (a.kind == JNode::kBool || b.kind == JNode::kBool) return a.kind == b.kind && a.b == b.b;
    if (a.is_number() && b.is_number()) return a.number() == b.number();
    return equal(a, b);
  }

  Found one_of(const std::vector<JNode>& schemas, const JNode& value, Path& path, bool exactly_one) const {
    std::vector<Found> problems;
    int matched = 0;
    for (auto& s : schemas) {
      Found f = check(s, value, path);
      if (!f) {
        ++matched;
        if (!exactly_one) return std::nullopt;
      }
      problems.push_back(std::move(f));
    }
    if (matched == 1 || (matched && !exactly_one)) return std::nullopt;
    if (matched > 1) return Problem{path, "fits more than one of the forms allowed here"};
    std::vector<std::size_t> fitting;
    for (std::size_t i = 0; i < schemas.size(); ++i) {
      auto kinds = types(schemas[i]);
      bool fits = false;
      if (kinds)
        for (auto& k : *kinds) fits |= is(k, value);
      if (fits) fitting.push_back(i);
    }
    if (fitting.size() == 1 && problems[fitting[0]]) return problems[fitting[0]];
    std::string want;
    for (std::size_t i = 0; i < schemas.size(); ++i) want += (i ? " or " : "") + describe(schemas[i]);
    return Problem{path, "expected " + want + ", got " + kind_of(value)};
  }

  const JNode& root_;
};

void drop_closed_objects(JNode& node) {  // format.py _ignoring_unknown_keys
  if (node.kind == JNode::kObject) {
    if (const JNode* extra = node.get("additionalProperties"); extra && extra->kind == JNode::kBool && !extra->b) {
      std::size_t at = node.index["additionalProperties"];
      node.members.erase(node.members.begin() + static_cast<long>(at));
      node.index.clear();
      for (std::size_t i = 0; i < node.members.size(); ++i) node.index[node.members[i].first] = i;
    }
    for (auto& [k, v] : node.members) drop_closed_objects(v);
  } else if (node.kind == JNode::kArray) {
    for (auto& v : node.items) drop_closed_objects(v);
  }
}

JNode string_items() {  // {"type": "string"}
  JNode t;
  t.kind = JNode::kString;
  t.s = "string";
  JNode o;
  o.kind = JNode::kObject;
  o.index.emplace("type", 0);
  o.members.emplace_back("type", t);
  return o;
}

}  // namespace

const JNode& reader_schema() {
  static const JNode schema = [] {
    std::string text(reinterpret_cast<const char*>(manifest_schema), manifest_schema_size);
    JNode s = parse_json(text, 256);
    drop_closed_objects(s);
    // format.py OPEN_ENDS: a mode registered at run time may add its name to optimizations; an unknown
    // requirement is refused by name when the bundle runs, not as a malformed manifest
    JNode* props = nullptr;
    for (auto& [k, v] : s.members)
      if (k == "properties") props = &v;
    if (!props) throw std::runtime_error("manifest.schema.json has no properties");
    for (const char* key : {"optimizations", "requirements"}) {
      JNode* entry = nullptr;
      for (auto& [k, v] : props->members)
        if (k == key) entry = &v;
      if (!entry || !entry->has("items")) throw std::runtime_error("manifest.schema.json has no items to open");
      for (auto& [k, v] : entry->members)
        if (k == "items") v = string_items();
    }
    return s;
  }();
  return schema;
}

std::optional<std::string> first_problem(const JNode& document) {
  const JNode& schema = reader_schema();
  Walk walk(schema);
  Path path;
  Found f = walk.check(schema, document, path);
  if (!f) return std::nullopt;
  return path_text(f->path) + ": " + f->reason;
}

}  // namespace mgerun
