// The JSON report (report.h): mgerun's schema, report version 2.
#include "report.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#ifndef MGEDUMP_VERSION
#define MGEDUMP_VERSION "0.1.0"  // mgedump/__init__.py's __version__; the build passes it
#endif

namespace mgerun {

using nlohmann::json;

namespace {

json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json optional_number(const std::optional<double>& v) { return v ? number(*v) : json(nullptr); }

json element_json(const Element& e) {
  switch (e.kind) {
    case Element::kNone: return nullptr;
    case Element::kInt: return e.i;
    case Element::kUint: return e.u;
    case Element::kFloat: return number(e.f);
    case Element::kBool: return e.b;
    case Element::kText: return e.s;
  }
  return nullptr;
}

json stats_json(const Stats& s) {
  json out = json::object();
  if (!s.present) return out;
  out["shape"] = s.shape;
  out["dtype"] = s.dtype;
  for (auto [key, value] : {std::pair<const char*, double>{"expect_min", s.expect_min},
                            {"expect_max", s.expect_max},
                            {"expect_mean", s.expect_mean},
                            {"get_min", s.get_min},
                            {"get_max", s.get_max},
                            {"get_mean", s.get_mean}}) {
    out[key] = s.finite ? number(value) : json(nullptr);
  }
  if (s.has_abs) {
    out["abs_err_max"] = number(s.abs_err_max);
    out["abs_err_mean"] = number(s.abs_err_mean);
  }
  return out;
}

json output_json(const OutputCheck& c) {
  json out = {
      {"name", c.name},
      {"passed", c.passed},
      {"err", c.err && std::isfinite(*c.err) ? json(*c.err) : json(nullptr)},
      {"maxerr", c.maxerr},
      {"reason", c.reason ? json(*c.reason) : json(nullptr)},
      {"worst_index", c.worst_index ? json(*c.worst_index) : json(nullptr)},
      {"expect", element_json(c.expect)},
      {"get", element_json(c.got)},
      {"stats", stats_json(c.stats)},
      {"failure", c.passed ? json(nullptr) : json(c.failure_lines())},
  };
  if (c.worst_path) out["worst_path"] = *c.worst_path;
  out["error_stat"] = c.stat;
  if (c.stat != "max") out["max_err"] = c.largest ? json(*c.largest) : json(nullptr);
  return out;
}

json latency_json(const Timing& t) {
  LatencyStats s = t.stats();
  if (!s.count) return {{"count", 0}};
  return {{"count", s.count}, {"min", s.min},   {"median", s.median}, {"mean", s.mean},
          {"p90", s.p90},     {"p99", s.p99},   {"max", s.max},       {"stddev", s.stddev}};
}

json case_json(const CaseResult& c) {
  json outputs = json::array();
  for (const auto& check : c.checks) outputs.push_back(output_json(check));
  return {
      {"index", c.index},
      {"spec", c.spec},
      {"origin", c.origin},
      {"passed", c.passed()},
      {"error", c.error ? json(*c.error) : json(nullptr)},
      {"outputs", outputs},
      {"batch", c.timing.batch},
      {"concurrency", 1},
      {"latency_ms", latency_json(c.timing)},
      {"latencies_ms", c.timing.latencies_ms},
      {"warmup_ms", c.timing.warmup_ms},
      {"wall_s", optional_number(c.timing.wall_s)},
      {"inferences_per_s", optional_number(c.timing.inferences_per_s())},
      {"samples_per_s", optional_number(c.timing.samples_per_s())},
      {"seconds", c.seconds},
      {"sweep", json::array()},
      {"diagnosis", nullptr},
  };
}

json tensor_json(const TensorRecord& t) { return {{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}}; }

json bundle_json(const BundleResult& b) {
  json head = {
      {"source", b.path},
      {"name", b.name},
      {"kind", "bundle"},
      {"passed", b.exit_code == 0},
      {"exit_code", b.exit_code},
      {"error", b.error ? json(*b.error) : json(nullptr)},
      {"seconds", b.seconds},
      {"started", b.started},
      {"peak_rss_mib", b.peak_rss_mib},
  };
  if (b.variant) head["variant"] = *b.variant;
  if (b.error) {
    head["test_cases"] = json::array();
    return head;
  }
  json session = {
      {"providers", b.providers},
      {"threads", b.threads > 0 ? json(b.threads) : json(nullptr)},
      {"graph_opt", b.graph_opt},
      {"iters", b.iters},
      {"warmup", b.warmup},
      {"duration_s", 0.0},
      {"concurrency", 1},
  };
  if (!b.execution_mode.empty()) session["execution_mode"] = b.execution_mode;
  json inputs = json::array(), outputs = json::array(), cases = json::array();
  for (const auto& t : b.inputs) inputs.push_back(tensor_json(t));
  for (const auto& t : b.outputs) outputs.push_back(tensor_json(t));
  for (const auto& c : b.cases) cases.push_back(case_json(c));
  json packed = nullptr;
  if (!b.packed_environment.empty()) {
    packed = json::parse(b.packed_environment, nullptr, false);
    if (packed.is_discarded()) packed = nullptr;
  }
  head["assertion"] = {{"enabled", b.assertion}, {"maxerr", b.maxerr}};
  head["session"] = session;
  head["cold_start"] = {{"session_create_ms", optional_number(b.session_create_ms)},
                        {"first_run_ms", optional_number(b.first_run_ms())}};
  head["inputs"] = inputs;
  head["outputs"] = outputs;
  head["profile"] = nullptr;
  head["op_profile"] = nullptr;
  head["test_cases"] = cases;
  head["packed_environment"] = packed;
  head["environment_differences"] = b.environment_differences;
  return head;
}

json environment_json(const Environment& e) {
  json cpu = {
      {"model", e.cpu_model ? json(*e.cpu_model) : json(nullptr)},
      {"arch", e.arch.empty() ? json(nullptr) : json(e.arch)},
      {"flags", e.flags ? json(*e.flags) : json(nullptr)},
      {"flags_from", e.flags_from ? json(*e.flags_from) : json(nullptr)},
      {"logical_cpus", e.logical_cpus},
  };
  return {
      {"mgedump", MGEDUMP_VERSION},  // the mgedump this program was built from: reports merge by it
      {"onnxruntime", e.onnxruntime.empty() ? json(nullptr) : json(e.onnxruntime)},
      {"onnxruntime_packages", json::array()},
      {"providers", e.providers},
      {"onnx", nullptr},
      {"numpy", nullptr},
      {"python", nullptr},
      {"os", {{"system", e.os_system}, {"release", e.os_release}}},
      {"cpu", cpu},
      {"host", e.host},
      {"timestamp", e.timestamp},
      // beyond mgedump's keys (the schema allows others): which program ran, and which library file
      {"verifier", "mgerun-native"},
      {"onnxruntime_library", e.library},
  };
}

}  // namespace

std::optional<double> BundleResult::first_run_ms() const {
  for (const auto& c : cases)
    if (auto ms = c.timing.first_run_ms()) return ms;
  return std::nullopt;
}

std::vector<CaseResult*> BundleResult::failed() {
  std::vector<CaseResult*> out;
  for (auto& c : cases)
    if (!c.passed()) out.push_back(&c);
  return out;
}

std::string BundleResult::verdict_line(const std::string& prefix, bool quiet_pass) const {
  std::size_t failed = 0;
  for (const auto& c : cases) failed += c.passed() ? 0 : 1;
  if (failed) {
    return prefix + "FAILED: " + std::to_string(failed) + " of " + std::to_string(cases.size()) +
           " test case(s) failed";
  }
  if (quiet_pass) return "";
  return prefix + "all " + std::to_string(cases.size()) + " test case(s) " +
         (assertion ? "passed" : "ran (no assertions)");
}

json report_document(const std::vector<BundleResult>& runs, int exit_code, double peak_rss_mib,
                     const Environment& env) {
  json bundles = json::array();
  for (const auto& b : runs) bundles.push_back(bundle_json(b));
  return {
      {"report_version", 2},
      {"passed", exit_code == 0},
      {"exit_code", exit_code},
      {"peak_rss_mib", peak_rss_mib},
      {"environment", environment_json(env)},
      {"bundles", bundles},
  };
}

void check_target(const std::string& path, const std::vector<std::string>& inputs) {
  if (path == "-") return;
  if (path.empty()) throw Failure(2, "an output path is empty: give a file name");
  if (path.back() == '/') throw Failure(2, "output '" + path + "' names a folder, not a file: give a file name");
  char real[PATH_MAX];
  std::string target = ::realpath(path.c_str(), real) ? std::string(real) : path;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      const char* kind = S_ISDIR(st.st_mode)    ? "a folder"
                         : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                         : S_ISCHR(st.st_mode)  ? "a character device"
                         : S_ISBLK(st.st_mode)  ? "a block device"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                                                : "not a regular file";
      throw Failure(2, "output " + path + " is " + kind + "; " +
                           (S_ISDIR(st.st_mode) ? "give a file name" : "give a regular file"));
    }
    for (const auto& input : inputs) {
      struct stat in;
      if (::stat(input.c_str(), &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino) {
        throw Failure(2, "output " + target + " is the input " + input + ": writing it would destroy it; give another path");
      }
    }
  } else if (errno != ENOENT && errno != ENOTDIR) {
    throw Failure(2, "output " + path + ": " + std::strerror(errno));
  }
  auto slash = path.rfind('/');
  std::string shown = slash == std::string::npos ? "." : path.substr(0, slash);
  auto tslash = target.rfind('/');
  std::string folder = tslash == std::string::npos ? "." : (tslash == 0 ? "/" : target.substr(0, tslash));
  if (slash != std::string::npos && slash > 0 && shown.empty()) shown = "/";
  struct stat fs;
  if (::stat(folder.c_str(), &fs) != 0) throw Failure(2, "output folder does not exist: " + shown);
  if (!S_ISDIR(fs.st_mode)) throw Failure(2, "output folder is not a folder: " + shown);
  if (::access(folder.c_str(), W_OK) != 0) throw Failure(2, "output folder is not writable: " + shown);
}

void write_text_atomic(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  std::string target = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {  // written through: the file it points to is replaced, the link stays
      char real[PATH_MAX];
      if (::realpath(path.c_str(), real)) target = real;
      if (::stat(target.c_str(), &st) != 0) st.st_mode = S_IFREG;
    }
    if (!S_ISREG(st.st_mode)) {
      throw Failure(2, "--report-json " + path + " is not a regular file: refusing to write to it");
    }
  }
  auto slash = target.rfind('/');
  std::string dir = slash == std::string::npos ? "." : target.substr(0, slash == 0 ? 1 : slash);
  std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string tmpl = dir + "/." + base + ".XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) {
    throw Failure(2, "cannot write the report " + path + ": " + std::strerror(errno));
  }
  const char* p = text.data();
  std::size_t left = text.size();
  bool ok = true;
  while (left && ok) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) {
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  int saved = errno;
  ::fchmod(fd, 0644);
  if (::close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (!ok || ::rename(name.data(), target.c_str()) != 0) {
    if (ok) saved = errno;
    ::unlink(name.data());
    throw Failure(2, "cannot write the report " + path + ": " + std::strerror(saved));
  }
}

}  // namespace mgerun
