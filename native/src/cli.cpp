// mgerun-native's command line (cli.h): what mgerun does for bundles (mgedump/commands/verify.py,
// verify_prepare.py, verify_many.py) and what it prints (mgedump/cli/output.py), in C++.
#include "cli.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "assertion.h"
#include "bundle.h"
#include "ort.h"
#include "report.h"
#include "timing.h"

#ifndef MGERUN_NATIVE_VERSION
#define MGERUN_NATIVE_VERSION "0.1.0"
#endif

namespace mgerun {

namespace {

const char* kProgram = "mgerun-native";

struct Options {
  std::vector<std::string> paths;
  int iters = 10;
  int warmup = 1;
  int threads = 0;
  std::string graph_opt;
  std::string provider;
  std::string execution_mode;
  std::optional<bool> silent;
  std::optional<std::string> variant;
  std::optional<double> maxerr;
  std::vector<std::pair<std::string, double>> output_maxerr;
  std::optional<std::string> error_stat;
  std::vector<std::pair<std::string, std::string>> output_error_stat;
  std::string ort_lib;
  std::string report_json;
};

// ---- printing ------------------------------------------------------------------------------------------

// Text as it may reach a terminal: control characters escaped (\x1b), so a name from a file can neither drive
// the terminal nor fake a result line (mgedump.base.log.printable).
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool g_lines_to_stderr = false;  // --report-json -: the report has stdout to itself

void say(const std::string& line) {
  std::string text = printable(line) + "\n";
  std::fwrite(text.data(), 1, text.size(), g_lines_to_stderr ? stderr : stdout);
}

void say_lines(const std::vector<std::string>& lines) {
  for (const auto& l : lines) say(l);
}

void error_line(const std::string& message) {
  std::string text = std::string(kProgram) + ": error: " + printable(message) + "\n";
  std::fflush(stdout);
  std::fwrite(text.data(), 1, text.size(), stderr);
}

std::vector<std::string> table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  std::vector<std::string> lines;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i) line += "  ";
      std::string pad(widths[i] - row[i].size(), ' ');
      line += i ? pad + row[i] : row[i] + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string rate_text(const std::optional<double>& v) { return v ? fixed(*v, 1) : "-"; }

std::string case_head(const CaseResult& c) {
  return "test case " + std::to_string(c.index) + " (" + c.origin + ": " + c.spec + ")";
}

std::vector<std::string> case_lines(const CaseResult& c, bool show_passing, const std::vector<std::string>& elsewhere) {
  std::vector<std::string> lines;
  for (const auto& out : c.checks) {
    if (!out.passed) {
      auto f = out.failure_lines();
      lines.insert(lines.end(), f.begin(), f.end());
    } else if (show_passing) {
      lines.push_back(err_text(out.err, out.stat, out.largest) + " (name=" + out.name + ")");
    }
  }
  if (c.error) {
    lines.insert(lines.begin(), case_head(c) + ": FAILED: " + *c.error);
  } else if (!lines.empty() || show_passing) {
    lines.insert(lines.begin(), case_head(c));
  }
  if (!c.passed() && !elsewhere.empty()) {
    std::string joined;
    for (const auto& e : elsewhere) joined += (joined.empty() ? "" : "; ") + e;
    lines.push_back("  where it ran differs from where it was packed: " + joined);
  }
  return lines;
}

std::vector<std::string> timing_lines(const BundleResult& b) {
  std::vector<std::vector<std::string>> rows = {
      {"latency (ms)", "batch", "iters", "min", "median", "mean", "p90", "p99", "max", "stddev", "inf/s", "samples/s"}};
  for (const auto& c : b.cases) {
    LatencyStats s = c.timing.stats();
    if (!s.count) continue;
    rows.push_back({"test case " + std::to_string(c.index), std::to_string(c.timing.batch), std::to_string(s.count),
                    fixed(s.min, 3), fixed(s.median, 3), fixed(s.mean, 3), fixed(s.p90, 3), fixed(s.p99, 3),
                    fixed(s.max, 3), fixed(s.stddev, 3), rate_text(c.timing.inferences_per_s()),
                    rate_text(c.timing.samples_per_s())});
  }
  if (rows.size() == 1) return {};
  return table(rows);
}

std::string cold_line(const BundleResult& b, bool with_peak) {
  std::vector<std::string> parts;
  if (b.session_create_ms) parts.push_back("session created in " + fixed(*b.session_create_ms, 1) + " ms");
  if (auto first = b.first_run_ms()) parts.push_back("first run " + fixed(*first, 3) + " ms");
  if (with_peak) parts.push_back("peak memory " + fixed(b.peak_rss_mib, 0) + " MiB");
  if (parts.empty()) return "";
  std::string line = "cold start: ";
  for (std::size_t i = 0; i < parts.size(); ++i) line += (i ? ", " : "") + parts[i];
  return line;
}

std::vector<std::string> environment_lines(const BundleResult& b) {
  if (b.environment_differences.empty()) return {};
  if (b.packed_environment.empty()) return b.environment_differences;
  std::string joined;
  for (const auto& e : b.environment_differences) joined += (joined.empty() ? "" : "; ") + e;
  return {"where it ran differs from where it was packed: " + joined};
}

// ---- the command line ----------------------------------------------------------------------------------

const char* kHelp =
    "Usage: mgerun-native [OPTIONS] BUNDLE...\n"
    "\n"
    "  Verify every test case of each BUNDLE and time it, as mgerun does, without Python; exit with the worst\n"
    "  outcome (1: a mismatch, 2: bad input). A folder stands for every *.mgetest bundle of its tree.\n"
    "\n"
    "Options:\n"
    "  --iter N              Timed runs per test case (default 10).\n"
    "  --warmup-iter N       Untimed runs before timing (default 1).\n"
    "  --thread N            onnxruntime intra-op threads (default: onnxruntime's choice).\n"
    "  --graph-opt LEVEL     disable, basic, extended or all (default: onnxruntime's, all).\n"
    "  --execution-mode M    sequential (onnxruntime's default) or parallel.\n"
    "  --provider NAME       Execution provider, e.g. CPU or CUDAExecutionProvider (default CPU).\n"
    "  --silent              Print failures only.\n"
    "  --variant NAME        Of a bundle of several variants, run this one (default: every variant).\n"
    "  --maxerr [OUTPUT:]X   Override the bundle's AssertEqual thresholds (repeatable).\n"
    "  --error-stat [OUTPUT:]STAT  Override the statistic the bundle bounds: max, p99, mean or median\n"
    "                        (repeatable; --error-stat max checks the largest error again).\n"
    "  --report-json PATH    Write mgerun's JSON report (docs/reports.md); mgerun --merge takes it.\n"
    "  --ort-lib PATH        onnxruntime's shared library (else $MGERUN_ORT_LIB, the system's\n"
    "                        libonnxruntime.so.1, or an installed onnxruntime wheel's).\n"
    "  --version             Show the version and exit.\n"
    "  -h, --help            Show this message and exit.\n"
    "\n"
    "Packing, -d data, io dumps, --profile, --fitting, JUnit/HTML reports and the rest are mgerun's.\n";

// mgerun's flags this program leaves to mgerun, with what they do.
const std::map<std::string, std::string>& mgerun_only() {
  static const std::map<std::string, std::string> flags = {
      {"-d", "test data for a plain model"},
      {"--data", "test data for a plain model"},
      {"--seed", "test data for a plain model"},
      {"--repeat", "test data for a plain model"},
      {"--resize-input", "test data for a plain model"},
      {"--input-transform", "test data for a plain model"},
      {"--input-shape", "test data for a plain model"},
      {"--no-assert", "running without checks"},
      {"--duration", "timing for a duration"},
      {"--concurrency", "timing under concurrent load"},
      {"--profile", "onnxruntime's profile"},
      {"--bin-out-dump", "dumping outputs"},
      {"--repeat-sweep", "the batch sweep"},
      {"--junit-xml", "JUnit reports (mgerun --merge REPORT.json --junit-xml FILE makes one of this report)"},
      {"--report-html", "HTML reports (mgerun --merge REPORT.json --report-html FILE makes one of this report)"},
      {"--io-dump", "io dumps"},
      {"--io-dump-budget", "io dumps"},
      {"--fitting", "fitting"},
      {"--fitting-out", "fitting"},
      {"--fitting-budget", "fitting"},
      {"--config", "fitting's choice"},
      {"--merge", "merging reports"},
      {"--shard", "shards"},
      {"--jobs", "worker processes"},
      {"--shard-durations", "shards"},
      {"--jobs-timing", "worker processes"},
      {"-v", "verbose output"},
      {"--verbose", "verbose output"},
      {"-q", "quiet output"},
      {"--quiet", "quiet output"},
  };
  return flags;
}

int parse_int(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw usage_error("Invalid value for '" + flag + "': '" + text + "' is not a valid integer.");
  }
  return static_cast<int>(v);
}

