// Timing runs, their statistics, peak memory and where it ran (timing.h).
#include "timing.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "assertion.h"

namespace mgerun {

LatencyStats latency_stats(const std::vector<double>& v) {
  LatencyStats s;
  s.count = v.size();
  if (v.empty()) return s;
  double n = static_cast<double>(v.size());
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  s.median = numpy_median(v);
  s.mean = numpy_sum(v.data(), v.size()) / n;
  s.p90 = numpy_percentile(v, 90);
  s.p99 = numpy_percentile(v, 99);
  if (v.size() > 1) {
    std::vector<double> x(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      double d = v[i] - s.mean;
      x[i] = d * d;
    }
    s.stddev = std::sqrt(numpy_sum(x.data(), x.size()) / n);
  }
  return s;
}

std::optional<double> Timing::inferences_per_s() const {
  if (latencies_ms.empty()) return std::nullopt;
  return 1e3 / (numpy_sum(latencies_ms.data(), latencies_ms.size()) / static_cast<double>(latencies_ms.size()));
}

std::optional<double> Timing::samples_per_s() const {
  auto r = inferences_per_s();
  if (!r || batch <= 1) return std::nullopt;
  return *r * static_cast<double>(batch);
}

std::optional<double> Timing::first_run_ms() const {
  if (!warmup_ms.empty()) return warmup_ms[0];
  if (!latencies_ms.empty()) return latencies_ms[0];
  return std::nullopt;
}

std::string time_runs(const Session& session, const std::vector<const OrtValue*>& feeds, int iters, int warmup,
                      Timing& timing, std::vector<OrtValue*>& first) {
  using clock = std::chrono::steady_clock;
  std::vector<OrtValue*> outputs;
  bool have_first = false;
  timing.warmup_ms.assign(static_cast<std::size_t>(std::max(warmup, 0)), 0.0);
  for (int i = 0; i < warmup; ++i) {
    auto start = clock::now();
    std::string error = session.run(feeds, outputs);
    auto stop = clock::now();
    if (!error.empty()) return error;
    timing.warmup_ms[static_cast<std::size_t>(i)] = std::chrono::duration<double, std::milli>(stop - start).count();
    if (!have_first) {
      first.swap(outputs);
      have_first = true;
    } else {
      session.release(outputs);
    }
  }
  std::vector<double>& lat = timing.latencies_ms;
  lat.assign(static_cast<std::size_t>(std::max(iters, 0)), 0.0);
  auto began = clock::now();
  for (int i = 0; i < iters; ++i) {
    auto start = clock::now();
    std::string error = session.run(feeds, outputs);
    auto stop = clock::now();
    if (!error.empty()) return error;
    lat[static_cast<std::size_t>(i)] = std::chrono::duration<double, std::milli>(stop - start).count();
    if (!have_first) {
      first.swap(outputs);
      have_first = true;
    } else {
      session.release(outputs);
    }
  }
  timing.wall_s = std::chrono::duration<double>(clock::now() - began).count();
  return "";
}

double peak_rss_mib() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm;
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---- where it runs (mgedump.model.environment) ----------------------------------------------------------

namespace {

// The instruction-set flags that change which kernels onnxruntime runs, with the kinds of kernel each changes.
const std::map<std::string, std::vector<std::string>>& kernel_flags() {
  static const std::map<std::string, std::vector<std::string>> flags = {
      {"avx", {"float"}},
      {"avx2", {"int8", "float"}},
      {"fma", {"float"}},
      {"f16c", {"float16"}},
      {"avx512f", {"float"}},
      {"avx512bw", {"int8"}},
      {"avx512vl", {"int8", "float"}},
      {"avx512_vnni", {"int8"}},
      {"avx512_bf16", {"bfloat16"}},
      {"avx512_fp16", {"float16"}},
      {"avx_vnni", {"int8"}},
      {"amx_tile", {"int8", "bfloat16"}},
      {"amx_int8", {"int8"}},
      {"amx_bf16", {"bfloat16"}},
      {"neon", {"int8", "float"}},
      {"asimd", {"int8", "float"}},
      {"asimddp", {"int8"}},
      {"asimdhp", {"float16"}},
      {"fphp", {"float16"}},
      {"i8mm", {"int8"}},
      {"bf16", {"bfloat16"}},
      {"sve", {"int8", "float"}},
      {"sve2", {"int8", "float"}},
      {"sme", {"int8", "float"}},
      {"sme2", {"int8", "float"}},
  };
  return flags;
}

const std::set<std::string> kX86 = {"avx",         "avx2",        "fma",      "f16c",     "avx512f",
                                    "avx512bw",    "avx512vl",    "avx512_vnni", "avx512_bf16", "avx512_fp16",
                                    "avx_vnni",    "amx_tile",    "amx_int8", "amx_bf16"};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

std::string arm_model(const std::map<std::string, std::string>& block) {
  static const std::map<int, std::string> vendors = {
      {0x41, "ARM"}, {0x42, "Broadcom"}, {0x43, "Cavium"}, {0x48, "HiSilicon"}, {0x4E, "NVIDIA"}, {0x50, "APM"},
      {0x51, "Qualcomm"}, {0x53, "Samsung"}, {0x56, "Marvell"}, {0x61, "Apple"}, {0x69, "Intel"}, {0xC0, "Ampere"}};
  static const std::map<std::pair<int, int>, std::string> parts = {
      {{0x41, 0xD03}, "Cortex-A53"},  {{0x41, 0xD05}, "Cortex-A55"},  {{0x41, 0xD07}, "Cortex-A57"},
      {{0x41, 0xD08}, "Cortex-A72"},  {{0x41, 0xD09}, "Cortex-A73"},  {{0x41, 0xD0A}, "Cortex-A75"},
      {{0x41, 0xD0B}, "Cortex-A76"},  {{0x41, 0xD0C}, "Neoverse-N1"}, {{0x41, 0xD40}, "Neoverse-V1"},
      {{0x41, 0xD41}, "Cortex-A78"},  {{0x41, 0xD44}, "Cortex-X1"},   {{0x41, 0xD46}, "Cortex-A510"},
      {{0x41, 0xD47}, "Cortex-A710"}, {{0x41, 0xD48}, "Cortex-X2"},   {{0x41, 0xD49}, "Neoverse-N2"},
      {{0x41, 0xD4A}, "Neoverse-E1"}, {{0x41, 0xD4F}, "Neoverse-V2"}};
  auto imp = block.find("CPU implementer");
  auto part = block.find("CPU part");
  if (imp == block.end() || part == block.end()) return "";
  char* end = nullptr;
  long i = std::strtol(imp->second.c_str(), &end, 16);
  if (!end || *end) return "";
  long p = std::strtol(part->second.c_str(), &end, 16);
  if (!end || *end) return "";
  char hex[32];
  auto v = vendors.find(static_cast<int>(i));
  std::snprintf(hex, sizeof hex, "implementer %#lx", i);
  std::string vendor = v != vendors.end() ? v->second : hex;
  auto pn = parts.find({static_cast<int>(i), static_cast<int>(p)});
  std::snprintf(hex, sizeof hex, "part %#lx", p);
  return vendor + " " + (pn != parts.end() ? pn->second : std::string(hex));
}

void parse_cpuinfo(const std::string& text, Environment& env) {
  std::vector<std::map<std::string, std::string>> blocks;
  std::map<std::string, std::string> block;
  std::istringstream in(text);
  std::string line;
  auto flush = [&]() {
    blocks.push_back(block);
    block.clear();
  };
  while (std::getline(in, line)) {
    if (trim(line).empty() && line.find(':') == std::string::npos) {
      if (line.empty()) flush();
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon));
    if (!block.count(key)) block[key] = trim(line.substr(colon + 1));
  }
  flush();
  std::vector<std::map<std::string, std::string>> procs;
  for (auto& b : blocks)
    if (b.count("processor")) procs.push_back(b);
  if (procs.empty())
    for (auto& b : blocks)
      if (!b.empty()) procs.push_back(b);
  std::vector<std::string> models;
  std::optional<std::set<std::string>> common;
  for (auto& b : procs) {
    std::string model = b.count("model name") && !b["model name"].empty() ? b["model name"] : arm_model(b);
    if (!model.empty() && std::find(models.begin(), models.end(), model) == models.end()) models.push_back(model);
    auto f = b.find("flags");
    if (f == b.end()) f = b.find("Features");
    if (f != b.end()) {
      std::set<std::string> tokens;
      std::istringstream ts(f->second);
      std::string t;
      while (ts >> t) tokens.insert(t);
      if (!common) {
        common = tokens;
      } else {
        std::set<std::string> both;
        for (auto& x : *common)
          if (tokens.count(x)) both.insert(x);
        common = both;
      }
    }
  }
  if (models.empty()) {
    for (auto& b : blocks) {
      std::string m = b.count("Hardware") && !b["Hardware"].empty() ? b["Hardware"]
                       : b.count("Model")                        ? b["Model"]
                                                                 : "";
      if (!m.empty()) {
        models.push_back(m);
        break;
      }
    }
  }
  std::string joined;
  for (auto& m : models) joined += (joined.empty() ? "" : " + ") + m;
  if (!joined.empty()) env.cpu_model = joined;
  if (common) {
    std::vector<std::string> flags;
    for (auto& f : *common)
      if (kernel_flags().count(f)) flags.push_back(f);
    env.flags = flags;  // a std::set iterates sorted
  }
}

std::string kernel_label(const std::string& arch, const std::vector<std::string>& flags) {
  std::set<std::string> have(flags.begin(), flags.end());
  bool x86 = arch == "x86_64";
  for (auto& f : have) x86 = x86 || kX86.count(f);
  if (x86) {
    if (have.count("amx_tile") || have.count("amx_int8") || have.count("amx_bf16")) return "AMX";
    if (have.count("avx512_vnni")) return "AVX-512 VNNI";
    if (have.count("avx512f")) return "AVX-512";
    if (have.count("avx_vnni")) return "AVX-VNNI";
    return have.count("avx2") ? "AVX2" : have.count("avx") ? "AVX" : "no AVX";
  }
  std::string out = have.count("asimd") || have.count("neon") ? "NEON" : "no NEON";
  const std::pair<const char*, const char*> extras[] = {
      {"asimddp", "dot product"}, {"asimdhp", "fp16"}, {"i8mm", "i8mm"}, {"bf16", "bf16"}};
  for (auto& [flag, label] : extras)
    if (have.count(flag)) out += std::string(" + ") + label;
  for (const char* f : {"sve", "sve2", "sme", "sme2"}) {
    if (have.count(f)) {
      std::string up(f);
      for (auto& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out += " + " + up;
    }
  }
  return out;
}

std::string and_words(const std::vector<std::string>& w) {
  if (w.size() == 1) return w[0];
  std::string s;
  for (std::size_t i = 0; i + 1 < w.size(); ++i) s += (i ? ", " : "") + w[i];
  return s + " and " + w.back();
}

}  // namespace

Environment run_environment(const Runtime& rt) {
  Environment env;
  env.onnxruntime = rt.version;
  env.library = rt.library;
  env.providers = rt.available_providers();
  struct utsname u;
  if (::uname(&u) == 0) {
    env.os_system = u.sysname;
    env.os_release = u.release;
    env.host = u.nodename;
    std::string m = u.machine;
    std::string lower = m;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    env.arch = lower == "amd64" || lower == "x64" ? "x86_64" : lower == "arm64" ? "aarch64" : m;
  }
  std::ifstream f("/proc/cpuinfo");
  if (f) {
    std::stringstream ss;
    ss << f.rdbuf();
    parse_cpuinfo(ss.str(), env);
    if (env.flags) env.flags_from = "/proc/cpuinfo";
  }
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  env.logical_cpus = n > 0 ? static_cast<int>(n) : 1;
  env.timestamp = utc_timestamp();
  return env;
}

std::string environment_summary(const Environment& env) {
  std::string arch = env.arch.empty() ? "unknown arch" : env.arch;
  std::string where = env.flags ? arch + ", " + kernel_label(env.arch, *env.flags) : arch;
  std::string line = "onnxruntime " + (env.onnxruntime.empty() ? std::string("not installed") : env.onnxruntime) +
                     " on " + (env.cpu_model ? *env.cpu_model : std::string("an unknown CPU")) + " (" + where + "), " +
                     (env.os_system.empty() ? std::string("?") : env.os_system) + " " + env.os_release;
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::vector<std::string> environment_differences(const std::string& packed_json, const Environment& ran) {
  std::vector<std::string> found;
  nlohmann::json packed;
  if (!packed_json.empty()) packed = nlohmann::json::parse(packed_json, nullptr, false);
  if (!packed.is_object() || packed.empty()) {
    return {"packing environment unknown: the bundle does not record where it was packed"};
  }
  auto str = [](const nlohmann::json& j, const char* key) -> std::string {
    if (!j.is_object()) return "";
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
  };
  std::string p_ort = str(packed, "onnxruntime");
  if (!p_ort.empty() && !ran.onnxruntime.empty() && p_ort != ran.onnxruntime)
    found.push_back("packed with onnxruntime " + p_ort + ", run with " + ran.onnxruntime);
  nlohmann::json p_cpu = packed.contains("cpu") && packed["cpu"].is_object() ? packed["cpu"] : nlohmann::json::object();
  std::string p_arch = str(p_cpu, "arch");
  if (!p_arch.empty() && !ran.arch.empty() && p_arch != ran.arch) {
    found.push_back("packed on " + p_arch + ", run on " + ran.arch + ": every kernel differs");
  } else {
    std::string arch = !p_arch.empty() ? p_arch : ran.arch;
    auto pf = p_cpu.find("flags");
    if (pf != p_cpu.end() && pf->is_array() && ran.flags) {
      std::set<std::string> packed_flags, ran_flags(ran.flags->begin(), ran.flags->end());
      for (auto& f : *pf)
        if (f.is_string()) packed_flags.insert(f.get<std::string>());
      std::set<std::string> lost, gained;
      for (auto& f : packed_flags)
        if (!ran_flags.count(f)) lost.insert(f);
      for (auto& f : ran_flags)
        if (!packed_flags.count(f)) gained.insert(f);
      if (!lost.empty() || !gained.empty()) {
        std::set<std::string> changed;
        for (const auto* group : {&lost, &gained})
          for (auto& f : *group) {
            auto k = kernel_flags().find(f);
            if (k != kernel_flags().end()) changed.insert(k->second.begin(), k->second.end());
          }
        std::vector<std::string> kinds;
        for (const char* k : {"int8", "float", "float16", "bfloat16"})
          if (changed.count(k)) kinds.push_back(k);
        std::string what = kinds.empty() ? "kernels may differ" : and_words(kinds) + " kernels differ";
        std::vector<std::string> pv(packed_flags.begin(), packed_flags.end());
        std::string p_label = kernel_label(arch, pv), r_label = kernel_label(arch, *ran.flags);
        if (p_label != r_label) {
          found.push_back("packed on " + p_label + ", run on " + r_label + (gained.empty() ? " only" : "") + ": " +
                          what);
        } else {
          std::vector<std::string> parts;
          for (auto [verb, group] : {std::pair<const char*, const std::set<std::string>*>{"lacks", &lost},
                                     std::pair<const char*, const std::set<std::string>*>{"adds", &gained}}) {
            if (group->empty()) continue;
            std::string list;
            for (auto& f : *group) list += (list.empty() ? "" : ", ") + f;
            parts.push_back(std::string("the run ") + verb + " " + list);
          }
          std::string joined;
          for (auto& p : parts) joined += (joined.empty() ? "" : "; ") + p;
          found.push_back("CPU features differ (" + joined + "): " + what);
        }
      }
    }
    std::string p_model = str(p_cpu, "model");
    if (!p_model.empty() && ran.cpu_model && !ran.cpu_model->empty() && p_model != *ran.cpu_model)
      found.push_back("packed on CPU '" + p_model + "', run on '" + *ran.cpu_model + "'");
  }
  std::string p_os = packed.contains("os") ? str(packed["os"], "system") : "";
  if (!p_os.empty() && !ran.os_system.empty() && p_os != ran.os_system)
    found.push_back("packed on " + p_os + ", run on " + ran.os_system);
  return found;
}

}  // namespace mgerun
