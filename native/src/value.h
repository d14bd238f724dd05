// The in-memory value both sides of mgerun-native share: the bundle side
// decodes a test data member (TensorProto, SequenceProto, MapProto,
// OptionalProto; docs/bundle.md "Types") into a Value, the run side turns a
// Value into an onnxruntime value and back, and the assertion compares two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mgerun {

// ONNX TensorProto.DataType numbers (onnx.proto), the only dtype naming used
// in the native code. Printed names follow numpy's (float32, int64, ...): see
// elem_type_name().
enum ElemType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBfloat16 = 16,
};

// Bytes per element of a fixed-size elem type; 0 for strings and unknown
// numbers.
inline std::size_t elem_size(int32_t t) {
  switch (t) {
    case kBool:
    case kUint8:
    case kInt8:
      return 1;
    case kUint16:
    case kInt16:
    case kFloat16:
    case kBfloat16:
      return 2;
    case kFloat:
    case kInt32:
    case kUint32:
      return 4;
    case kInt64:
    case kUint64:
    case kDouble:
    case kComplex64:
      return 8;
    case kComplex128:
      return 16;
    default:
      return 0;
  }
}

// numpy's name of an elem type, as mgerun prints it ("float32", "int64",
// "bool", "<U0" is never printed: strings print "str").
inline const char* elem_type_name(int32_t t) {
  switch (t) {
    case kFloat: return "float32";
    case kUint8: return "uint8";
    case kInt8: return "int8";
    case kUint16: return "uint16";
    case kInt16: return "int16";
    case kInt32: return "int32";
    case kInt64: return "int64";
    case kString: return "str";
    case kBool: return "bool";
    case kFloat16: return "float16";
    case kDouble: return "float64";
    case kUint32: return "uint32";
    case kUint64: return "uint64";
    case kComplex64: return "complex64";
    case kComplex128: return "complex128";
    case kBfloat16: return "bfloat16";
    default: return "undefined";
  }
}

// A dense tensor. `data` holds the elements in row-major order as raw
// little-endian bytes (bool: one byte 0/1; float16/bfloat16: the 16-bit
// patterns), `strings` holds them instead when elem_type == kString.
// A 0-d tensor (a scalar) has an empty `shape` and one element.
struct Tensor {
  int32_t elem_type = kUndefined;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  std::vector<std::string> strings;

  // Product of the dims (1 for a scalar); the caller has bounded the dims.
  std::size_t element_count() const {
    std::size_t n = 1;
    for (int64_t d : shape) n *= static_cast<std::size_t>(d < 0 ? 0 : d);
    return n;
  }
};

enum class ValueKind { kTensor, kSequence, kMap, kOptional };

// A tensor, a sequence of values, a map from integer or string keys to
// scalar tensors, or an optional (empty, or one value).
struct Value {
  ValueKind kind = ValueKind::kTensor;

  // kind == kTensor
  Tensor tensor;

  // kind == kSequence: the elements in order.
  // kind == kOptional: empty (no value) or exactly one element.
  // kind == kMap: the values, one per key, in key order as stored; each a
  // (0-d) tensor.
  std::vector<Value> elements;

  // kind == kMap: the key elem type (kInt8..kUint64 or kString) and the keys:
  // `int_keys` for integer key types (uint64 keys bit-cast to int64),
  // `string_keys` for kString. Same length as `elements`.
  int32_t key_type = kUndefined;
  std::vector<int64_t> int_keys;
  std::vector<std::string> string_keys;

  // kind == kSequence only: the elem type of an empty sequence's elements
  // when it is known (a SequenceProto records elem_type), else kUndefined.
  int32_t sequence_elem_type = kUndefined;

  static Value make_tensor(Tensor t) {
    Value v;
    v.kind = ValueKind::kTensor;
    v.tensor = std::move(t);
    return v;
  }
  static Value make_sequence(std::vector<Value> items) {
    Value v;
    v.kind = ValueKind::kSequence;
    v.elements = std::move(items);
    return v;
  }
  static Value make_optional_empty() {
    Value v;
    v.kind = ValueKind::kOptional;
    return v;
  }
  static Value make_optional(Value inner) {
    Value v;
    v.kind = ValueKind::kOptional;
    v.elements.push_back(std::move(inner));
    return v;
  }
  bool optional_has_value() const { return kind == ValueKind::kOptional && !elements.empty(); }
};

}  // namespace mgerun
