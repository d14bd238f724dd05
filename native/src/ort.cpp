// onnxruntime through its C API, opened with dlopen (ort.h).
#include "ort.h"

#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <regex>

namespace mgerun {

namespace {

Runtime* g_runtime = nullptr;

bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> glob_all(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g;
  std::memset(&g, 0, sizeof g);
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

// The library of an onnxruntime wheel installed for the python3 on PATH (or the active virtual environment):
// <prefix>/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.1*, with <prefix> the folder above
// the bin/ that holds python3 (a link followed), $VIRTUAL_ENV, or ~/.local. No Python is run.
std::vector<std::string> wheel_candidates() {
  std::vector<std::string> prefixes;
  if (const char* venv = std::getenv("VIRTUAL_ENV")) prefixes.emplace_back(venv);
  if (const char* path = std::getenv("PATH")) {
    std::string all(path);
    size_t start = 0;
    while (start <= all.size()) {
      size_t end = all.find(':', start);
      if (end == std::string::npos) end = all.size();
      std::string dir = all.substr(start, end - start);
      start = end + 1;
      if (dir.empty()) continue;
      std::string exe = dir + "/python3";
      if (!is_file(exe)) continue;
      prefixes.push_back(dir + "/..");
      char real[PATH_MAX];
      if (::realpath(exe.c_str(), real)) {
        std::string r(real);
        auto slash = r.rfind('/');
        if (slash != std::string::npos) prefixes.push_back(r.substr(0, slash) + "/..");
      }
      break;  // the python3 that PATH runs
    }
  }
  if (const char* home = std::getenv("HOME")) prefixes.push_back(std::string(home) + "/.local");
  std::vector<std::string> found;
  for (const auto& prefix : prefixes) {
    for (const char* sub : {"/lib/python3*/site-packages", "/lib/python3*/dist-packages", "/lib64/python3*/site-packages"}) {
      for (const auto& lib : glob_all(prefix + sub + "/onnxruntime/capi/libonnxruntime.so.1*")) {
        if (std::find(found.begin(), found.end(), lib) == found.end()) found.push_back(lib);
      }
    }
  }
  return found;
}

// (major, minor) of "1.19.2"; (0, 0) when it cannot be read.
std::pair<int, int> version_of(const std::string& v) {
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) < 2) return {0, 0};
  return {major, minor};
}

const char* ort_elem_text(int32_t t) {
  switch (t) {
    case kFloat: return "float";
    case kUint8: return "uint8";
    case kInt8: return "int8";
    case kUint16: return "uint16";
    case kInt16: return "int16";
    case kInt32: return "int32";
    case kInt64: return "int64";
    case kString: return "string";
    case kBool: return "bool";
    case kFloat16: return "float16";
    case kDouble: return "double";
    case kUint32: return "uint32";
    case kUint64: return "uint64";
    case kComplex64: return "complex64";
    case kComplex128: return "complex128";
    case kBfloat16: return "bfloat16";
    default: return nullptr;
  }
}

// The element types mgerun feeds and checks in a tensor (mgedump.model.valuetype.ORT_DTYPES).
bool handled_elem(int32_t t) {
  switch (t) {
    case kFloat: case kUint8: case kInt8: case kUint16: case kInt16: case kInt32: case kInt64: case kString:
    case kBool: case kFloat16: case kDouble: case kUint32: case kUint64:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string TypeNode::text(bool top) const {
  switch (kind) {
    case ValueKind::kTensor: {
      if (top) return elem_type == kString ? "str" : elem_type_name(elem_type);
      const char* t = ort_elem_text(elem_type);
      return std::string("tensor(") + (t ? t : "undefined") + ")";
    }
    case ValueKind::kSequence: return "seq(" + (elem ? elem->text(false) : std::string("?")) + ")";
    case ValueKind::kOptional: return "optional(" + (elem ? elem->text(false) : std::string("?")) + ")";
    case ValueKind::kMap: {
      const char* k = ort_elem_text(elem_type);
      return std::string("map(") + (k ? k : "undefined") + "," + (elem ? elem->text(false) : std::string("?")) + ")";
    }
  }
  return "?";
}

Runtime* Runtime::loaded() { return g_runtime; }

Runtime& Runtime::load(const std::string& flag) {
  if (g_runtime) return *g_runtime;
  std::vector<std::string> tried;
  void* handle = nullptr;
  std::string library;
  auto open = [&](const std::string& path, bool must) {
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      library = path;
      return true;
    }
    if (must) {
      const char* why = ::dlerror();
      throw usage_error("cannot load onnxruntime from " + path + ": " + (why ? why : "dlopen failed"));
    }
    return false;
  };
  if (!flag.empty()) {
    open(flag, true);
  } else if (const char* env = std::getenv("MGERUN_ORT_LIB"); env && *env) {
    open(env, true);
  } else if (!open("libonnxruntime.so.1", false)) {
    for (const auto& lib : wheel_candidates()) {
      if (open(lib, false)) break;
    }
  }
  if (!handle) {
    throw usage_error(
        "onnxruntime's shared library not found (no --ort-lib, no MGERUN_ORT_LIB, no libonnxruntime.so.1 on the "
        "library path, no onnxruntime wheel beside python3): give its path with --ort-lib PATH");
  }
  if (library.find('/') == std::string::npos) {  // found on the library path: name the file it is
    Dl_info info;
    void* sym = ::dlsym(handle, "OrtGetApiBase");
    if (sym && ::dladdr(sym, &info) && info.dli_fname) library = info.dli_fname;
  }
  using GetBase = const OrtApiBase* (*)();
  auto get_base = reinterpret_cast<GetBase>(::dlsym(handle, "OrtGetApiBase"));
  if (!get_base) throw usage_error(library + " is not onnxruntime's library (it has no OrtGetApiBase)");
  const OrtApiBase* base = get_base();
  std::string version = base && base->GetVersionString ? base->GetVersionString() : "";
  auto [major, minor] = version_of(version);
  // asking an older library for a newer API makes it print its own complaint: ask only when it can answer
  if (!base || major < 1 || (major == 1 && minor < static_cast<int>(kOrtApiVersion))) {
    throw usage_error("onnxruntime " + (version.empty() ? std::string("of unknown version") : version) + " at " +
                      library + " is too old: mgerun-native needs onnxruntime 1." + std::to_string(kOrtApiVersion) +
                      " or newer");
  }
  const OrtApi* api = base->GetApi(kOrtApiVersion);
  if (!api) {
    throw usage_error("onnxruntime " + version + " at " + library + " does not offer C API version " +
                      std::to_string(kOrtApiVersion));
  }
  auto* rt = new Runtime();
  rt->api = api;
  rt->library = library;
  rt->version = version;
  rt->check(api->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "mgerun-native", &rt->env), 2, "onnxruntime");
  rt->check(api->GetAllocatorWithDefaultOptions(&rt->allocator), 2, "onnxruntime");
  rt->check(api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &rt->cpu), 2, "onnxruntime");
  g_runtime = rt;
  return *rt;
}