bool parse_double(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  // Python's float() takes surrounding spaces, "inf", "nan"; strtod takes hex too: refuse hex as Python does
  if (text.find("0x") != std::string::npos || text.find("0X") != std::string::npos) return false;
  while (end && *end == ' ') ++end;
  return end && !*end;
}

double check_maxerr(double v, const std::string& what) {
  if (!std::isfinite(v) || v < 0) throw usage_error(what + " must be a finite number >= 0, got " + python_float_repr(v));
  return v;
}

Options parse(int argc, char** argv, bool& done) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  bool only_paths = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (only_paths || a.empty() || a[0] != '-' || a == "-") {
      o.paths.push_back(a);
      continue;
    }
    if (a == "--") {
      only_paths = true;
      continue;
    }
    std::string flag = a, value;
    bool inline_value = false;
    auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    auto take = [&]() -> std::string {
      if (inline_value) return value;
      if (i + 1 >= args.size()) throw usage_error("Option '" + flag + "' requires an argument.");
      return args[++i];
    };
    if (flag == "-h" || flag == "--help") {
      std::fputs(kHelp, stdout);
      done = true;
      return o;
    }
    if (flag == "--version") {
      std::printf("%s %s\n", kProgram, MGERUN_NATIVE_VERSION);
      done = true;
      return o;
    }
    if (flag == "--iter") {
      o.iters = parse_int(flag, take());
    } else if (flag == "--warmup-iter") {
      o.warmup = parse_int(flag, take());
    } else if (flag == "--thread") {
      o.threads = parse_int(flag, take());
      if (o.threads < 1) throw usage_error("--thread must be >= 1, got " + std::to_string(o.threads));
    } else if (flag == "--graph-opt") {
      o.graph_opt = take();
      if (o.graph_opt != "disable" && o.graph_opt != "basic" && o.graph_opt != "extended" && o.graph_opt != "all") {
        throw usage_error("Invalid value for '--graph-opt': '" + o.graph_opt +
                          "' is not one of 'disable', 'basic', 'extended', 'all'.");
      }
    } else if (flag == "--execution-mode") {
      o.execution_mode = take();
      if (o.execution_mode != "sequential" && o.execution_mode != "parallel") {
        throw usage_error("Invalid value for '--execution-mode': '" + o.execution_mode +
                          "' is not one of 'sequential', 'parallel'.");
      }
    } else if (flag == "--provider") {
      o.provider = take();
    } else if (flag == "--silent") {
      o.silent = true;
    } else if (flag == "--variant") {
      o.variant = take();
    } else if (flag == "--maxerr") {
      std::string text = take();
      double v;
      if (parse_double(text, v)) {
        o.maxerr = check_maxerr(v, "--maxerr");
        continue;
      }
      auto colon = text.rfind(':');
      if (colon == std::string::npos || colon == 0 || !parse_double(text.substr(colon + 1), v)) {
        throw usage_error("--maxerr '" + text + "': give a number (e.g. 1e-4) or OUTPUT:number (e.g. prob:1e-3)");
      }
      std::string name = text.substr(0, colon);
      check_maxerr(v, "--maxerr " + name + ":");
      bool replaced = false;
      for (auto& [n, b] : o.output_maxerr)
        if (n == name) {
          b = v;
          replaced = true;
        }
      if (!replaced) o.output_maxerr.emplace_back(name, v);
    } else if (flag == "--error-stat") {
      std::string text = take();
      auto colon = text.rfind(':');
      std::string stat = colon == std::string::npos ? text : text.substr(colon + 1);
      if (stat != "max" && stat != "p99" && stat != "mean" && stat != "median") {
        throw usage_error("--error-stat " + python_str_repr(text) + ": give one of max, p99, mean, median, or OUTPUT:STAT");
      }
      if (colon == std::string::npos) {
        o.error_stat = stat;
        continue;
      }
      std::string name = text.substr(0, colon);
      bool replaced = false;
      for (auto& [n, s] : o.output_error_stat)
        if (n == name) {
          s = stat;
          replaced = true;
        }
      if (!replaced) o.output_error_stat.emplace_back(name, stat);
    } else if (flag == "--ort-lib") {
      o.ort_lib = take();
    } else if (flag == "--report-json") {
      o.report_json = take();
    } else {
      auto known = mgerun_only().find(flag);
      if (known != mgerun_only().end()) {
        throw usage_error(flag + " (" + known->second + ") is mgerun's, not mgerun-native's: run mgerun for it");
      }
      throw usage_error("No such option: " + flag);
    }
  }
  if (o.iters < 1) throw usage_error("--iter must be >= 1, got " + std::to_string(o.iters));
  if (o.warmup < 0) throw usage_error("--warmup-iter must be >= 0, got " + std::to_string(o.warmup));
  return o;
}

