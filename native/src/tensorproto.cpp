// The test data members of a bundle, decoded from the protobuf wire format (docs/bundle.md "Types"), reading
// what mgedump/bundle/tensorproto.py and valueproto.py read: a TensorProto's dims, data_type, name and its data
// as raw_data or in the typed fields; a SequenceProto, MapProto or OptionalProto following the declared type
// (never the data) for its nesting. Every length is checked against its message before it is used.
#include "tensorproto.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "bundle.h"
#include "json.h"

namespace mgerun {

namespace {

constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;
constexpr int kMaxRank = 64;        // numpy's largest number of dims
constexpr int kMaxTypeDepth = 8;    // nesting of seq / map / optional in one type (mgedump/model/valuetype.py)
constexpr uint64_t kFewStrings = 1 << 20;  // a string tensor up to this many elements is read whatever its bytes

using Bad = std::invalid_argument;
// The bytes are not protobuf (mgedump/model/protowire.py WireError), or a name is not UTF-8.
struct WireBad : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// what protobuf says of a TensorProto that is not one (mgedump reads such a member with onnx)
const char* const kDecodeError =
    "DecodeError: Error parsing message with type 'onnx.TensorProto': Wire format was corrupt";

struct Field {
  uint32_t number;
  int wire;
  uint64_t value;            // a varint's value
  const uint8_t* payload;    // a length-delimited field's bytes, a fixed field's
  std::size_t length;
};

// The fields of one message, each bounded by it (mgedump/model/protowire.py fields()).
class Reader {
 public:
  Reader(const uint8_t* p, std::size_t n) : p_(p), end_(p + n) {}
  bool next(Field& f) {
    if (p_ >= end_) return false;
    uint64_t key = varint();
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    f.payload = nullptr;
    f.length = 0;
    f.value = 0;
    switch (f.wire) {
      case kVarint:
        f.value = varint();
        break;
      case kLengthDelimited: {
        uint64_t len = varint();
        if (len > static_cast<uint64_t>(end_ - p_)) throw WireBad("field runs past its message");
        f.payload = p_;
        f.length = static_cast<std::size_t>(len);
        p_ += len;
        break;
      }
      case kFixed64:
      case kFixed32: {
        std::size_t width = f.wire == kFixed64 ? 8 : 4;
        if (width > static_cast<std::size_t>(end_ - p_)) throw WireBad("message runs past its end");
        f.payload = p_;
        f.length = width;
        p_ += width;
        break;
      }
      default:
        throw WireBad("wire type " + std::to_string(f.wire));
    }
    return true;
  }
  uint64_t varint() {
    uint64_t result = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ >= end_ || shift > 63) throw WireBad("truncated varint");
      uint8_t byte = *p_++;
      result |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (byte < 0x80) return result;
    }
  }
  bool done() const { return p_ >= end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

std::string utf8_text(const uint8_t* p, std::size_t n) {
  std::string s(reinterpret_cast<const char*>(p), n);
  if (!valid_utf8(s)) throw WireBad(utf8_problem(s));
  return s;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

// How many elements dims hold, or false when the count does not fit 64 bits (it then matches no data).
bool element_count(const std::vector<int64_t>& dims, uint64_t* count) {
  unsigned __int128 n = 1;
  bool overflow = false;
  for (int64_t d : dims) {
    if (d == 0) {
      *count = 0;
      return true;
    }
    n *= static_cast<uint64_t>(d);
    if (n > std::numeric_limits<uint64_t>::max() / 2) overflow = true;
  }
  if (overflow) return false;
  *count = static_cast<uint64_t>(n);
  return true;
}

uint64_t available_memory() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  uint64_t kib = 0;
  if (f) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long v;
      if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
        kib = v;
        break;
      }
    }
    std::fclose(f);
  }
  return kib ? kib * 1024 : std::numeric_limits<uint64_t>::max();
}