void Runtime::check(OrtStatus* status, int code, const std::string& what) const {
  if (!status) return;
  std::string message = api->GetErrorMessage(status);
  api->ReleaseStatus(status);
  throw Failure(code, what + ": " + clean_ort_message(message));
}

std::vector<std::string> Runtime::available_providers() const {
  char** names = nullptr;
  int count = 0;
  std::vector<std::string> out;
  if (OrtStatus* st = api->GetAvailableProviders(&names, &count)) {
    api->ReleaseStatus(st);
    return {"CPUExecutionProvider"};
  }
  for (int i = 0; i < count; ++i) out.emplace_back(names[i]);
  if (OrtStatus* st = api->ReleaseAvailableProviders(names, count)) api->ReleaseStatus(st);
  return out;
}

std::string squeeze_spaces(const std::string& text) {
  std::string squeezed;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !squeezed.empty();
      continue;
    }
    if (space) squeezed += ' ';
    space = false;
    squeezed += c;
  }
  return squeezed;
}

std::string clean_ort_message(const std::string& text, std::size_t limit) {
  static const std::regex prefix(R"(^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:\s*)");
  static const std::regex location(
      R"(\S+\.(?:cc|cpp|h):\d+\s+(?:[\w:~<>*&,\s]+?\((?:[^()]|\([^()]*\))*\)\s*(?:const\s*)?)?)");
  std::string t = std::regex_replace(text, prefix, "");
  t = std::regex_replace(t, location, "");
  std::string squeezed = squeeze_spaces(t);
  if (squeezed.size() > limit) squeezed = squeezed.substr(0, limit - 3) + "...";
  return squeezed;
}

