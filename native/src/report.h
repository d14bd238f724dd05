// What one call of mgerun-native found, as records (one per run of a bundle), and the JSON report mgerun writes
// of them (docs/reports.md, docs/schemas/report.schema.json), so that `mgerun --merge` takes it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "assertion.h"
#include "timing.h"

namespace mgerun {

struct CaseResult {
  int index = 0;
  std::string spec, origin;
  std::optional<std::string> error;
  std::vector<OutputCheck> checks;
  Timing timing;
  double seconds = 0;
  bool passed() const {
    if (error) return false;
    for (const auto& c : checks)
      if (!c.passed) return false;
    return true;
  }
};

struct TensorRecord {
  std::string name, dtype;
  nlohmann::json shape;  // a list of int / str / null, or null
};

struct BundleResult {
  std::string path;
  std::string name;  // what the reports call it (its file name without .mgetest, [variant] added)
  std::optional<std::string> variant;
  int exit_code = 0;
  std::optional<std::string> error;  // could not run (its one line)
  double seconds = 0;
  std::string started;
  double peak_rss_mib = 0;
  // when it ran
  bool assertion = true;
  double maxerr = 0;
  bool verbose = true;
  std::vector<std::string> providers;
  int threads = 0;  // 0: default
  std::string graph_opt = "all";
  std::string execution_mode;
  int iters = 10, warmup = 1;
  std::optional<double> session_create_ms;
  std::vector<TensorRecord> inputs, outputs;
  std::vector<CaseResult> cases;
  std::string packed_environment;  // JSON text; "" when none
  std::vector<std::string> environment_differences;

  std::optional<double> first_run_ms() const;
  std::vector<CaseResult*> failed();
  // "FAILED: 1 of 4 test case(s) failed", "all 4 test case(s) passed", or "" for a quiet pass
  std::string verdict_line(const std::string& prefix, bool quiet_pass) const;
  // the output bounds that differ from the bundle's
};

// The report document (report version 2).
nlohmann::json report_document(const std::vector<BundleResult>& runs, int exit_code, double peak_rss_mib,
                               const Environment& env);

// Refuse a report target that cannot be written, before any work (mgedump.base.fileio.check_target): a
// folder, a FIFO, a device or a socket, one of the inputs (a bundle), a missing or read-only folder.
// Throws Failure(2).
void check_target(const std::string& path, const std::vector<std::string>& inputs);

// Write text to `path` ("-": standard output) through a temporary file beside it, renamed into place.
// Throws Failure(2) when it cannot.
void write_text_atomic(const std::string& path, const std::string& text);

}  // namespace mgerun