std::string size_text(double n) {
  char buf[64];
  if (n >= static_cast<double>(1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", n / static_cast<double>(1ull << 30));
  else
    std::snprintf(buf, sizeof buf, "%.0f MiB", n / static_cast<double>(1 << 20));
  return buf;
}

// What needs more memory than the machine has (mgedump/base/limits.py require_memory), as its one line.
std::string memory_problem(double n_bytes, const std::string& what) {
  uint64_t available = available_memory();
  if (n_bytes <= static_cast<double>(available)) return "";
  return what + " needs " + size_text(n_bytes) + " of memory, and this process can have " +
         size_text(static_cast<double>(available));
}

constexpr const char* kMemoryHint = "ask for less (a smaller shape, count or repeat)";

bool known_data_type(uint64_t t) { return t >= 1 && t <= 23; }  // onnx.TensorProto.DataType (UNDEFINED is not data)

void append_le(std::vector<uint8_t>& out, uint64_t v, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Packed or one-by-one values of a typed data field, appended as elements of `width` little-endian bytes.
void typed_values(const Field& f, int fixed_wire, std::size_t width, std::vector<uint8_t>& out, uint64_t limit) {
  auto room = [&](std::size_t more) {
    if (out.size() / width + more > limit) throw Bad("more values than the dims hold");
  };
  if (f.wire == kLengthDelimited) {  // packed
    if (fixed_wire >= 0) {
      std::size_t item = fixed_wire == kFixed64 ? 8 : 4;
      if (f.length % item) throw Bad("a packed field of a partial value");
      room(f.length / item);
      for (std::size_t i = 0; i < f.length; i += item) {
        uint64_t v = 0;
        std::memcpy(&v, f.payload + i, item);  // little-endian hosts only (x86_64, aarch64)
        append_le(out, v, width);
      }
    } else {
      Reader r(f.payload, f.length);
      while (!r.done()) {
        room(1);
        append_le(out, r.varint(), width);
      }
    }
  } else if ((fixed_wire < 0 && f.wire == kVarint) || f.wire == fixed_wire) {
    room(1);
    uint64_t v = f.value;
    if (fixed_wire >= 0) {
      v = 0;
      std::memcpy(&v, f.payload, f.length);
    }
    append_le(out, v, width);
  } else {
    throw Bad("a data field of the wrong wire type");
  }
}

}  // namespace

std::string ValueType::text() const {
  static const char* names[] = {"",      "float",  "uint8", "int8",    "uint16", "int16",  "int32", "int64",
                                "string", "bool", "float16", "double", "uint32", "uint64"};
  switch (kind) {
    case kTensor:
      return std::string("tensor(") + (elem_type > 0 && elem_type <= 13 ? names[elem_type] : "?") + ")";
    case kSequence:
      return "seq(" + elem->text() + ")";
    case kOptional:
      return "optional(" + elem->text() + ")";
    case kMap:
      return std::string("map(") + (elem_type > 0 && elem_type <= 13 ? names[elem_type] : "?") + "," +
             elem->text() + ")";
  }
  return "";
}

namespace {

const struct {
  const char* ort;
  const char* numpy;
  int32_t type;
} kTensorTypes[] = {
    {"float", "float32", kFloat},    {"float16", "float16", kFloat16}, {"double", "float64", kDouble},
    {"int8", "int8", kInt8},         {"int16", "int16", kInt16},       {"int32", "int32", kInt32},
    {"int64", "int64", kInt64},      {"uint8", "uint8", kUint8},       {"uint16", "uint16", kUint16},
    {"uint32", "uint32", kUint32},   {"uint64", "uint64", kUint64},    {"bool", "bool", kBool},
    {"string", "str", kString},
};

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

ValueType parse_at(const std::string& t, std::size_t& i, int depth) {
  if (depth > kMaxTypeDepth) throw Bad("nested too deep");
  auto starts = [&](const char* p) { return t.compare(i, std::strlen(p), p) == 0; };
  if (starts("tensor(")) {
    std::size_t j = i + 7;
    while (j < t.size() && word_char(t[j])) ++j;
    if (j > i + 7 && j < t.size() && t[j] == ')') {
      std::string word = t.substr(i + 7, j - i - 7);
      for (const auto& k : kTensorTypes) {
        if (word == k.ort) {
          ValueType v;
          v.kind = ValueType::kTensor;
          v.elem_type = k.type;
          i = j + 1;
          return v;
        }
      }
      throw Bad("no numpy type for tensor(" + word + ")");
    }
  }
  for (auto [word, kind] : {std::pair<const char*, ValueType::Kind>{"seq(", ValueType::kSequence},
                            std::pair<const char*, ValueType::Kind>{"optional(", ValueType::kOptional}}) {
    if (starts(word)) {
      i += std::strlen(word);
      ValueType v;
      v.kind = kind;
      v.elem = std::make_shared<ValueType>(parse_at(t, i, depth + 1));
      if (i >= t.size() || t[i] != ')') throw Bad(std::string(word) + " is not closed");
      ++i;
      return v;
    }
  }
  if (starts("map(")) {
    std::size_t j = i + 4;
    while (j < t.size() && word_char(t[j])) ++j;
    if (j > i + 4 && j < t.size() && t[j] == ',') {
      std::string key = t.substr(i + 4, j - i - 4);
      int32_t key_type = kUndefined;
      for (const auto& k : kTensorTypes)
        if (key == k.ort && k.type != kFloat && k.type != kFloat16 && k.type != kDouble && k.type != kBool)
          key_type = k.type;
      if (key_type == kUndefined) throw Bad("map keys of type " + key);
      i = j + 1;
      ValueType v;
      v.kind = ValueType::kMap;
      v.elem_type = key_type;
      v.elem = std::make_shared<ValueType>(parse_at(t, i, depth + 1));
      if (v.elem->kind != ValueType::kTensor || i >= t.size() || t[i] != ')')
        throw Bad("a map's values must be tensors");
      ++i;
      return v;
    }
  }
  if (i >= t.size()) throw Bad("the type ends early");
  std::string rest = t.substr(i);
  throw Bad(rest.substr(0, rest.find(')')) + ") is not a type mgedump handles");
}

}  // namespace

ValueType parse_value_type(const std::string& text) {
  std::string t;
  for (char c : text)
    if (c != ' ') t += c;
  std::size_t i = 0;
  ValueType v = parse_at(t, i, 0);
  if (i != t.size()) throw Bad("unexpected " + py_repr(t.substr(i)) + " after the type");
  return v;
}

ValueType parse_dtype(const std::string& dtype) {
  if (dtype.find('(') != std::string::npos) return parse_value_type(dtype);
  for (const auto& k : kTensorTypes) {
    if (dtype == k.numpy) {
      ValueType v;
      v.elem_type = k.type;
      return v;
    }
  }
  throw Bad("unknown dtype " + py_repr(dtype));
}

Tensor decode_tensor(const uint8_t* data, std::size_t size, std::string* name) {
  Reader r(data, size);
  Field f;
  Tensor t;
  uint64_t data_type = 0;
  const Field* raw = nullptr;
  Field raw_field{};
  std::vector<Field> typed;  // the typed data fields, decoded once the type is known
  bool external = false;
  bool other = false;  // a field beyond dims, data_type, name and raw_data: mgedump reads it with onnx
  name->clear();
  try {
  while (r.next(f)) {
    if (f.number == 1 && f.wire == kVarint) {
      t.shape.push_back(static_cast<int64_t>(f.value));
      if (t.shape.size() > kMaxRank) throw Bad("more than 64 dims");
    } else if (f.number == 1 && f.wire == kLengthDelimited) {  // packed dims
      other = true;
      Reader d(f.payload, f.length);
      while (!d.done()) {
        t.shape.push_back(static_cast<int64_t>(d.varint()));
        if (t.shape.size() > kMaxRank) throw Bad("more than 64 dims");
      }
    } else if (f.number == 2 && f.wire == kVarint) {
      data_type = f.value;
    } else if (f.number == 8 && f.wire == kLengthDelimited) {
      *name = utf8_text(f.payload, f.length);
    } else if (f.number == 9 && f.wire == kLengthDelimited) {
      raw_field = f;
      raw = &raw_field;
    } else if (f.number == 14 && f.wire == kVarint) {
      other = true;
      external = f.value == 1;
    } else if (f.number == 4 || f.number == 5 || f.number == 6 || f.number == 7 || f.number == 10 ||
               f.number == 11) {
      other = true;
      typed.push_back(f);
    } else {
      other = true;
    }
    // anything else (segment, doc_string, external_data entries, metadata) holds no element
  }
  } catch (const WireBad&) {
    throw Bad(kDecodeError);
  }
  bool fast = !other && raw && (data_type >= 1 && data_type <= 15 && data_type != kString);
  if (!fast) {  // protobuf's parse may take 24 bytes per byte of a tensor (tensorproto.py PARSED_BYTES_PER_BYTE)
    std::string problem = memory_problem(size * 24.0, "a tensor of " + std::to_string(size) + " bytes");
    if (!problem.empty()) throw Bad("DataError: " + problem + " (hint: " + kMemoryHint + ")");
  }
  if (external) throw Bad("the tensor refers to external data");
  for (int64_t d : t.shape)
    if (d < 0) throw Bad("negative dim in dims " + dims_text(t.shape));
  if (!known_data_type(data_type)) throw Bad("unknown data_type " + std::to_string(data_type));
  t.elem_type = static_cast<int32_t>(data_type);
  uint64_t count = 0;
  bool fits = element_count(t.shape, &count);
  if (data_type == kString) {
    if (raw) throw Bad("a string tensor with raw_data");
    uint64_t n_strings = 0;
    for (const Field& g : typed)
      if (g.number == 6) ++n_strings;
    if (fits && count > kFewStrings && count * 4 > size) {
      char gib[32];
      std::snprintf(gib, sizeof gib, "%.1f", count * 64.0 / static_cast<double>(1ull << 30));
      throw Bad("DataError: a string tensor of " + std::to_string(count) + " elements in " + std::to_string(size) +
                " bytes (mostly empty strings) asks for " + gib + " GiB as objects: more than its bytes justify");
    }
    if (fits) {
      std::string problem = memory_problem(count * 64.0, "a string tensor of " + std::to_string(count) + " elements");
      if (!problem.empty()) throw Bad("DataError: " + problem + " (hint: " + kMemoryHint + ")");
    }
    if (!fits || n_strings != count)
      throw Bad("cannot reshape array of size " + std::to_string(n_strings) + " into shape " + dims_text(t.shape));
    t.strings.reserve(n_strings);
    for (const Field& g : typed) {
      if (g.number != 6) continue;
      if (g.wire != kLengthDelimited) throw Bad(kDecodeError);
      std::string text(reinterpret_cast<const char*>(g.payload), g.length);
      if (!valid_utf8(text)) throw Bad("UnicodeDecodeError: " + utf8_problem(text));
      t.strings.push_back(std::move(text));
    }
    return t;
  }
  std::size_t width = elem_size(t.elem_type);
  if (width == 0) throw Bad("data_type " + std::to_string(data_type) + " is not a type mgerun-native reads");
  if (raw) {
    if (!fits || count > raw->length / width || count * width != raw->length)
      throw Bad("raw data holds " + std::to_string(raw->length) + " bytes, but dims " + dims_text(t.shape) +
                " of " + elem_type_name(t.elem_type) + " need " +
                (fits ? std::to_string(static_cast<unsigned __int128>(count) * width > UINT64_MAX
                                           ? 0
                                           : count * width)
                      : std::string("more")));
    t.data.assign(raw->payload, raw->payload + raw->length);
    return t;
  }
  // the typed fields (onnx.numpy_helper.to_array): each type reads one field
  uint32_t want_field;
  int fixed_wire = -1;
  switch (t.elem_type) {
    case kFloat:
    case kComplex64:
      want_field = 4, fixed_wire = kFixed32;
      break;
    case kDouble:
    case kComplex128:
      want_field = 10, fixed_wire = kFixed64;
      break;
    case kInt64:
      want_field = 7;
      break;
    case kUint32:
    case kUint64:
      want_field = 11;
      break;
    default:  // int32, int16, int8, uint16, uint8, bool, float16, bfloat16: int32_data
      want_field = 5;
  }
  if (!fits) throw Bad("dims " + dims_text(t.shape) + " hold more elements than any tensor");
  std::size_t item = (t.elem_type == kComplex64 || t.elem_type == kComplex128) ? width / 2 : width;
  uint64_t values = (t.elem_type == kComplex64 || t.elem_type == kComplex128) ? count * 2 : count;
  try {
    for (const Field& g : typed)
      if (g.number == want_field) typed_values(g, fixed_wire, item, t.data, values);
  } catch (const WireBad&) {
    throw Bad(kDecodeError);
  }
  if (t.data.size() != values * item)
    throw Bad("cannot reshape array of size " + std::to_string(t.data.size() / item) + " into shape " +
              dims_text(t.shape));
  if (t.elem_type == kBool)
    for (auto& b : t.data) b = b != 0;
  return t;
}

namespace {

Value decode_at(const uint8_t* data, std::size_t size, const ValueType& type, std::string* name);

int32_t elem_code(const ValueType& t) {  // SequenceProto / OptionalProto elem_type
  switch (t.kind) {
    case ValueType::kTensor:
      return 1;
    case ValueType::kSequence:
      return 3;
    case ValueType::kMap:
      return 4;
    case ValueType::kOptional:
      return 5;
  }
  return 0;
}

uint32_t elem_field(const ValueType& t) {  // the field holding each kind of element
  switch (t.kind) {
    case ValueType::kTensor:
      return 3;
    case ValueType::kSequence:
      return 5;
    case ValueType::kMap:
      return 6;
    case ValueType::kOptional:
      return 7;
  }
  return 0;
}

const char* kind_word(const ValueType& t) {
  switch (t.kind) {
    case ValueType::kTensor:
      return "tensor";
    case ValueType::kSequence:
      return "seq";
    case ValueType::kMap:
      return "map";
    case ValueType::kOptional:
      return "optional";
  }
  return "";
}

Value decode_map(uint64_t code, const std::vector<Field>& rest, const ValueType& type) {
  bool string_keys = type.elem_type == kString;
  if (code != static_cast<uint64_t>(type.elem_type))
    throw Bad("key_type " + std::to_string(code) + ", expected the keys of " + type.text());
  Value v;
  v.kind = ValueKind::kMap;
  v.key_type = type.elem_type;
  bool have_values = false;
  std::vector<Value> values;
  for (const Field& f : rest) {
    if (string_keys && f.number == 4 && f.wire == kLengthDelimited) {
      v.string_keys.push_back(utf8_text(f.payload, f.length));
    } else if (!string_keys && f.number == 3 && f.wire == kVarint) {
      v.int_keys.push_back(static_cast<int64_t>(f.value));
    } else if (!string_keys && f.number == 3 && f.wire == kLengthDelimited) {
      Reader r(f.payload, f.length);
      while (!r.done()) v.int_keys.push_back(static_cast<int64_t>(r.varint()));
    } else if (f.number == 5 && f.wire == kLengthDelimited && !have_values) {
      ValueType seq;
      seq.kind = ValueType::kSequence;
      seq.elem = type.elem;
      std::string ignored;
      values = decode_at(f.payload, f.length, seq, &ignored).elements;
      have_values = true;
    } else {
      throw Bad("an unexpected field " + std::to_string(f.number) + " in a map");
    }
  }
  std::size_t n_keys = string_keys ? v.string_keys.size() : v.int_keys.size();
  std::size_t distinct = n_keys;
  if (string_keys) {
    std::vector<std::string> k = v.string_keys;
    std::sort(k.begin(), k.end());
    distinct = static_cast<std::size_t>(std::unique(k.begin(), k.end()) - k.begin());
  } else {
    std::vector<int64_t> k = v.int_keys;
    std::sort(k.begin(), k.end());
    distinct = static_cast<std::size_t>(std::unique(k.begin(), k.end()) - k.begin());
  }
  if (values.size() != n_keys || distinct != n_keys)
    throw Bad("a map of " + std::to_string(n_keys) + " keys (distinct: " + std::to_string(distinct) + ") and " +
              std::to_string(values.size()) + " values");
  for (const Value& x : values)
    if (!x.tensor.shape.empty()) throw Bad("a map value that is not a scalar");
  v.elements = std::move(values);
  return v;
}

Value decode_at(const uint8_t* data, std::size_t size, const ValueType& type, std::string* name) {
  if (type.kind == ValueType::kTensor) {
    Tensor t = decode_tensor(data, size, name);
    if (type.elem_type != kString && t.elem_type != type.elem_type)
      throw Bad(std::string("a tensor of ") + elem_type_name(t.elem_type) + ", expected " +
                elem_type_name(type.elem_type));
    return Value::make_tensor(std::move(t));
  }
  name->clear();
  uint64_t code = 0;
  std::vector<Field> rest;
  Reader r(data, size);
  Field f;
  while (r.next(f)) {
    if (f.number == 1 && f.wire == kLengthDelimited)
      *name = utf8_text(f.payload, f.length);
    else if (f.number == 2 && f.wire == kVarint)
      code = f.value;
    else
      rest.push_back(f);
  }
  if (type.kind == ValueType::kMap) return decode_map(code, rest, type);
  const ValueType& elem = *type.elem;
  if (type.kind == ValueType::kOptional && code == 0 && rest.empty()) return Value::make_optional_empty();
  uint64_t want = static_cast<uint64_t>(elem_code(elem));
  if (code != want)
    throw Bad("elem_type " + std::to_string(code) + ", expected " + std::to_string(want) + " for " + type.text());
  uint32_t number = elem_field(elem);
  std::vector<Value> items;
  for (const Field& g : rest) {
    if (g.number != number)
      throw Bad(std::string("a field other than the ") + kind_word(elem) + " values of a " + type.text());
  }
  for (const Field& g : rest) {
    if (g.wire != kLengthDelimited) continue;
    std::string inner;
    items.push_back(decode_at(g.payload, g.length, elem, &inner));
  }
  if (type.kind == ValueType::kSequence) {
    Value v = Value::make_sequence(std::move(items));
    if (elem.kind == ValueType::kTensor) v.sequence_elem_type = elem.elem_type;
    return v;
  }
  if (items.size() != 1) throw Bad("an optional holds " + std::to_string(items.size()) + " values");
  return Value::make_optional(std::move(items[0]));
}

}  // namespace

Value decode_value(const uint8_t* data, std::size_t size, const ValueType& type, std::string* name) {
  if (type.kind != ValueType::kTensor) {  // every element costs at least 2 bytes on the wire
    std::string problem = memory_problem(static_cast<double>(size / 2) * 128,
                                         std::string("a ") + kind_word(type) + " of " + std::to_string(size) + " bytes");
    if (!problem.empty()) throw Refusal(problem, kMemoryHint);
  }
  try {
    return decode_at(data, size, type, name);
  } catch (const WireBad& e) {
    throw Bad("not a valid " + type.text() + " (" + e.what() + ")");
  }
}

}  // namespace mgerun
