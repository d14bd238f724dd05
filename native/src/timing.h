// Timing runs as mgerun times them (mgedump.measure.timing): warm-up runs, each timed and kept apart, then
// the timed runs, the loop doing nothing but call Run between two clock reads; their statistics; the process's
// peak memory; and where it ran (mgedump.model.environment).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ort.h"

namespace mgerun {

struct LatencyStats {
  std::size_t count = 0;
  double min = 0, median = 0, mean = 0, p90 = 0, p99 = 0, max = 0, stddev = 0;
};
LatencyStats latency_stats(const std::vector<double>& samples);

struct Timing {
  int64_t batch = 1;
  std::vector<double> latencies_ms;
  std::vector<double> warmup_ms;
  std::optional<double> wall_s;
  LatencyStats stats() const { return latency_stats(latencies_ms); }
  std::optional<double> inferences_per_s() const;
  std::optional<double> samples_per_s() const;
  std::optional<double> first_run_ms() const;
};

// Run `warmup` runs then `iters` timed runs; `first` receives the outputs of the first run (the caller
// releases them). Returns "" or onnxruntime's message of a failed run.
std::string time_runs(const Session& session, const std::vector<const OrtValue*>& feeds, int iters, int warmup,
                      Timing& timing, std::vector<OrtValue*>& first);

// The process's peak resident memory (MiB), as mgerun reads it (getrusage).
double peak_rss_mib();

// Where it runs (mgedump.model.environment.run_environment), as JSON text pieces the report writes.
struct Environment {
  std::string onnxruntime;
  std::string library;
  std::vector<std::string> providers;
  std::string os_system, os_release;
  std::optional<std::string> cpu_model;
  std::string arch;
  std::optional<std::vector<std::string>> flags;
  std::optional<std::string> flags_from;
  int logical_cpus = 1;
  std::string host;
  std::string timestamp;
};
Environment run_environment(const Runtime& rt);
// "onnxruntime 1.32.0 on AMD EPYC (x86_64, AVX-512 VNNI), Linux 6.8.0"
std::string environment_summary(const Environment& env);
// What differs between where the bundle was packed (the manifest's environment, JSON text; "" when it has none)
// and where it runs that can change results, one sentence each.
std::vector<std::string> environment_differences(const std::string& packed_json, const Environment& ran);

// ISO 8601 in UTC, to the second.
std::string utc_timestamp();

}  // namespace mgerun
