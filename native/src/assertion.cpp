// AssertEqual (assertion.h): docs/assertion.md step by step, computed as mgerun computes it (in float32 when
// neither side is wider than 4 bytes and neither is an integer tensor, else in float64) so that both
// verifiers give the same err.
#include "assertion.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>

namespace mgerun {

// ---- numbers as Python and numpy print them ------------------------------------------------------------

std::string format_g(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

namespace {

// Shortest digits and decimal exponent of a value, laid out as Python's repr lays out a float: positional
// for 1e-4 <= |x| < 1e16, else scientific with a two-digit exponent at least.
std::string layout(const std::string& sci) {
  // sci: "-1.2345e-05" as to_chars writes it in scientific format
  std::string s = sci;
  bool neg = !s.empty() && s[0] == '-';
  if (neg) s = s.substr(1);
  auto e = s.find('e');
  std::string mant = s.substr(0, e);
  int exp = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return neg ? "-" + out : out;
}

std::string nonfinite(double x) {
  if (std::isnan(x)) return "nan";
  return x > 0 ? "inf" : "-inf";
}

}  // namespace

float half_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

// A double rounded to the nearest float16 (ties to even), as numpy casts.
uint16_t double_to_half(double d) {
  uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  double a = std::fabs(d);
  if (std::isnan(d)) return sign | 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;  // rounds to infinity
  if (a < std::ldexp(1.0, -25)) {
    if (a == std::ldexp(1.0, -25)) return sign;  // tie to even: zero
    return sign;
  }
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;    // a = 1.f * 2^exp
  if (exp < -14) exp = -14;  // subnormal: fixed quantum 2^-24
  double q = std::ldexp(1.0, exp - 10);
  double n = a / q;  // exact: a power-of-two scaling
  double r = std::nearbyint(n);  // ties to even under the default rounding mode
  uint32_t m = static_cast<uint32_t>(r);
  // m counts quanta of 2^(exp-10): normal values have m in [1024, 2048]
  uint32_t bits;
  if (exp == -14 && m < 1024) {
    bits = m;  // subnormal (or became the smallest normal at 1024)
  } else {
    if (m >= 2048) {
      m >>= 1;
      exp += 1;
    }
    if (exp > 15) return sign | 0x7c00;
    bits = (static_cast<uint32_t>(exp + 15) << 10) | (m & 0x3ff);
  }
  return static_cast<uint16_t>(sign | bits);
}

namespace {

std::string float32_str(float x) {
  if (!std::isfinite(x)) return nonfinite(x);
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  return layout(std::string(buf, r.ptr));
}

std::string half_str(uint16_t h) {
  float x = half_to_float(h);
  if (!std::isfinite(x)) return nonfinite(x);
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  for (int p = 0; p < 6; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p, static_cast<double>(x));
    if (double_to_half(std::strtod(buf, nullptr)) == h) return layout(buf);
  }
  std::snprintf(buf, sizeof buf, "%.5e", static_cast<double>(x));
  return layout(buf);
}

}  // namespace

std::string python_float_repr(double x) {
  if (!std::isfinite(x)) return nonfinite(x);
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  return layout(std::string(buf, r.ptr));
}

std::string python_str_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

// ---- numpy's reductions --------------------------------------------------------------------------------

namespace {

double pairwise(const double* a, std::size_t n) {
  if (n < 8) {
    double res = 0.;
    for (std::size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i;
    for (i = 8; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

// numpy's linear interpolation (_lerp) in the array's type T, with t a Python float.
template <typename T>
T lerp(T a, T b, double t) {
  T diff = b - a;
  if (t >= 0.5) {
    volatile T w = static_cast<T>(1 - t);
    volatile T prod = diff * w;
    return b - prod;
  }
  volatile T w = static_cast<T>(t);
  volatile T prod = diff * w;
  return a + prod;
}

template <typename T>
T percentile_of(std::vector<T>& a, double q) {
  std::size_t n = a.size();
  double quantile = q / 100.0;
  double virt = static_cast<double>(n - 1) * quantile;
  double prev_f = std::floor(virt);
  std::ptrdiff_t prev, next;
  if (virt >= static_cast<double>(n - 1)) {
    prev = next = static_cast<std::ptrdiff_t>(n - 1);
  } else if (virt < 0) {
    prev = next = 0;
  } else {
    prev = static_cast<std::ptrdiff_t>(prev_f);
    next = prev + 1;
  }
  double gamma = virt - (virt >= static_cast<double>(n - 1) ? -1.0 : prev_f);
  std::sort(a.begin(), a.end(), [](T x, T y) { return x < y || (std::isnan(y) && !std::isnan(x)); });
  return lerp<T>(a[static_cast<std::size_t>(prev)], a[static_cast<std::size_t>(next)], gamma);
}

template <typename T>
T median_of(std::vector<T>& a) {
  std::size_t n = a.size();
  std::sort(a.begin(), a.end(), [](T x, T y) { return x < y || (std::isnan(y) && !std::isnan(x)); });
  if (n % 2) return a[n / 2];
  volatile T sum = static_cast<T>(static_cast<T>(0) + a[n / 2 - 1]) + a[n / 2];
  return static_cast<T>(sum / static_cast<T>(2));
}

}  // namespace

double numpy_sum(const double* a, std::size_t n) { return 0.0 + pairwise(a, n); }

double numpy_percentile(std::vector<double> a, double q) { return percentile_of<double>(a, q); }

double numpy_median(std::vector<double> a) { return median_of<double>(a); }

// ---- elements ------------------------------------------------------------------------------------------

namespace {

bool is_float(int32_t t) { return t == kFloat || t == kDouble || t == kFloat16 || t == kBfloat16; }
bool is_text(int32_t t) { return t == kString; }
bool is_int(int32_t t) {
  return t == kInt8 || t == kInt16 || t == kInt32 || t == kInt64 || t == kUint8 || t == kUint16 || t == kUint32 ||
         t == kUint64;
}
bool is_unsigned(int32_t t) { return t == kUint8 || t == kUint16 || t == kUint32 || t == kUint64; }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

double as_double(const Tensor& t, std::size_t i) {
  const uint8_t* p = t.data.data() + i * elem_size(t.elem_type);
  switch (t.elem_type) {
    case kFloat: return load<float>(p);
    case kDouble: return load<double>(p);
    case kFloat16: return half_to_float(load<uint16_t>(p));
    case kBfloat16: {
      uint32_t bits = static_cast<uint32_t>(load<uint16_t>(p)) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case kBool: return *p ? 1.0 : 0.0;
    case kInt8: return load<int8_t>(p);
    case kUint8: return load<uint8_t>(p);
    case kInt16: return load<int16_t>(p);
    case kUint16: return load<uint16_t>(p);
    case kInt32: return load<int32_t>(p);
    case kUint32: return load<uint32_t>(p);
    case kInt64: return static_cast<double>(load<int64_t>(p));
    case kUint64: return static_cast<double>(load<uint64_t>(p));
    default: return 0;
  }
}

Element element_at(const Tensor& t, std::size_t i) {
  Element e;
  if (t.elem_type == kString) {
    e.kind = Element::kText;
    e.s = i < t.strings.size() ? t.strings[i] : "";
    e.text = python_str_repr(e.s);
    return e;
  }
  std::size_t w = elem_size(t.elem_type);
  if (!w || (i + 1) * w > t.data.size()) return e;
  const uint8_t* p = t.data.data() + i * w;
  switch (t.elem_type) {
    case kBool:
      e.kind = Element::kBool;
      e.b = *p != 0;
      e.text = e.b ? "True" : "False";
      return e;
    case kFloat: {
      float f = load<float>(p);
      e.kind = Element::kFloat;
      e.f = f;
      e.text = float32_str(f);
      return e;
    }
    case kFloat16: {
      uint16_t h = load<uint16_t>(p);
      e.kind = Element::kFloat;
      e.f = half_to_float(h);
      e.text = half_str(h);
      return e;
    }
    case kDouble:
      e.kind = Element::kFloat;
      e.f = load<double>(p);
      e.text = python_float_repr(e.f);
      return e;
    case kUint64:
      e.kind = Element::kUint;
      e.u = load<uint64_t>(p);
      e.text = std::to_string(e.u);
      return e;
    default:
      if (is_unsigned(t.elem_type)) {
        e.kind = Element::kUint;
        e.u = static_cast<uint64_t>(as_double(t, i));
        e.text = std::to_string(e.u);
      } else {
        e.kind = Element::kInt;
        e.i = t.elem_type == kInt64 ? load<int64_t>(p) : static_cast<int64_t>(as_double(t, i));
        e.text = std::to_string(e.i);
      }
      return e;
  }
}

std::vector<int64_t> unravel(std::size_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (std::size_t k = shape.size(); k-- > 0;) {
    int64_t d = shape[k] > 0 ? shape[k] : 1;
    index[k] = static_cast<int64_t>(flat % static_cast<std::size_t>(d));
    flat /= static_cast<std::size_t>(d);
  }
  return index;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// What mgerun's measure() returns.
struct Measure {
  double err = 0;
  bool exact = false;
  std::optional<std::string> reason;
  std::optional<std::vector<int64_t>> index;
  Element expect, got;
  std::optional<std::string> path;
  std::optional<double> largest;  // the largest element error, when err is another statistic of them
  bool passes(double maxerr) const { return exact ? err == 0.0 : err <= maxerr; }
};

std::string dtype_text(const Tensor& t) { return t.elem_type == kString ? "object" : elem_type_name(t.elem_type); }

// The statistic of the element errors (mgedump.measure.assertion.summarize), in the arithmetic's type T.
template <typename T>
double summarize(const std::vector<T>& each, const std::string& stat) {
  if (stat == "p99") {
    std::vector<T> copy(each);
    return static_cast<double>(percentile_of<T>(copy, 99));
  }
  if (stat == "median") {
    std::vector<T> copy(each);
    return static_cast<double>(median_of<T>(copy));
  }
  if (stat == "mean") {  // mean(dtype=float64): float64 sums of buffered chunks of 8192
    double total = 0;
    std::vector<double> chunk;
    for (std::size_t start = 0; start < each.size(); start += 8192) {
      std::size_t end = std::min(each.size(), start + 8192);
      chunk.assign(each.begin() + static_cast<std::ptrdiff_t>(start), each.begin() + static_cast<std::ptrdiff_t>(end));
      total += pairwise(chunk.data(), chunk.size());
    }
    return total / static_cast<double>(each.size());
  }
  T best = each[0];
  for (T v : each)
    if (v > best) best = v;
  return static_cast<double>(best);
}

template <typename T>
Measure metric(const Tensor& e, const Tensor& g, bool exact, const std::string& stat, std::size_t n) {
  std::vector<T> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<T>(as_double(e, i));
    y[i] = static_cast<T>(as_double(g, i));
  }
  Measure m;
  m.exact = exact;
  bool all_finite = true;
  for (std::size_t i = 0; i < n && all_finite; ++i) all_finite = std::isfinite(x[i]) && std::isfinite(y[i]);
  std::vector<T> each(n);
  if (!all_finite) {
    std::size_t broken = 0, first = n;
    for (std::size_t i = 0; i < n; ++i) {
      bool fx = std::isfinite(x[i]), fy = std::isfinite(y[i]);
      bool same = !fx && !fy && ((std::isnan(x[i]) && std::isnan(y[i])) || x[i] == y[i]);
      if (!(fx && fy) && !same) {
        if (first == n) first = i;
        ++broken;
      }
    }
    if (broken) {
      m.err = std::numeric_limits<double>::infinity();
      const char* side = std::isfinite(x[first]) ? "get" : "expect";
      m.reason = std::string("NaN or infinity in ") + side + " only (" + std::to_string(broken) + " elements)";
      m.index = unravel(first, e.shape);
      m.expect = element_at(e, first);
      m.got = element_at(g, first);
      return m;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      each[i] = 0;
      continue;
    }
    volatile T ax = std::fabs(x[i]);
    volatile T ay = std::fabs(y[i]);
    T den = std::max(std::min(static_cast<T>(ax), static_cast<T>(ay)), static_cast<T>(1));
    volatile T diff = x[i] - y[i];
    each[i] = std::fabs(static_cast<T>(diff)) / den;
  }
  std::size_t flat = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (each[i] > each[flat] || (std::isnan(each[i]) && !std::isnan(each[flat]))) flat = i;
  m.largest = static_cast<double>(each[flat]);
  m.err = (stat == "max" || exact) ? *m.largest : summarize<T>(each, stat);
  m.index = unravel(flat, e.shape);
  m.expect = element_at(e, flat);
  m.got = element_at(g, flat);
  return m;
}

bool raw_equal(const Tensor& a, const Tensor& b, std::size_t i) {
  std::size_t w = elem_size(a.elem_type);
  return std::memcmp(a.data.data() + i * w, b.data.data() + i * w, w) == 0;
}

// mgedump.measure.assertion.measure of two tensors.
Measure measure(const Tensor& e, const Tensor& g, const std::string& stat) {
  Measure m;
  if (e.shape != g.shape) {
    m.err = std::numeric_limits<double>::infinity();
    m.reason = "shape differs: expect " + list_text(e.shape) + ", get " + list_text(g.shape);
    return m;
  }
  bool te = is_text(e.elem_type), tg = is_text(g.elem_type);
  if (te != tg) {
    m.err = std::numeric_limits<double>::infinity();
    m.reason = "dtype differs: expect " + dtype_text(e) + ", get " + dtype_text(g);
    return m;
  }
  std::size_t n = e.element_count();
  if (n == 0) {
    m.exact = !is_float(e.elem_type);
    return m;
  }
  if (te) {
    std::size_t count = 0, first = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (e.strings[i] != g.strings[i]) {
        if (first == n) first = i;
        ++count;
      }
    }
    m.exact = true;
    if (!count) return m;
    m.err = std::numeric_limits<double>::infinity();
    m.reason = std::to_string(count) + " of " + std::to_string(n) + " elements differ (exact comparison)";
    m.index = unravel(first, e.shape);
    m.expect = element_at(e, first);
    m.got = element_at(g, first);
    return m;
  }
  bool exact = !is_float(e.elem_type) && !is_float(g.elem_type);
  if (e.elem_type == g.elem_type) {
    bool equal = true;
    for (std::size_t i = 0; i < n && equal; ++i) {
      equal = is_float(e.elem_type) ? as_double(e, i) == as_double(g, i) : raw_equal(e, g, i);
    }
    if (equal) {
      m.exact = exact;
      return m;
    }
  }
  if (exact && e.elem_type == kBool) {
    std::size_t count = 0, first = n;
    for (std::size_t i = 0; i < n; ++i) {
      if ((as_double(e, i) != 0) != (as_double(g, i) != 0)) {
        if (first == n) first = i;
        ++count;
      }
    }
    if (first == n) first = 0;
    m.err = 1.0;
    m.exact = true;
    m.reason = std::to_string(count) + " of " + std::to_string(n) + " elements differ (exact comparison)";
    m.index = unravel(first, e.shape);
    m.expect = element_at(e, first);
    m.got = element_at(g, first);
    return m;
  }
  bool wide = std::max(elem_size(e.elem_type), elem_size(g.elem_type)) > 4 || exact;
  Measure r = wide ? metric<double>(e, g, exact, stat, n) : metric<float>(e, g, exact, stat, n);
  if (exact && r.err != 0 && !r.reason) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < n; ++i) {
      bool same = e.elem_type == g.elem_type ? raw_equal(e, g, i) : as_double(e, i) == as_double(g, i);
      count += same ? 0 : 1;
    }
    r.reason = std::to_string(count) + " of " + std::to_string(n) + " elements differ (exact comparison)";
  }
  return r;
}

Stats stats_of(const Tensor& e, const Tensor& g) {
  Stats s;
  auto numeric = [](int32_t t) { return t == kBool || is_int(t) || t == kFloat || t == kDouble || t == kFloat16; };
  std::size_t ne = e.element_count(), ng = g.element_count();
  if (!numeric(e.elem_type) || !numeric(g.elem_type) || !ne || !ng) return s;
  s.present = true;
  s.shape = e.shape;
  s.dtype = dtype_text(e);
  std::vector<double> x(ne), y(ng);
  bool finite = true;
  for (std::size_t i = 0; i < ne; ++i) {
    x[i] = as_double(e, i);
    finite = finite && std::isfinite(x[i]);
  }
  for (std::size_t i = 0; i < ng; ++i) {
    y[i] = as_double(g, i);
    finite = finite && std::isfinite(y[i]);
  }
  s.finite = finite;
  if (!finite) return s;
  s.expect_min = *std::min_element(x.begin(), x.end());
  s.expect_max = *std::max_element(x.begin(), x.end());
  s.expect_mean = numpy_sum(x.data(), ne) / static_cast<double>(ne);
  s.get_min = *std::min_element(y.begin(), y.end());
  s.get_max = *std::max_element(y.begin(), y.end());
  s.get_mean = numpy_sum(y.data(), ng) / static_cast<double>(ng);
  if (e.shape == g.shape) {
    std::vector<double> d(ne);
    for (std::size_t i = 0; i < ne; ++i) d[i] = std::fabs(x[i] - y[i]);
    s.has_abs = true;
    s.abs_err_max = *std::max_element(d.begin(), d.end());
    s.abs_err_mean = numpy_sum(d.data(), ne) / static_cast<double>(ne);
  }
  return s;
}

// ---- sequences, maps and optionals (mgedump.measure.structured) ---------------------------------------

struct Key {
  bool text = false;
  int64_t i = 0;
  std::string s;
  std::string repr() const { return text ? python_str_repr(s) : std::to_string(i); }
  bool operator==(const Key& o) const { return text == o.text && i == o.i && s == o.s; }
};

std::string path_text(const std::vector<Key>& path) {
  std::string out;
  for (const auto& k : path) out += "[" + k.repr() + "]";
  return out;
}

Measure broken(const std::vector<Key>& path, const std::string& reason) {
  Measure m;
  m.err = std::numeric_limits<double>::infinity();
  std::string where = path_text(path);
  m.reason = reason + " at " + (where.empty() ? "the top" : where);
  m.path = where;
  return m;
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case ValueKind::kTensor: return "ndarray";
    case ValueKind::kSequence: return "list";
    case ValueKind::kMap: return "dict";
    case ValueKind::kOptional: return "NoneType";
  }
  return "?";
}

// An optional with a value stands for its value (mgedump holds it as the value itself).
const Value* unwrap(const Value& v) {
  const Value* p = &v;
  while (p->kind == ValueKind::kOptional && !p->elements.empty()) p = &p->elements[0];
  return p;
}
bool is_none(const Value* v) { return v->kind == ValueKind::kOptional && v->elements.empty(); }

std::vector<Key> keys_of(const Value& v) {
  std::vector<Key> keys;
  for (std::size_t i = 0; i < v.elements.size(); ++i) {
    Key k;
    if (v.key_type == kString) {
      k.text = true;
      k.s = i < v.string_keys.size() ? v.string_keys[i] : "";
    } else {
      k.i = i < v.int_keys.size() ? v.int_keys[i] : 0;
      if (v.key_type == kUint64 && k.i < 0) k.i = k.i;  // a uint64 key above 2^63: shown as its bits
    }
    keys.push_back(k);
  }
  return keys;
}

Measure walk(const Value& ev, const Value& gv, std::vector<Key>& path, int depth);

Measure worst_of(std::vector<Measure>& parts, const std::vector<Key>& path) {
  if (parts.empty()) {
    Measure m;
    m.exact = true;
    m.path = path_text(path);
    return m;
  }
  std::size_t w = 0;
  for (std::size_t i = 1; i < parts.size(); ++i)
    if (parts[i].err > parts[w].err) w = i;
  Measure worst = parts[w];
  bool all_exact = true;
  std::size_t nonzero = 0;
  for (const auto& p : parts) {
    all_exact = all_exact && p.exact;
    nonzero += p.err != 0 ? 1 : 0;
  }
  worst.exact = all_exact;
  if (worst.exact && worst.err != 0 && !worst.reason) {
    worst.reason =
        std::to_string(nonzero) + " of " + std::to_string(parts.size()) + " elements differ (exact comparison)";
  }
  return worst;
}

Measure walk(const Value& e0, const Value& g0, std::vector<Key>& path, int depth) {
  const Value* e = unwrap(e0);
  const Value* g = unwrap(g0);
  if (depth > 64) return broken(path, "nested too deep");
  if (is_none(e) || is_none(g)) {
    if (is_none(e) && is_none(g)) {
      Measure m;
      m.exact = true;
      m.path = path_text(path);
      return m;
    }
    return broken(path, std::string("the optional is empty in ") + (is_none(e) ? "expect" : "get") + " only");
  }
  bool et = e->kind == ValueKind::kTensor, gt = g->kind == ValueKind::kTensor;
  if (et || gt) {
    if (!(et && gt)) return broken(path, std::string("expect holds ") + type_name(*e) + ", get " + type_name(*g));
    Measure m = measure(e->tensor, g->tensor, "max");
    std::string inner = m.index && !m.index->empty() ? list_text(*m.index) : "";
    m.path = path_text(path) + inner;
    m.index.reset();
    return m;
  }
  if (e->kind == ValueKind::kSequence && g->kind == ValueKind::kSequence) {
    if (e->elements.size() != g->elements.size()) {
      return broken(path, "sequence length differs: expect " + std::to_string(e->elements.size()) + ", get " +
                              std::to_string(g->elements.size()));
    }
    std::vector<Measure> parts;
    for (std::size_t k = 0; k < e->elements.size(); ++k) {
      Key key;
      key.i = static_cast<int64_t>(k);
      path.push_back(key);
      parts.push_back(walk(e->elements[k], g->elements[k], path, depth + 1));
      path.pop_back();
    }
    return worst_of(parts, path);
  }
  if (e->kind == ValueKind::kMap && g->kind == ValueKind::kMap) {
    std::vector<Key> ek = keys_of(*e), gk = keys_of(*g);
    auto by_repr = [](const Key& a, const Key& b) { return a.repr() < b.repr(); };
    std::map<std::string, std::size_t> eidx, gidx;  // by repr: keys of one type
    for (std::size_t i = 0; i < ek.size(); ++i) eidx.emplace(ek[i].repr(), i);
    for (std::size_t i = 0; i < gk.size(); ++i) gidx.emplace(gk[i].repr(), i);
    std::set<std::string> es, gs;
    for (auto& [k, i] : eidx) es.insert(k);
    for (auto& [k, i] : gidx) gs.insert(k);
    if (es != gs) {
      std::vector<Key> only;
      for (auto& k : ek)
        if (!gs.count(k.repr())) only.push_back(k);
      for (auto& k : gk)
        if (!es.count(k.repr())) only.push_back(k);
      std::sort(only.begin(), only.end(), by_repr);
      only.erase(std::unique(only.begin(), only.end()), only.end());
      if (only.size() > 3) only.resize(3);
      std::string list = "[";
      for (std::size_t i = 0; i < only.size(); ++i) list += (i ? ", " : "") + only[i].repr();
      list += "]";
      return broken(path, "map keys differ: expect " + std::to_string(eidx.size()) + " keys, get " +
                              std::to_string(gidx.size()) + "; not in both: " + list);
    }
    std::vector<Measure> parts;
    for (auto& [repr, i] : eidx) {  // std::map orders by repr, as sorted(..., key=repr)
      path.push_back(ek[i]);
      parts.push_back(walk(e->elements[i], g->elements[gidx[repr]], path, depth + 1));
      path.pop_back();
    }
    return worst_of(parts, path);
  }
  return broken(path, std::string("expect holds ") + type_name(*e) + ", get " + type_name(*g));
}

}  // namespace

OutputCheck check_value(const std::string& name, const Value& expect0, const Value& got0, double maxerr,
                        const std::string& stat) {
  OutputCheck c;
  c.name = name;
  c.maxerr = maxerr;
  c.stat = stat;
  const Value* expect = unwrap(expect0);
  const Value* got = unwrap(got0);
  if (expect->kind == ValueKind::kTensor && got->kind == ValueKind::kTensor) {
    const Tensor& e = expect->tensor;
    const Tensor& g = got->tensor;
    c.stats = stats_of(e, g);
    if (e.elem_type != g.elem_type && !(is_text(e.elem_type) && is_text(g.elem_type))) {
      c.passed = false;
      c.reason = "dtype differs: expect " + dtype_text(e) + ", get " + dtype_text(g);
      return c;
    }
    Measure m = measure(e, g, stat);
    if (!std::isfinite(m.err) && !m.reason) m.reason = "the difference of finite values overflows (inf)";
    c.passed = m.passes(maxerr);
    if (std::isfinite(m.err)) c.err = m.err;
    double largest = m.largest ? *m.largest : m.err;  // none apart: equal, exact, or no element
    if (std::isfinite(largest)) c.largest = largest;
    c.reason = m.reason;
    c.worst_index = m.index;
    c.expect = m.expect;
    c.got = m.got;
    return c;
  }
  std::vector<Key> path;
  Measure m = walk(*expect, *got, path, 0);
  c.stat = "max";  // a sequence's, map's or optional's bound is of its largest error
  c.passed = m.passes(maxerr);
  if (std::isfinite(m.err)) c.err = m.err;
  c.reason = m.reason;
  c.expect = m.expect;
  c.got = m.got;
  c.worst_path = m.path;
  return c;
}

std::string err_text(const std::optional<double>& err, const std::string& stat, const std::optional<double>& largest) {
  std::string text = "AssertEqual" + (stat == "max" ? std::string() : " " + stat) +
                     ": err=" + (err ? format_g(*err) : std::string("n/a"));
  return stat == "max" || !largest ? text : text + " (max " + format_g(*largest) + ")";
}

std::vector<std::string> OutputCheck::failure_lines() const {
  std::vector<std::string> lines;
  std::string head = err_text(err, stat, largest) + " (name=" + name + ") FAILED (maxerr=" + format_g(maxerr) + ")";
  if (reason && !reason->empty()) head += ": " + *reason;
  lines.push_back(head);
  bool located = worst_index || worst_path;  // a broken structure has no element values: its reason says where
  if (located && (expect.kind != Element::kNone || got.kind != Element::kNone)) {
    std::string where = worst_path ? *worst_path : list_text(*worst_index);
    auto text = [](const Element& el) { return el.kind == Element::kNone ? std::string("None") : el.text; };
    lines.push_back("  worst element at " + where + ": expect=" + text(expect) + ", get=" + text(got));
  }
  if (stats.present && stats.has_abs) {
    auto n = [&](double v) { return format_g(v); };
    lines.push_back("  " + stats.dtype + list_text(stats.shape) + ": abs err max=" + n(stats.abs_err_max) +
                    " mean=" + n(stats.abs_err_mean) + "; expect min=" + n(stats.expect_min) + " max=" +
                    n(stats.expect_max) + " mean=" + n(stats.expect_mean) + "; get min=" + n(stats.get_min) +
                    " max=" + n(stats.get_max) + " mean=" + n(stats.get_mean));
  }
  return lines;
}

void by_value(const Value& want0, Value& have) {
  const Value* want = unwrap(want0);
  Value* h = &have;
  while (h->kind == ValueKind::kOptional && !h->elements.empty()) h = &h->elements[0];
  if (want->kind != ValueKind::kTensor || h->kind != ValueKind::kTensor) return;
  int32_t to = want->tensor.elem_type, from = h->tensor.elem_type;
  auto f = [](int32_t t) { return t == kFloat || t == kDouble || t == kFloat16; };
  if (to == from || !f(to) || !f(from)) return;
  Tensor& t = h->tensor;
  std::size_t n = t.element_count();
  std::vector<uint8_t> out(n * elem_size(to));
  for (std::size_t i = 0; i < n; ++i) {
    double v = as_double(t, i);
    uint8_t* p = out.data() + i * elem_size(to);
    if (to == kFloat) {
      float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
    } else if (to == kDouble) {
      std::memcpy(p, &v, 8);
    } else {
      // float32 -> float16 as numpy casts: from the float (double rounding is exact for float32 values)
      uint16_t x = double_to_half(v);
      std::memcpy(p, &x, 2);
    }
  }
  t.data = std::move(out);
  t.elem_type = to;
}

}  // namespace mgerun