// ---- the bundles named ---------------------------------------------------------------------------------

void walk_folder(const std::string& dir, std::vector<std::string>& found, int depth) {
  if (depth > 64) throw usage_error(dir + ": folders nested too deep");
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    std::string p = dir + (dir.empty() || dir.back() == '/' ? "" : "/") + n;
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      walk_folder(p, found, depth + 1);
    } else if (n.size() > 8 && n.compare(n.size() - 8, 8, ".mgetest") == 0) {
      found.push_back(p);
    }
  }
}

std::vector<std::string> expand(const std::vector<std::string>& paths) {
  if (paths.empty()) throw usage_error("no bundle given: mgerun-native BUNDLE... (--help says more)");
  std::vector<std::string> out;
  for (const auto& p : paths) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::vector<std::string> found;
      walk_folder(p, found, 0);
      if (found.empty()) throw usage_error(p + " is a folder that holds no *.mgetest bundle");
      out.insert(out.end(), found.begin(), found.end());
    } else {
      std::string lower = p;
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower.size() >= 5 && lower.compare(lower.size() - 5, 5, ".onnx") == 0) {
        throw usage_error(p + " is a plain model: mgerun-native verifies bundles; run a plain model with mgerun " +
                          "(mgerun MODEL -d SPEC), or pack it with mgedump first");
      }
      out.push_back(p);
    }
  }
  return out;
}

