// A bundle opened for reading (docs/bundle.md): every check of "What a reader checks" (1-8) is made before
// anything in it is trusted, and every problem is a Refusal: one line, exit 2 (docs/exit-codes.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorproto.h"
#include "value.h"

namespace mgerun {

// A bad bundle, bad usage or anything the user must fix: the command prints
// "mgerun-native: error: " + one_line() on stderr and exits 2. Exactly mgerun's
// text where one is known (mgedump/base/errors.py: "MESSAGE (hint: HINT)").
struct Refusal : std::runtime_error {
  std::string message;
  std::string hint;
  explicit Refusal(std::string message_, std::string hint_ = "");
  std::string one_line() const;
};

// One dim of a manifest shape: fixed (an integer), a named symbolic dim, or an unnamed one (null).
struct Dim {
  enum Kind { kFixed, kSymbol, kUnknown } kind = kUnknown;
  int64_t value = 0;   // kFixed
  std::string symbol;  // kSymbol
};

// One input or output of the manifest (docs/bundle.md "inputs and outputs").
struct IoInfo {
  std::string name;
  std::string dtype;     // "float32", ..., "str", or onnxruntime's type name: "seq(map(int64,tensor(float)))"
  ValueType type;        // the dtype parsed: kind tensor/seq/map/optional, its elem type (ElemType numbers)
  bool has_shape = false;  // false: the shape is null (unknown rank, or not a tensor)
  std::vector<Dim> shape;
  bool is_tensor() const { return type.kind == ValueType::kTensor; }
};

// The bound each output is held to (docs/bundle.md "assertion", docs/assertion.md).
struct Assertion {
  bool enabled = true;
  double maxerr = 1e-4;
  bool verbose = true;
  std::map<std::string, double> output_maxerr;          // outputs with a bound of their own
  std::string error_stat = "max";                       // max | p99 | mean | median
  std::map<std::string, std::string> output_error_stat; // outputs with a statistic of their own
  double maxerr_of(const std::string& output) const;
  const std::string& stat_of(const std::string& output) const;
};

struct ModelRef {
  std::string member;          // "model.onnx" or "variants/NAME/model.onnx"
  std::string sha256;
  std::string external_data;   // its data member, "" when none
};

// The model that runs. A version-1 bundle has exactly one, named after its precision record as mgerun names it
// ("fp32", "ioc16", "io16xc32", "int8", "int8-dynamic"); a version-2 bundle one per variant, in packed order.
struct Variant {
  std::string name;
  ModelRef model;
  std::vector<std::string> optimizations;
  std::vector<std::string> requirements;
  std::vector<IoInfo> inputs;   // its model's (version 1: the manifest's own)
  std::vector<IoInfo> outputs;
  // version 2: output name -> worst error measured when packing (nullopt: none); in manifest order
  std::vector<std::pair<std::string, std::optional<double>>> certified;
};

struct TestCase {
  std::string dir, spec, origin;
  std::vector<std::string> inputs;   // member names, one per model input
  std::vector<std::string> outputs;  // one per model output; empty when the assertion is off
};

class Zip;  // zip.h

class Bundle {
 public:
  // Checks 1-5 and 7 of docs/bundle.md: the archive, the manifest (its schema too), members vs manifest, the
  // hash of every member up to 16 MiB (larger ones are hashed on a thread; verified() waits for it).
  // Throws Refusal.
  static std::unique_ptr<Bundle> open(const std::string& path);
  ~Bundle();
  Bundle(const Bundle&) = delete;
  Bundle& operator=(const Bundle&) = delete;

  const std::string& path() const { return path_; }
  int format_version() const { return format_version_; }
  const std::string& manifest_text() const { return manifest_text_; }  // the manifest's JSON text as stored
  const nlohmann::json& manifest() const { return manifest_; }  // checked against the schema (keys it knows typed)

  // The manifest's own inputs and outputs: the dtypes of the stored tensors (version 2: the model as given).
  const std::vector<IoInfo>& inputs() const { return inputs_; }
  const std::vector<IoInfo>& outputs() const { return outputs_; }
  const Assertion& assertion() const { return assertion_; }
  const std::vector<TestCase>& test_cases() const { return cases_; }
  std::size_t case_count() const { return cases_.size(); }
  const std::vector<Variant>& variants() const { return variants_; }
  int64_t seed() const { return seed_; }
  int64_t repeat() const { return repeat_; }             // data_options.repeat
  bool has_io_dump() const { return has_io_dump_; }
  bool has_environment() const { return !environment_json_.empty(); }
  const std::string& environment_json() const { return environment_json_; }  // the packing machine, as JSON text
  const std::string& generator_version() const { return generator_version_; }

  // The variant that runs, as mgerun chooses it (mgedump/commands/verify_prepare.py choose_variant): version 1:
  // its one model (a name given must be its own); version 2: the one named (none named is a refusal).
  // Throws Refusal with mgerun's words.
  const Variant& choose_variant(const std::optional<std::string>& name) const;

  // Requirements (docs/bundle.md "Optimisations and requirements"), as mgerun checks them: an unknown one refused
  // by name ("upgrade mgedump"), x86-avx2 on a CPU without AVX2, onnxruntime-cpu on another provider. The int8
  // kernel requirements need the runtime: `has_int8_kernels(op)` answers for it (nullptr: assumed present).
  void check_requirements(const Variant& v, const std::string& provider,
                          bool (*has_int8_kernels)(const std::string& op) = nullptr) const;

  // Writes the variant's model.onnx (and model.onnx.data) into `folder` (which must exist), then checks 8: the
  // model reads external data from its own data member only. Returns the path of model.onnx. Throws Refusal.
  std::string extract_variant(const Variant& v, const std::string& folder) const;

  // Test case `c`'s input k, decoded and checked against the manifest's input k (check 6: its dtype, its rank
  // and fixed dims; a sequence/map/optional against its type). Throws Refusal.
  // `against`: the model's own input when the caller has it (version 1: mgerun checks against the session's
  // inputs, version 2 against the manifest's); nullptr: the manifest's input k.
  Value input(std::size_t c, std::size_t k, const IoInfo* against = nullptr) const;
  // Test case `c`'s expected output k (the reference every variant is held to). Throws Refusal.
  Value expected(std::size_t c, std::size_t k) const;

  // Waits for the hashes of members over 16 MiB (check 5); call before any test case runs. Throws Refusal.
  void verified();

  // A member's bytes (bounded by the archive), for callers that need one raw.
  std::string read_member(const std::string& name) const;

 private:
  Bundle() = default;
  void check_structure();
  void check_members();
  void load_manifest();
  void hash_large(std::vector<std::size_t> members);
  Value decode_member(const std::string& member, const IoInfo& info, std::string& what) const;

  std::string path_;
  std::unique_ptr<Zip> zip_;
  std::string manifest_text_;
  nlohmann::json manifest_;
  int format_version_ = 0;
  std::vector<IoInfo> inputs_, outputs_;
  Assertion assertion_;
  std::vector<TestCase> cases_;
  std::vector<Variant> variants_;
  int64_t seed_ = 0, repeat_ = 1;
  bool has_io_dump_ = false;
  std::string environment_json_;
  std::string generator_version_;
  std::vector<std::pair<std::string, std::pair<uint64_t, std::string>>> listed_;  // name -> (size, sha256)

  std::thread hasher_;
  std::atomic<bool> cancel_{false};
  std::string hash_problem_;  // set by the hasher thread; read after join
};

}  // namespace mgerun
