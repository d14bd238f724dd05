// ONNX test data members decoded by hand from the protobuf wire format (docs/bundle.md "Types"): TensorProto,
// SequenceProto, MapProto, OptionalProto, into the Value of value.h. Every length, count and dim is bounded by
// the member's bytes and the machine's memory; a member that is not such a message is a std::invalid_argument
// whose what() says why (the caller names the member).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "value.h"

namespace mgerun {

// onnxruntime's type of an input or output, parsed from its name ("tensor(float)", "seq(map(int64,tensor(float)))")
// or from a manifest dtype ("float32").
struct ValueType {
  enum Kind { kTensor, kSequence, kMap, kOptional } kind = kTensor;
  int32_t elem_type = kUndefined;    // tensor: its ElemType; map: its key type (kInt8..kUint64, kString)
  std::shared_ptr<ValueType> elem;   // seq/optional: the element; map: the value (a tensor)
  std::string text() const;          // onnxruntime's name of the type
};

// A manifest dtype ("float32", ..., "str", or a structured type name). Throws std::invalid_argument saying why.
ValueType parse_dtype(const std::string& dtype);
// onnxruntime's name of a type ("seq(map(int64,tensor(float)))"). Throws std::invalid_argument saying why.
ValueType parse_value_type(const std::string& text);

// A TensorProto; `name` gets the tensor's name. Throws std::invalid_argument.
Tensor decode_tensor(const uint8_t* data, std::size_t size, std::string* name);
// A test data member of this type (a TensorProto for a tensor); `name` gets the message's name.
Value decode_value(const uint8_t* data, std::size_t size, const ValueType& type, std::string* name);

}  // namespace mgerun