std::string bundle_name(const std::string& path) {
  auto slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.size() > 8 && base.compare(base.size() - 8, 8, ".mgetest") == 0) return base.substr(0, base.size() - 8);
  return base;
}

// ---- the temporary folder, removed on every way out ----------------------------------------------------

char g_tmp_dir[PATH_MAX] = {0};
char g_tmp_files[2][PATH_MAX] = {{0}, {0}};

void remove_tmp() {
  for (auto& f : g_tmp_files) {
    if (f[0]) ::unlink(f);
    f[0] = 0;
  }
  if (g_tmp_dir[0]) {
    char model_dir[PATH_MAX + 8];
    std::snprintf(model_dir, sizeof model_dir, "%s/model", g_tmp_dir);
    ::rmdir(model_dir);
    ::rmdir(g_tmp_dir);
  }
  g_tmp_dir[0] = 0;
}

void on_signal(int sig) {
  remove_tmp();
  ::_exit(sig == SIGINT ? 130 : 143);
}

struct TmpDir {
  std::string path;
  TmpDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mgerun-native-XXXXXX";
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    if (!::mkdtemp(name.data())) throw usage_error("cannot make a temporary folder in " + tmpl.substr(0, tmpl.rfind('/')));
    path = name.data();
    std::snprintf(g_tmp_dir, sizeof g_tmp_dir, "%s", path.c_str());
  }
  ~TmpDir() { remove_tmp(); }
};

