// onnxruntime, opened at run time (dlopen) and driven through its C API: the library found and its version,
// sessions with mgerun's settings, and values converted between mgerun-native's Value (value.h) and OrtValue.
// Which library is opened, and why none is linked: docs/native.md.
#pragma once

#include <onnxruntime_c_api.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "value.h"

namespace mgerun {

// The lowest C API version the calls made here need: onnxruntime 1.17's.
constexpr uint32_t kOrtApiVersion = 17;

// An error with the exit code of docs/exit-codes.md: 2 for bad input or usage, 1 for a model that failed to
// run. what() is the one line printed after "mgerun-native: error: ".
struct Failure : std::runtime_error {
  int exit_code;
  Failure(int code, const std::string& message) : std::runtime_error(message), exit_code(code) {}
};
inline Failure usage_error(const std::string& m) { return Failure(2, m); }
inline Failure run_error(const std::string& m) { return Failure(1, m); }

// The onnxruntime library of this process: opened once.
struct Runtime {
  const OrtApi* api = nullptr;
  std::string library;  // the file opened
  std::string version;  // GetVersionString()
  OrtEnv* env = nullptr;
  OrtAllocator* allocator = nullptr;  // the default CPU allocator
  OrtMemoryInfo* cpu = nullptr;

  // Open the library: `flag` (--ort-lib) if given, else $MGERUN_ORT_LIB, else the system's
  // libonnxruntime.so.1, else an installed onnxruntime wheel's. Throws Failure(2) when none is found or it
  // is older than kOrtApiVersion needs.
  static Runtime& load(const std::string& flag);
  static Runtime* loaded();  // the one loaded, or null

  // Throw Failure(code, "<what>: <onnxruntime's message>") when status is an error (releasing it).
  void check(OrtStatus* status, int code, const std::string& what) const;
  std::vector<std::string> available_providers() const;
};

// Runs of white space as one space, none at either end (Python's " ".join(text.split())).
std::string squeeze_spaces(const std::string& text);

// One line of onnxruntime's message without its source locations (mgedump.model.runtime.clean_ort_message).
std::string clean_ort_message(const std::string& text, std::size_t limit = 400);

struct SessionSettings {
  int threads = 0;             // 0: onnxruntime's choice
  std::string graph_opt;       // "" (onnxruntime's default: all), disable, basic, extended, all
  std::string provider;        // "" : CPU
  std::string execution_mode;  // "", sequential, parallel
};

// A type of value as onnxruntime describes it: kind (tensor, seq, map, optional), a tensor's elem type or a
// map's key type, and a sequence's, optional's or map's element type.
struct TypeNode {
  ValueKind kind = ValueKind::kTensor;
  int32_t elem_type = 0;
  std::shared_ptr<TypeNode> elem;
  std::string text(bool top) const;  // "float32" at the top for a tensor, else onnxruntime's "tensor(float)"
};

// An input or output of the model: its name and its type as mgerun names it (a tensor's numpy dtype name,
// "float32", "str"; else onnxruntime's text, "seq(map(int64,tensor(float)))"), and a tensor's dims (-1 when
// free; `dim_names` holds a symbolic dim's name).
struct ModelIo {
  std::string name;
  std::string dtype;
  bool is_tensor = true;
  int32_t elem_type = 0;  // a tensor's ONNX elem type
  bool rank_known = false;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_names;
  std::shared_ptr<TypeNode> type;
};

// The execution providers for a --provider name (CUDA or CUDAExecutionProvider), as mgerun resolves them:
// [name] for the CPU, [name, CPUExecutionProvider] for another. Throws Failure(2) for one onnxruntime lacks.
std::vector<std::string> resolve_providers(const Runtime& rt, const std::string& name);

class Session {
 public:
  // Throws Failure(2) with mgerun's message when the model does not load.
  Session(Runtime& rt, const std::string& model_path, const std::string& label, const SessionSettings& s,
          const std::vector<std::string>& providers);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::vector<ModelIo>& inputs() const { return inputs_; }
  const std::vector<ModelIo>& outputs() const { return outputs_; }

  // One run; `outputs` receives one OrtValue per output (the caller releases them with release()).
  // Returns the error message of a failed run ("" when it ran).
  std::string run(const std::vector<const OrtValue*>& inputs, std::vector<OrtValue*>& outputs) const;
  void release(std::vector<OrtValue*>& values) const;

  // Feed names; keep the order of inputs().
  const std::vector<const char*>& input_names() const { return in_names_; }

 private:
  Runtime& rt_;
  OrtSession* session_ = nullptr;
  std::vector<ModelIo> inputs_, outputs_;
  std::vector<std::string> in_name_store_, out_name_store_;
  std::vector<const char*> in_names_, out_names_;
};

// Values fed to a session: each Value as an OrtValue, kept alive (with any buffer it borrows) until this is
// destroyed.
class Feeds {
 public:
  explicit Feeds(Runtime& rt) : rt_(rt) {}
  ~Feeds();
  Feeds(const Feeds&) = delete;
  Feeds& operator=(const Feeds&) = delete;
  // Make one input; the Value must outlive this object (numeric tensors are borrowed, not copied).
  // An empty optional gives nullptr. Throws Failure(2).
  const OrtValue* add(const Value& v);
  const std::vector<const OrtValue*>& values() const { return top_; }

 private:
  OrtValue* make(const Value& v);
  Runtime& rt_;
  std::vector<OrtValue*> owned_;
  std::vector<const OrtValue*> top_;
  std::vector<std::unique_ptr<std::vector<Tensor>>> keep_;  // a map's key and value tensors
};

// An output as a Value, by the model's declared type of it (`info`). Throws Failure(2) when the value is not
// of that type.
Value to_value(Runtime& rt, const OrtValue* v, const ModelIo& info);

}  // namespace mgerun
