// MegEngine's AssertEqual, as docs/assertion.md defines it: one output's expected value against the value this
// run computed, its error, the worst element, the statistics, and the lines mgerun prints of a failure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "value.h"

namespace mgerun {

// One element as the reports hold it: a number, a bool, text, or nothing.
struct Element {
  enum Kind { kNone, kInt, kUint, kFloat, kBool, kText } kind = kNone;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::string text;  // as a person reads it (mgerun's value_text: numpy's str of the scalar, text quoted)
};

// Per-output numbers for the reports (docs/assertion.md, "Statistics"); `present` false: none.
struct Stats {
  bool present = false;
  std::vector<int64_t> shape;
  std::string dtype;
  bool finite = false;  // the six min/max/mean figures are null when not
  double expect_min = 0, expect_max = 0, expect_mean = 0, get_min = 0, get_max = 0, get_mean = 0;
  bool has_abs = false;
  double abs_err_max = 0, abs_err_mean = 0;
};

struct OutputCheck {
  std::string name;
  bool passed = false;
  std::optional<double> err;  // none: could not be computed (or not finite)
  double maxerr = 0;
  std::optional<std::string> reason;
  std::optional<std::vector<int64_t>> worst_index;
  Element expect, got;
  Stats stats;
  std::string stat = "max";
  std::optional<std::string> worst_path;
  std::optional<double> largest;  // the largest element error, whatever the statistic (none: not finite)

  // How a failed output is printed (and put in the reports).
  std::vector<std::string> failure_lines() const;
};

// `AssertEqual: err=X`, as every check's line begins; under another statistic than max, the statistic and the
// largest element error beside it (`AssertEqual median: err=0 (max 10)`; mgedump.base.bounds.err_text).
std::string err_text(const std::optional<double>& err, const std::string& stat, const std::optional<double>& largest);

// Check one output of any type (a tensor, a sequence, a map, an optional) against its expected value, the
// bound applying to `stat` (max, p99, mean, median) of the element errors.
OutputCheck check_value(const std::string& name, const Value& expect, const Value& got, double maxerr,
                        const std::string& stat);

// A variant's float output held to the reference's float dtype by value (mgerun's by_value): a float16
// tensor as float32 when the expected one is float32, and the like. Other values are left as they are.
void by_value(const Value& want, Value& have);

// float16 bits to a float, and a double rounded to the nearest float16 (ties to even), as numpy casts.
float half_to_float(uint16_t h);
uint16_t double_to_half(double d);

// Python's f"{x:g}" (printf's %g).
std::string format_g(double x);
// Python's repr of a float (the shortest text that reads back, "1e-05", "0.1", "inf").
std::string python_float_repr(double x);
// Python's repr of text ('cat', "it's").
std::string python_str_repr(const std::string& s);

// numpy's statistics used here and by the latency table, in float64 as numpy computes them.
double numpy_sum(const double* a, std::size_t n);
double numpy_percentile(std::vector<double> a, double q);  // q in percent, linear method
double numpy_median(std::vector<double> a);

}  // namespace mgerun
