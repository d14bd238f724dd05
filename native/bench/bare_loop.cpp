// The bare C API loop that scripts/bench/native.py times mgerun-native's timing loop against (docs/benchmarks.md):
// onnxruntime opened with dlopen, one session with default options, one float32 input fed from a raw file, WARMUP
// untimed and ITERS timed Run calls; prints the median milliseconds per Run. Built as the probe program beside
// mgerun-native: cmake -S native -B BUILD -DMGERUN_PROBE=native/bench/bare_loop.cpp (only for its header path).
//
//   mgerun-probe LIBONNXRUNTIME MODEL INPUT_NAME RAW_FLOAT32_FILE D0,D1,... ITERS WARMUP
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "onnxruntime_c_api.h"

namespace {

const OrtApi* api = nullptr;

void check(OrtStatus* status) {
  if (status) {
    std::fprintf(stderr, "bare_loop: error: %s\n", api->GetErrorMessage(status));
    std::exit(2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s LIB MODEL INPUT_NAME RAW_FILE D0,D1,... ITERS WARMUP\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "bare_loop: error: %s\n", dlerror());
    return 2;
  }
  using GetBase = const OrtApiBase* (*)();
  auto base = reinterpret_cast<GetBase>(dlsym(lib, "OrtGetApiBase"));
  api = base ? base()->GetApi(17) : nullptr;
  if (!api) {
    std::fprintf(stderr, "bare_loop: error: no C API 17 in %s\n", argv[1]);
    return 2;
  }
  std::vector<int64_t> dims;
  std::stringstream shape(argv[5]);
  for (std::string d; std::getline(shape, d, ',');) dims.push_back(std::stoll(d));
  std::ifstream raw(argv[4], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(raw)), std::istreambuf_iterator<char>());
  const long iters = std::atol(argv[6]), warmup = std::atol(argv[7]);

  OrtEnv* env = nullptr;
  check(api->CreateEnv(ORT_LOGGING_LEVEL_FATAL, "bare", &env));
  OrtSessionOptions* opts = nullptr;
  check(api->CreateSessionOptions(&opts));
  OrtSession* session = nullptr;
  check(api->CreateSession(env, argv[2], opts, &session));
  OrtMemoryInfo* cpu = nullptr;
  check(api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &cpu));
  OrtValue* input = nullptr;
  check(api->CreateTensorWithDataAsOrtValue(cpu, bytes.data(), bytes.size(), dims.data(), dims.size(),
                                            ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &input));
  size_t n_out = 0;
  check(api->SessionGetOutputCount(session, &n_out));
  OrtAllocator* allocator = nullptr;
  check(api->GetAllocatorWithDefaultOptions(&allocator));
  std::vector<char*> out_names(n_out);
  for (size_t i = 0; i < n_out; ++i) check(api->SessionGetOutputName(session, i, allocator, &out_names[i]));
  const char* in_name = argv[3];
  std::vector<OrtValue*> outputs(n_out);
  std::vector<double> ms;
  for (long k = 0; k < warmup + iters; ++k) {
    std::fill(outputs.begin(), outputs.end(), nullptr);
    auto start = std::chrono::steady_clock::now();
    check(api->Run(session, nullptr, &in_name, &input, 1, out_names.data(), n_out, outputs.data()));
    auto stop = std::chrono::steady_clock::now();
    for (auto* v : outputs) api->ReleaseValue(v);
    if (k >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  std::printf("%.6f\n", n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2);
  return 0;
}