std::vector<std::string> resolve_providers(const Runtime& rt, const std::string& name) {
  if (name.empty()) return {"CPUExecutionProvider"};
  auto lower = [](std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  auto trim = [](std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t i = 0;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(i);
  };
  std::string wanted = lower(trim(name));
  auto available = rt.available_providers();
  for (const auto& p : available) {
    std::string l = lower(p);
    std::string stem = l;
    const std::string suffix = "executionprovider";
    if (stem.size() >= suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
      stem = stem.substr(0, stem.size() - suffix.size());
    if (wanted == l || wanted == stem) {
      if (p == "CPUExecutionProvider") return {p};
      return {p, "CPUExecutionProvider"};
    }
  }
  std::string offers;
  for (const auto& p : available) offers += (offers.empty() ? "" : ", ") + p;
  throw usage_error("unknown execution provider '" + name + "'; this onnxruntime offers: " + offers);
}

namespace {

std::shared_ptr<TypeNode> type_of(const OrtApi* api, const OrtTypeInfo* info, int depth) {
  auto node = std::make_shared<TypeNode>();
  if (depth > 8) return nullptr;
  ONNXType t = ONNX_TYPE_UNKNOWN;
  if (OrtStatus* st = api->GetOnnxTypeFromTypeInfo(info, &t)) {
    api->ReleaseStatus(st);
    return nullptr;
  }
  switch (t) {
    case ONNX_TYPE_TENSOR: {
      const OrtTensorTypeAndShapeInfo* ti = nullptr;
      ONNXTensorElementDataType e = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
      if (OrtStatus* st = api->CastTypeInfoToTensorInfo(info, &ti)) {
        api->ReleaseStatus(st);
        return nullptr;
      }
      if (!ti) return nullptr;
      if (OrtStatus* st = api->GetTensorElementType(ti, &e)) {
        api->ReleaseStatus(st);
        return nullptr;
      }
      node->kind = ValueKind::kTensor;
      node->elem_type = static_cast<int32_t>(e);
      return node;
    }
    case ONNX_TYPE_SEQUENCE: {
      const OrtSequenceTypeInfo* si = nullptr;
      OrtTypeInfo* elem = nullptr;
      if (OrtStatus* st = api->CastTypeInfoToSequenceTypeInfo(info, &si)) {
        api->ReleaseStatus(st);
        return nullptr;
      }
      if (OrtStatus* st = api->GetSequenceElementType(si, &elem)) {
        api->ReleaseStatus(st);
        return nullptr;
      }
      node->kind = ValueKind::kSequence;
      node->elem = type_of(api, elem, depth + 1);
      api->ReleaseTypeInfo(elem);
      return node->elem ? node : nullptr;
    }
    case ONNX_TYPE_MAP: {
      const OrtMapTypeInfo* mi = nullptr;
      ONNXTensorElementDataType key = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
      OrtTypeInfo* value = nullptr;
      if (OrtStatus* st = api->CastTypeInfoToMapTypeInfo(info, &mi)) {
        api->ReleaseStatus(st);
        return nullptr;
      }
      if (OrtStatus* st = api->GetMapKeyType(mi, &key)) {
        api->ReleaseStatus(st);
        return nullptr;
      }
      if (OrtStatus* st = api->GetMapValueType(mi, &value)) {
        api->ReleaseStatus(st);
        return nullptr;
      }
      node->kind = ValueKind::kMap;
      node->elem_type = static_cast<int32_t>(key);
      node->elem = type_of(api, value, depth + 1);
      api->ReleaseTypeInfo(value);
      return node->elem ? node : nullptr;
    }
    case ONNX_TYPE_OPTIONAL: {
      const OrtOptionalTypeInfo* oi = nullptr;
      OrtTypeInfo* elem = nullptr;
      if (OrtStatus* st = api->CastTypeInfoToOptionalTypeInfo(info, &oi)) {
        api->ReleaseStatus(st);
        return nullptr;
      }
      if (OrtStatus* st = api->GetOptionalContainedTypeInfo(oi, &elem)) {
        api->ReleaseStatus(st);
        return nullptr;
      }
      node->kind = ValueKind::kOptional;
      node->elem = type_of(api, elem, depth + 1);
      api->ReleaseTypeInfo(elem);
      return node->elem ? node : nullptr;
    }
    default:
      return nullptr;
  }
}

// Whether mgerun handles the type (mgedump.model.valuetype.parse): tensors of ORT_DTYPES, map keys of integers
// or strings with tensor values, sequences and optionals of those.
bool handled(const TypeNode* n) {
  if (!n) return false;
  switch (n->kind) {
    case ValueKind::kTensor: return handled_elem(n->elem_type);
    case ValueKind::kSequence:
    case ValueKind::kOptional: return handled(n->elem.get());
    case ValueKind::kMap: {
      int32_t k = n->elem_type;
      bool key_ok = k == kString || k == kInt8 || k == kInt16 || k == kInt32 || k == kInt64 || k == kUint8 ||
                    k == kUint16 || k == kUint32 || k == kUint64;
      return key_ok && n->elem && n->elem->kind == ValueKind::kTensor && handled(n->elem.get());
    }
  }
  return false;
}

ModelIo describe(Runtime& rt, OrtTypeInfo* info, const std::string& name, const char* what) {
  const OrtApi* api = rt.api;
  ModelIo io;
  io.name = name;
  io.type = type_of(api, info, 0);
  if (!handled(io.type.get())) {
    throw Failure(2, std::string(what) + " '" + name + "' has a type which mgerun-native cannot feed or check");
  }
  io.is_tensor = io.type->kind == ValueKind::kTensor;
  io.dtype = io.type->text(true);
  if (io.is_tensor) {
    io.elem_type = io.type->elem_type;
    const OrtTensorTypeAndShapeInfo* ti = nullptr;
    rt.check(api->CastTypeInfoToTensorInfo(info, &ti), 2, "onnxruntime");
    size_t n = 0;
    rt.check(api->GetDimensionsCount(ti, &n), 2, "onnxruntime");
    io.dims.assign(n, -1);
    std::vector<const char*> sym(n, nullptr);
    if (n) {
      rt.check(api->GetDimensions(ti, io.dims.data(), n), 2, "onnxruntime");
      rt.check(api->GetSymbolicDimensions(ti, sym.data(), n), 2, "onnxruntime");
    }
    io.rank_known = true;  // onnxruntime gives no way to tell an unknown rank from a scalar here
    for (size_t i = 0; i < n; ++i) io.dim_names.emplace_back(sym[i] ? sym[i] : "");
  }
  return io;
}

}  // namespace

Session::Session(Runtime& rt, const std::string& model_path, const std::string& label, const SessionSettings& s,
                 const std::vector<std::string>& providers)
    : rt_(rt) {
  const OrtApi* api = rt.api;
  OrtSessionOptions* opts = nullptr;
  rt.check(api->CreateSessionOptions(&opts), 2, "onnxruntime");
  struct Guard {
    const OrtApi* api;
    OrtSessionOptions* o;
    ~Guard() { api->ReleaseSessionOptions(o); }
  } guard{api, opts};
  rt.check(api->SetSessionLogSeverityLevel(opts, 4), 2, "onnxruntime");  // the session logs nothing itself
  if (s.threads > 0) rt.check(api->SetIntraOpNumThreads(opts, s.threads), 2, "onnxruntime");
  if (!s.graph_opt.empty()) {
    GraphOptimizationLevel level = ORT_ENABLE_ALL;
    if (s.graph_opt == "disable") level = ORT_DISABLE_ALL;
    else if (s.graph_opt == "basic") level = ORT_ENABLE_BASIC;
    else if (s.graph_opt == "extended") level = ORT_ENABLE_EXTENDED;
    rt.check(api->SetSessionGraphOptimizationLevel(opts, level), 2, "onnxruntime");
  }
  if (!s.execution_mode.empty()) {
    rt.check(api->SetSessionExecutionMode(opts, s.execution_mode == "parallel" ? ORT_PARALLEL : ORT_SEQUENTIAL), 2,
             "onnxruntime");
  }
  if (!providers.empty() && providers[0] != "CPUExecutionProvider") {
    const std::string& p = providers[0];
    std::string stem = p;
    const std::string suffix = "ExecutionProvider";
    if (stem.size() > suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
      stem = stem.substr(0, stem.size() - suffix.size());
    OrtStatus* st = nullptr;
    if (stem == "CUDA") {
      OrtCUDAProviderOptionsV2* cuda = nullptr;
      st = api->CreateCUDAProviderOptions(&cuda);
      if (!st) {
        st = api->SessionOptionsAppendExecutionProvider_CUDA_V2(opts, cuda);
        api->ReleaseCUDAProviderOptions(cuda);
      }
    } else {
      st = api->SessionOptionsAppendExecutionProvider(opts, stem.c_str(), nullptr, nullptr, 0);
    }
    if (st) {
      std::string message = clean_ort_message(api->GetErrorMessage(st));
      api->ReleaseStatus(st);
      throw usage_error("execution provider " + p + " cannot be set up by mgerun-native (" + message +
                        "); run the bundle with mgerun --provider " + stem);
    }
  }
  if (OrtStatus* st = api->CreateSession(rt.env, model_path.c_str(), opts, &session_)) {
    std::string message = clean_ort_message(api->GetErrorMessage(st), 4000);
    api->ReleaseStatus(st);
    // mgedump.model.runtime.describe_load_error
    static const std::regex ir(R"(Unsupported model IR version: (\d+), max supported IR version: (\d+))");
    std::smatch m;
    std::string lowered = message;
    for (auto& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::regex_search(message, m, ir)) {
      throw usage_error(label + ": the model's IR version " + m[1].str() +
                        " is newer than this onnxruntime supports (at most " + m[2].str() +
                        "); re-save it with ir_version <= " + m[2].str() + " (onnx.helper.make_model(..., ir_version=" +
                        m[2].str() + "))");
    }
    if (message.find("Protobuf parsing failed") != std::string::npos) {
      throw usage_error(label +
                        ": not a valid ONNX model (protobuf parsing failed: the file is truncated or not ONNX)");
    }
    if (lowered.find("opset") != std::string::npos && lowered.find("support") != std::string::npos) {
      throw usage_error(label + ": onnxruntime does not support the model's opset: " + message);
    }
    if (message.size() > 400) message = message.substr(0, 397) + "...";
    throw usage_error(label + ": onnxruntime cannot load the model: " + message);
  }
  size_t n_in = 0, n_out = 0;
  rt.check(api->SessionGetInputCount(session_, &n_in), 2, "onnxruntime");
  rt.check(api->SessionGetOutputCount(session_, &n_out), 2, "onnxruntime");
  for (size_t i = 0; i < n_in + n_out; ++i) {
    bool input = i < n_in;
    size_t k = input ? i : i - n_in;
    char* name = nullptr;
    rt.check(input ? api->SessionGetInputName(session_, k, rt.allocator, &name)
                   : api->SessionGetOutputName(session_, k, rt.allocator, &name),
             2, "onnxruntime");
    std::string text(name);
    rt.allocator->Free(rt.allocator, name);
    OrtTypeInfo* info = nullptr;
    rt.check(input ? api->SessionGetInputTypeInfo(session_, k, &info) : api->SessionGetOutputTypeInfo(session_, k, &info),
             2, "onnxruntime");
    try {
      (input ? inputs_ : outputs_).push_back(describe(rt, info, text, input ? "input" : "output"));
    } catch (...) {
      api->ReleaseTypeInfo(info);
      throw;
    }
    api->ReleaseTypeInfo(info);
    (input ? in_name_store_ : out_name_store_).push_back(text);
  }
  for (auto& n : in_name_store_) in_names_.push_back(n.c_str());
  for (auto& n : out_name_store_) out_names_.push_back(n.c_str());
}

Session::~Session() {
  if (session_) rt_.api->ReleaseSession(session_);
}

std::string Session::run(const std::vector<const OrtValue*>& inputs, std::vector<OrtValue*>& outputs) const {
  outputs.assign(out_names_.size(), nullptr);
  OrtStatus* st = rt_.api->Run(session_, nullptr, in_names_.data(), inputs.data(), inputs.size(), out_names_.data(),
                               out_names_.size(), outputs.data());
  if (!st) return "";
  std::string message = clean_ort_message(rt_.api->GetErrorMessage(st));
  rt_.api->ReleaseStatus(st);
  release(outputs);
  return message.empty() ? "onnxruntime failed" : message;
}

void Session::release(std::vector<OrtValue*>& values) const {
  for (auto*& v : values) {
    if (v) rt_.api->ReleaseValue(v);
    v = nullptr;
  }
}

// ---- Value -> OrtValue -------------------------------------------------------------------------------

Feeds::~Feeds() {
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) rt_.api->ReleaseValue(*it);
}

const OrtValue* Feeds::add(const Value& v) {
  OrtValue* made = make(v);
  top_.push_back(made);
  return made;
}

OrtValue* Feeds::make(const Value& v) {
  const OrtApi* api = rt_.api;
  switch (v.kind) {
    case ValueKind::kTensor: {
      const Tensor& t = v.tensor;
      OrtValue* out = nullptr;
      auto type = static_cast<ONNXTensorElementDataType>(t.elem_type);
      if (t.elem_type == kString) {
        rt_.check(api->CreateTensorAsOrtValue(rt_.allocator, t.shape.data(), t.shape.size(), type, &out), 2,
                  "cannot make an input");
        owned_.push_back(out);
        std::vector<const char*> ptrs;
        ptrs.reserve(t.strings.size());
        for (const auto& s : t.strings) ptrs.push_back(s.c_str());
        // FillStringTensor takes NUL-terminated text: an element with a NUL in it is set by its length
        bool nul = false;
        for (const auto& s : t.strings) nul = nul || s.find('\0') != std::string::npos;
        if (!nul) {
          rt_.check(api->FillStringTensor(out, ptrs.data(), ptrs.size()), 2, "cannot make an input");
        } else {
          for (size_t i = 0; i < t.strings.size(); ++i) {
            char* dst = nullptr;
            rt_.check(api->GetResizedStringTensorElementBuffer(out, i, t.strings[i].size(), &dst), 2,
                      "cannot make an input");
            std::memcpy(dst, t.strings[i].data(), t.strings[i].size());
          }
        }
        return out;
      }
      static uint64_t empty_buffer[2] = {0, 0};
      void* data = t.data.empty() ? static_cast<void*>(empty_buffer) : const_cast<uint8_t*>(t.data.data());
      rt_.check(api->CreateTensorWithDataAsOrtValue(rt_.cpu, data, t.data.size(), t.shape.data(), t.shape.size(), type,
                                                    &out),
                2, "cannot make an input");
      owned_.push_back(out);
      return out;
    }
    case ValueKind::kSequence: {
      if (v.elements.empty()) throw usage_error("an empty sequence cannot be fed to onnxruntime's C API");
      std::vector<const OrtValue*> parts;
      for (const auto& e : v.elements) parts.push_back(make(e));
      OrtValue* out = nullptr;
      rt_.check(api->CreateValue(parts.data(), parts.size(), ONNX_TYPE_SEQUENCE, &out), 2, "cannot make an input");
      owned_.push_back(out);
      return out;
    }
    case ValueKind::kMap: {
      Tensor keys;
      keys.elem_type = v.key_type;
      keys.shape = {static_cast<int64_t>(v.elements.size())};
      if (v.key_type == kString) {
        keys.strings = v.string_keys;
      } else {
        keys.elem_type = kInt64;
        keys.data.resize(v.int_keys.size() * 8);
        if (!v.int_keys.empty()) std::memcpy(keys.data.data(), v.int_keys.data(), keys.data.size());
      }
      Tensor values;
      values.shape = keys.shape;
      for (const auto& e : v.elements) {
        if (e.kind != ValueKind::kTensor) throw usage_error("a map value that is not a tensor cannot be fed");
        values.elem_type = e.tensor.elem_type;
        values.data.insert(values.data.end(), e.tensor.data.begin(), e.tensor.data.end());
        values.strings.insert(values.strings.end(), e.tensor.strings.begin(), e.tensor.strings.end());
      }
      // the two tensors must live as long as the map: keep them in values owned here
      auto* kept = new std::vector<Tensor>{std::move(keys), std::move(values)};
      keep_.emplace_back(kept);
      const OrtValue* parts[2] = {make(Value::make_tensor((*kept)[0])), make(Value::make_tensor((*kept)[1]))};
      OrtValue* out = nullptr;
      rt_.check(api->CreateValue(parts, 2, ONNX_TYPE_MAP, &out), 2, "cannot make an input");
      owned_.push_back(out);
      return out;
    }
    case ValueKind::kOptional:
      if (v.elements.empty()) return nullptr;
      return make(v.elements[0]);
  }
  return nullptr;
}

// ---- OrtValue -> Value -------------------------------------------------------------------------------

namespace {

Tensor read_tensor(Runtime& rt, const OrtValue* v) {
  const OrtApi* api = rt.api;
  Tensor t;
  OrtTensorTypeAndShapeInfo* info = nullptr;
  rt.check(api->GetTensorTypeAndShape(v, &info), 2, "cannot read an output");
  ONNXTensorElementDataType e = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t rank = 0, count = 0;
  OrtStatus* st = api->GetTensorElementType(info, &e);
  if (!st) st = api->GetDimensionsCount(info, &rank);
  if (!st) {
    t.shape.resize(rank);
    if (rank) st = api->GetDimensions(info, t.shape.data(), rank);
  }
  if (!st) st = api->GetTensorShapeElementCount(info, &count);
  api->ReleaseTensorTypeAndShapeInfo(info);
  rt.check(st, 2, "cannot read an output");
  t.elem_type = static_cast<int32_t>(e);
  if (t.elem_type == kString) {
    size_t total = 0;
    rt.check(api->GetStringTensorDataLength(v, &total), 2, "cannot read an output");
    std::string buffer(total, '\0');
    std::vector<size_t> offsets(count);
    if (count) {
      rt.check(api->GetStringTensorContent(v, buffer.data(), total, offsets.data(), count), 2,
               "cannot read an output");
    }
    t.strings.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      size_t end = i + 1 < count ? offsets[i + 1] : total;
      t.strings.emplace_back(buffer.substr(offsets[i], end - offsets[i]));
    }
    return t;
  }
  size_t width = elem_size(t.elem_type);
  if (!width) throw usage_error(std::string("an output holds ") + elem_type_name(t.elem_type) + " elements");
  t.data.resize(count * width);
  if (count) {
    void* data = nullptr;
    rt.check(api->GetTensorMutableData(const_cast<OrtValue*>(v), &data), 2, "cannot read an output");
    std::memcpy(t.data.data(), data, t.data.size());
  }
  return t;
}

Value read(Runtime& rt, const OrtValue* v, const TypeNode* type, const std::string& what, int depth) {
  const OrtApi* api = rt.api;
  if (depth > 16) throw usage_error(what + " is nested too deep");
  if (type && type->kind == ValueKind::kOptional) {
    int has = 0;
    if (!v) return Value::make_optional_empty();
    rt.check(api->HasValue(v, &has), 2, "cannot read an output");
    if (!has) return Value::make_optional_empty();
    return Value::make_optional(read(rt, v, type->elem.get(), what, depth + 1));
  }
  if (!v) throw usage_error(what + " has no value");
  ONNXType kind = ONNX_TYPE_UNKNOWN;
  rt.check(api->GetValueType(v, &kind), 2, "cannot read an output");
  auto declared = [&]() { return type ? type->text(false) : std::string("?"); };
  switch (kind) {
    case ONNX_TYPE_TENSOR: {
      if (type && type->kind != ValueKind::kTensor)
        throw usage_error(what + " is a tensor, but the model declares " + declared());
      return Value::make_tensor(read_tensor(rt, v));
    }
    case ONNX_TYPE_SEQUENCE: {
      if (type && type->kind != ValueKind::kSequence)
        throw usage_error(what + " is a sequence, but the model declares " + declared());
      size_t n = 0;
      rt.check(api->GetValueCount(v, &n), 2, "cannot read an output");
      std::vector<Value> items;
      items.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        OrtValue* e = nullptr;
        rt.check(api->GetValue(v, static_cast<int>(i), rt.allocator, &e), 2, "cannot read an output");
        try {
          items.push_back(read(rt, e, type ? type->elem.get() : nullptr, what, depth + 1));
        } catch (...) {
          api->ReleaseValue(e);
          throw;
        }
        api->ReleaseValue(e);
      }
      Value out = Value::make_sequence(std::move(items));
      return out;
    }
    case ONNX_TYPE_MAP: {
      if (type && type->kind != ValueKind::kMap)
        throw usage_error(what + " is a map, but the model declares " + declared());
      OrtValue* k = nullptr;
      OrtValue* vals = nullptr;
      rt.check(api->GetValue(v, 0, rt.allocator, &k), 2, "cannot read an output");
      OrtStatus* st = api->GetValue(v, 1, rt.allocator, &vals);
      if (st) api->ReleaseValue(k);
      rt.check(st, 2, "cannot read an output");
      Tensor keys, values;
      try {
        keys = read_tensor(rt, k);
        values = read_tensor(rt, vals);
      } catch (...) {
        api->ReleaseValue(k);
        api->ReleaseValue(vals);
        throw;
      }
      api->ReleaseValue(k);
      api->ReleaseValue(vals);
      Value out;
      out.kind = ValueKind::kMap;
      out.key_type = type ? type->elem_type : keys.elem_type;
      size_t n = keys.element_count();
      if (keys.elem_type == kString) {
        out.string_keys = keys.strings;
      } else {
        size_t w = elem_size(keys.elem_type);
        for (size_t i = 0; i < n; ++i) {
          int64_t key = 0;
          const uint8_t* p = keys.data.data() + i * w;
          switch (keys.elem_type) {
            case kInt8: key = *reinterpret_cast<const int8_t*>(p); break;
            case kUint8: key = *p; break;
            case kInt16: { int16_t x; std::memcpy(&x, p, 2); key = x; break; }
            case kUint16: { uint16_t x; std::memcpy(&x, p, 2); key = x; break; }
            case kInt32: { int32_t x; std::memcpy(&x, p, 4); key = x; break; }
            case kUint32: { uint32_t x; std::memcpy(&x, p, 4); key = x; break; }
            default: std::memcpy(&key, p, 8); break;
          }
          out.int_keys.push_back(key);
        }
      }
      size_t w = elem_size(values.elem_type);
      if (values.element_count() != n) throw usage_error(what + ": a map with as many values as keys expected");
      for (size_t i = 0; i < n; ++i) {
        Tensor one;
        one.elem_type = values.elem_type;
        if (values.elem_type == kString) {
          one.strings.push_back(values.strings[i]);
        } else {
          one.data.assign(values.data.begin() + i * w, values.data.begin() + (i + 1) * w);
        }
        out.elements.push_back(Value::make_tensor(std::move(one)));
      }
      return out;
    }
    case ONNX_TYPE_OPTIONAL: {
      int has = 0;
      rt.check(api->HasValue(v, &has), 2, "cannot read an output");
      if (!has) return Value::make_optional_empty();
      throw usage_error(what + " is an optional value onnxruntime's C API does not open");
    }
    default:
      throw usage_error(what + " is of a kind of value mgerun-native cannot read");
  }
}

}  // namespace

Value to_value(Runtime& rt, const OrtValue* v, const ModelIo& info) {
  return read(rt, v, info.type.get(), "output '" + info.name + "'", 0);
}

}  // namespace mgerun