// ---- casts of a variant's inputs (mgedump.data.casts.cast_to, for the dtypes a variant changes) ------------

Value cast_input(const Value& v, const ModelIo& target, const std::string& name) {
  if (v.kind != ValueKind::kTensor || !target.is_tensor) return v;
  const Tensor& t = v.tensor;
  int32_t to = target.elem_type;
  if (t.elem_type == to) return v;
  auto is_f = [](int32_t x) { return x == kFloat || x == kDouble || x == kFloat16; };
  if (!is_f(t.elem_type) || !is_f(to)) {
    throw usage_error("input '" + name + "' takes " + elem_type_name(to) + ", but the test data holds " +
                      elem_type_name(t.elem_type) + ": mgerun-native casts floats only");
  }
  std::size_t n = t.element_count();
  auto get = [&](std::size_t i) -> double {
    const uint8_t* p = t.data.data() + i * elem_size(t.elem_type);
    if (t.elem_type == kFloat) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    if (t.elem_type == kDouble) {
      double f;
      std::memcpy(&f, p, 8);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return half_to_float(h);
  };
  double top = to == kFloat16 ? 65504.0 : to == kFloat ? static_cast<double>(std::numeric_limits<float>::max()) : 0;
  if (top > 0 && elem_size(t.elem_type) > elem_size(to)) {
    std::size_t outside = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double x = get(i);
      if (std::isfinite(x) && std::fabs(x) > top) ++outside;
    }
    if (outside) {
      throw usage_error("input '" + name + "' takes " + elem_type_name(to) + ", but the test data holds " +
                        std::to_string(outside) + " value(s) outside its range [" + format_g(-top) + ", " +
                        format_g(top) + "] (hint: give data within the input's range)");
    }
  }
  Value want = Value::make_tensor(Tensor{to, {}, std::vector<uint8_t>(elem_size(to), 0), {}});
  Value out = v;
  by_value(want, out);
  return out;
}

// The leading dim of the first input (1 for a scalar or a non-tensor): a test case's batch.
int64_t batch_of(const std::vector<Value>& feeds) {
  if (feeds.empty()) return 1;
  const Value& v = feeds[0];
  if (v.kind != ValueKind::kTensor || v.tensor.shape.empty()) return 1;
  return v.tensor.shape[0];
}

std::string run_failure(const std::string& message, const std::vector<Value>& feeds,
                        const std::vector<std::string>& names) {
  std::string text = "the model failed to run: " + message;
  std::vector<std::string> ints;
  for (std::size_t i = 0; i < feeds.size() && i < names.size(); ++i) {
    if (feeds[i].kind == ValueKind::kTensor) {
      int32_t t = feeds[i].tensor.elem_type;
      if (t == kInt8 || t == kInt16 || t == kInt32 || t == kInt64 || t == kUint8 || t == kUint16 || t == kUint32 ||
          t == kUint64)
        ints.push_back("'" + names[i] + "'");
    }
  }
  static const std::regex bounds("out of (data )?bounds|out of range|idx", std::regex::icase);
  if (!ints.empty() && std::regex_search(message, bounds)) {
    std::string list;
    for (const auto& n : ints) list += (list.empty() ? "" : ", ") + n;
    text += " (hint: check the values given for integer input(s) " + list + ")";
  }
  return squeeze_spaces(text);
}

nlohmann::json shape_json(const IoInfo& info) {
  if (!info.has_shape) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : info.shape) {
    if (d.kind == Dim::kFixed) out.push_back(d.value);
    else if (d.kind == Dim::kSymbol) out.push_back(d.symbol);
    else out.push_back(nullptr);
  }
  return out;
}

bool has_int8_kernels(const std::string&) { return true; }  // standard ONNX ops every onnxruntime CPU build has

struct Context {
  Options options;
  Runtime* rt = nullptr;
  std::vector<std::string> providers;
  Environment env;
  bool many = false;
};

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// One run of a bundle (one variant): mgedump.commands.verify.verify, printing each test case as it ends.
void verify(Bundle& bundle, const std::optional<std::string>& variant, Context& ctx, BundleResult& result) {
  const Options& o = ctx.options;
  const Variant& chosen = bundle.choose_variant(variant);
  bundle.check_requirements(chosen, ctx.providers[0], has_int8_kernels);
  std::string label = bundle.path() + ":" + chosen.model.member;
  TmpDir tmp;
  std::string folder = tmp.path + "/model";
  if (::mkdir(folder.c_str(), 0700) != 0) throw usage_error("cannot make a temporary folder " + folder);
  std::snprintf(g_tmp_files[0], PATH_MAX, "%s/model.onnx", folder.c_str());
  if (!chosen.model.external_data.empty()) {
    std::string base = chosen.model.external_data.substr(chosen.model.external_data.rfind('/') + 1);
    std::snprintf(g_tmp_files[1], PATH_MAX, "%s/%s", folder.c_str(), base.c_str());
  }
  std::string model_path = bundle.extract_variant(chosen, folder);
  std::snprintf(g_tmp_files[0], PATH_MAX, "%s", model_path.c_str());
  SessionSettings settings{o.threads, o.graph_opt, o.provider, o.execution_mode};
  auto began = std::chrono::steady_clock::now();
  Session session(*ctx.rt, model_path, label, settings, ctx.providers);
  result.session_create_ms = ms_since(began);
  const auto& inputs = bundle.inputs();
  const auto& outputs = bundle.outputs();
  bool names_match = session.inputs().size() == inputs.size() && session.outputs().size() == outputs.size();
  for (std::size_t i = 0; names_match && i < inputs.size(); ++i) names_match = session.inputs()[i].name == inputs[i].name;
  for (std::size_t i = 0; names_match && i < outputs.size(); ++i)
    names_match = session.outputs()[i].name == outputs[i].name;
  if (!names_match) throw usage_error(label + ": the model's inputs/outputs do not match the manifest");
  const Assertion& assertion = bundle.assertion();
  // the test cases read first, as mgerun reads them before any runs
  struct Case {
    std::vector<Value> feeds;
    std::vector<Value> expected;
  };
  std::vector<Case> cases(bundle.test_cases().size());
  for (std::size_t c = 0; c < cases.size(); ++c) {
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      Value v = bundle.input(c, k);
      if (bundle.format_version() >= 2) v = cast_input(v, session.inputs()[k], inputs[k].name);
      cases[c].feeds.push_back(std::move(v));
    }
    if (assertion.enabled)
      for (std::size_t k = 0; k < outputs.size(); ++k) cases[c].expected.push_back(bundle.expected(c, k));
  }
  bundle.verified();
  result.assertion = assertion.enabled;
  result.maxerr = o.maxerr ? *o.maxerr : assertion.maxerr;
  result.verbose = o.silent ? !*o.silent : assertion.verbose;
  for (const auto& i : inputs) result.inputs.push_back({i.name, i.dtype, shape_json(i)});
  for (const auto& i : outputs) result.outputs.push_back({i.name, i.dtype, shape_json(i)});
  // each output's bound: the bundle's, all replaced by --maxerr X, then by --maxerr OUTPUT:X
  std::vector<double> bounds;
  for (const auto& [name, value] : o.output_maxerr) {
    bool found = false;
    for (const auto& out : outputs) found = found || out.name == name;
    if (!found) {
      std::string names;
      for (const auto& out : outputs) names += (names.empty() ? "" : ", ") + python_str_repr(out.name);
      throw usage_error("--maxerr " + name + ": names no output of the model (its outputs: " + names + ")");
    }
  }
  for (const auto& [name, value] : o.output_error_stat) {
    bool found = false;
    for (const auto& out : outputs) found = found || out.name == name;
    if (!found) {
      std::string names;
      for (const auto& out : outputs) names += (names.empty() ? "" : ", ") + python_str_repr(out.name);
      throw usage_error("--error-stat " + name + ": names no output of the model (its outputs: " + names + ")");
    }
  }
  // each output's statistic: the bundle's, all replaced by --error-stat STAT, then by --error-stat OUTPUT:STAT
  std::vector<std::string> stats;
  for (const auto& out : outputs) {
    std::string s = o.error_stat ? *o.error_stat : assertion.stat_of(out.name);
    for (const auto& [name, value] : o.output_error_stat)
      if (name == out.name) s = value;
    stats.push_back(s);
  }
  for (const auto& out : outputs) {
    double b = o.maxerr ? *o.maxerr : assertion.maxerr_of(out.name);
    for (const auto& [name, value] : o.output_maxerr)
      if (name == out.name) b = value;
    bounds.push_back(b);
  }
  std::vector<std::string> elsewhere =
      result.packed_environment.empty() ? std::vector<std::string>{} : result.environment_differences;
  std::vector<std::string> in_names;
  for (const auto& i : inputs) in_names.push_back(i.name);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const TestCase& tc = bundle.test_cases()[c];
    CaseResult cr;
    cr.index = static_cast<int>(c);
    cr.spec = tc.spec;
    cr.origin = tc.origin;
    cr.timing.batch = batch_of(cases[c].feeds);
    auto case_began = std::chrono::steady_clock::now();
    Feeds feeds(*ctx.rt);
    std::vector<const OrtValue*> fed;
    for (const auto& v : cases[c].feeds) fed.push_back(feeds.add(v));
    std::vector<OrtValue*> first;
    std::string failure = time_runs(session, fed, o.iters, o.warmup, cr.timing, first);
    std::vector<Value> got;
    if (failure.empty()) {
      try {
        for (std::size_t k = 0; k < first.size(); ++k) got.push_back(to_value(*ctx.rt, first[k], session.outputs()[k]));
      } catch (const Failure& f) {
        failure = f.what();
      }
    } else {
      failure = run_failure(failure, cases[c].feeds, in_names);
    }
    session.release(first);
    if (!failure.empty()) {
      cr.error = failure;
      cr.timing = Timing();
      cr.timing.batch = batch_of(cases[c].feeds);
    } else if (assertion.enabled) {
      for (std::size_t k = 0; k < outputs.size(); ++k) {
        if (bundle.format_version() >= 2) by_value(cases[c].expected[k], got[k]);
        cr.checks.push_back(check_value(outputs[k].name, cases[c].expected[k], got[k], bounds[k], stats[k]));
      }
    }
    cr.seconds = ms_since(case_began) / 1e3;
    say_lines(case_lines(cr, result.verbose, elsewhere));
    result.cases.push_back(std::move(cr));
  }
}

}  // namespace

int run_cli(int argc, char** argv) {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  bool done = false;
  Context ctx;
  std::vector<std::string> paths;
  try {
    ctx.options = parse(argc, argv, done);
    if (done) return 0;
    paths = expand(ctx.options.paths);
    g_lines_to_stderr = ctx.options.report_json == "-";
    if (!ctx.options.report_json.empty()) check_target(ctx.options.report_json, paths);
    ctx.rt = &Runtime::load(ctx.options.ort_lib);
    ctx.providers = resolve_providers(*ctx.rt, ctx.options.provider);
    ctx.env = run_environment(*ctx.rt);
  } catch (const Failure& f) {
    error_line(f.what());
    return f.exit_code;
  } catch (const Refusal& r) {
    error_line(r.one_line());
    return 2;
  }
  // the runs: each variant of a bundle of several, unless --variant names one
  struct Run {
    std::size_t bundle;
    std::optional<std::string> variant;
  };
  std::vector<std::unique_ptr<Bundle>> bundles(paths.size());
  std::vector<std::optional<std::string>> open_errors(paths.size());
  std::vector<Run> runs;
  for (std::size_t b = 0; b < paths.size(); ++b) {
    try {
      bundles[b] = Bundle::open(paths[b]);
    } catch (const Refusal& r) {
      open_errors[b] = r.one_line();
    } catch (const Failure& f) {
      open_errors[b] = f.what();
    }
    if (bundles[b] && !ctx.options.variant && bundles[b]->format_version() >= 2 && !bundles[b]->variants().empty()) {
      for (const auto& v : bundles[b]->variants()) runs.push_back({b, v.name});
    } else {
      runs.push_back({b, ctx.options.variant});
    }
  }
  ctx.many = runs.size() > 1;
  std::vector<BundleResult> results;
  int worst = 0;
  for (const auto& run : runs) {
    const std::string& path = paths[run.bundle];
    BundleResult result;
    result.path = path;
    result.variant = run.variant;
    result.name = bundle_name(path) + (run.variant ? "[" + *run.variant + "]" : "");
    result.started = utc_timestamp();
    result.providers = ctx.providers;
    result.threads = ctx.options.threads;
    result.graph_opt = ctx.options.graph_opt.empty() ? "all" : ctx.options.graph_opt;
    result.execution_mode = ctx.options.execution_mode;
    result.iters = ctx.options.iters;
    result.warmup = ctx.options.warmup;
    if (ctx.many) say("== " + path + (run.variant ? " [" + *run.variant + "]" : ""));
    auto began = std::chrono::steady_clock::now();
    try {
      if (open_errors[run.bundle]) throw Failure(2, *open_errors[run.bundle]);
      Bundle& bundle = *bundles[run.bundle];
      if (bundle.has_environment()) result.packed_environment = bundle.environment_json();
      result.environment_differences = environment_differences(result.packed_environment, ctx.env);
      verify(bundle, run.variant, ctx, result);
      result.exit_code = result.failed().empty() ? 0 : 1;
    } catch (const Refusal& r) {
      result.error = r.one_line();
      result.exit_code = 2;
    } catch (const Failure& f) {
      result.error = f.what();
      result.exit_code = f.exit_code;
    } catch (const std::bad_alloc&) {
      result.error = "not enough memory";
      result.exit_code = 2;
    }
    remove_tmp();
    result.seconds = ms_since(began) / 1e3;
    result.peak_rss_mib = peak_rss_mib();
    worst = std::max(worst, result.exit_code);
    if (result.error) {
      if (!ctx.many) {
        error_line(*result.error);
        return result.exit_code;
      }
      error_line(*result.error);
      std::string message = *result.error;
      if (message.rfind(path + ": ", 0) == 0) message = message.substr(path.size() + 2);
      say(path + ": ERROR (exit " + std::to_string(result.exit_code) + "): " + message);
    } else {
      std::vector<std::string> lines = timing_lines(result);
      std::string cold = cold_line(result, !ctx.many);
      if (!cold.empty()) lines.push_back(cold);
      if (!ctx.many) lines.push_back("ran with " + environment_summary(ctx.env));
      for (auto& l : environment_lines(result)) lines.push_back(l);
      std::string last = result.verdict_line(ctx.many ? path + ": " : "", !(result.verbose || ctx.many));
      if (!last.empty()) lines.push_back(last);
      say_lines(lines);
    }
    results.push_back(std::move(result));
  }
  double peak = peak_rss_mib();
  if (ctx.many) {
    int passed = 0, failed = 0, errors = 0;
    for (const auto& r : results) {
      if (r.error) ++errors;
      else if (r.exit_code == 0) ++passed;
      else ++failed;
    }
    std::size_t distinct = paths.size();
    std::string what = runs.size() == distinct ? std::to_string(distinct) + " bundle(s)"
                                               : std::to_string(runs.size()) + " runs of " +
                                                     std::to_string(distinct) + " bundle(s)";
    say("ran with " + environment_summary(ctx.env));
    say(what + ": " + std::to_string(passed) + " passed, " + std::to_string(failed) + " failed, " +
        std::to_string(errors) + " could not run; peak memory " + fixed(peak, 0) + " MiB; exit " +
        std::to_string(worst));
  }
  std::fflush(stdout);
  if (!ctx.options.report_json.empty()) {
    try {
      std::string text = report_document(results, worst, peak, ctx.env).dump(1) + "\n";
      write_text_atomic(ctx.options.report_json, text);
    } catch (const Failure& f) {
      error_line(f.what());
      return 2;
    }
  }
  return worst;
}

}  // namespace mgerun
