// Reading a bundle: docs/bundle.md "What a reader checks", in the order mgerun checks (mgedump/bundle/reader.py,
// format.py, mgedump/commands/verify_prepare.py), with mgerun's words for each refusal.
#include "bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <system_error>

#include "json.h"
#include "manifest.h"
#include "sha256.h"
#include "zip.h"

namespace mgerun {

namespace {

constexpr uint64_t kDeferHashBytes = 16u << 20;  // larger members are hashed on a thread (check 5)

std::string basename_of(const std::string& name) {
  auto slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

std::string errno_text(int err, const std::string& path) {
  return "[Errno " + std::to_string(err) + "] " + std::strerror(err) + ": " + py_repr(path);
}

std::vector<std::string> strings_of(const JNode* list) {
  std::vector<std::string> out;
  if (list)
    for (const JNode& s : list->items) out.push_back(s.s);
  return out;
}

// A variant's model member, its data member, optimisations and requirements: the manifest's top level in format
// version 1, one entry of "variants" in version 2 (docs/bundle.md).
void read_variant_model(const JNode& entry, Variant& v) {
  const JNode& model = *entry.get("model");
  v.model.member = model.get("member")->s;
  v.model.sha256 = model.get("sha256")->s;
  if (const JNode* d = model.get("external_data"); d && d->kind == JNode::kString) v.model.external_data = d->s;
  v.optimizations = strings_of(entry.get("optimizations"));
  v.requirements = strings_of(entry.get("requirements"));
}

IoInfo io_info(const JNode& entry) {
  IoInfo info;
  info.name = entry.get("name")->s;
  info.dtype = entry.get("dtype")->s;
  try {
    info.type = parse_dtype(info.dtype);
  } catch (const std::invalid_argument& e) {
    throw Refusal(std::string(kMalformed) + ": dtype " + py_repr(info.dtype) + " (" + e.what() + ")");
  }
  const JNode* shape = entry.get("shape");
  if (shape && shape->kind == JNode::kArray) {
    info.has_shape = true;
    for (const JNode& d : shape->items) {
      Dim dim;
      if (d.kind == JNode::kInt) {
        dim.kind = Dim::kFixed;
        dim.value = d.i;
      } else if (d.kind == JNode::kString) {
        dim.kind = Dim::kSymbol;
        dim.symbol = d.s;
      } else if (d.is_integer()) {  // beyond 64 bits: fixes a dim no tensor has
        dim.kind = Dim::kFixed;
        dim.value = INT64_MAX;
      }
      info.shape.push_back(dim);
    }
  }
  return info;
}

std::vector<IoInfo> io_infos(const JNode* list) {
  std::vector<IoInfo> out;
  for (const JNode& e : list->items) out.push_back(io_info(e));
  return out;
}

std::string shape_text(const IoInfo& info) {
  if (!info.has_shape) return "unknown";
  std::string t = "[";
  for (std::size_t i = 0; i < info.shape.size(); ++i) {
    const Dim& d = info.shape[i];
    t += i ? "," : "";
    t += d.kind == Dim::kFixed ? std::to_string(d.value) : d.kind == Dim::kSymbol ? d.symbol : "?";
  }
  return t + "]";
}

std::string array_shape_text(const std::vector<int64_t>& shape) {
  std::string t = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) t += (i ? ", " : "") + std::to_string(shape[i]);
  return t + "]";
}

nlohmann::json to_nlohmann(const JNode& n) {
  switch (n.kind) {
    case JNode::kNull:
      return nullptr;
    case JNode::kBool:
      return n.b;
    case JNode::kInt:
      return n.i;
    case JNode::kUInt:
      return n.u;
    case JNode::kBigInt:
    case JNode::kFloat:
      return n.d;
    case JNode::kString:
      return n.s;
    case JNode::kArray: {
      nlohmann::json a = nlohmann::json::array();
      for (const JNode& x : n.items) a.push_back(to_nlohmann(x));
      return a;
    }
    case JNode::kObject: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, v] : n.members) o[k] = to_nlohmann(v);
      return o;
    }
  }
  return nullptr;
}

// every TensorProto of a serialized model as byte spans (mgedump/model/modelfile.py), for check 8
struct Span {
  const uint8_t* p;
  std::size_t n;
};

struct Wire {
  uint32_t number;
  int wire;
  uint64_t value;
  const uint8_t* p;
  std::size_t n;
};

// The fields of one message; throws std::invalid_argument on a malformed one.
std::vector<Wire> wire_fields(const uint8_t* p, std::size_t n) {
  std::vector<Wire> out;
  const uint8_t* end = p + n;
  auto varint = [&]() {
    uint64_t r = 0;
    for (int shift = 0;; shift += 7) {
      if (p >= end || shift > 63) throw std::invalid_argument("truncated varint");
      uint8_t b = *p++;
      r |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (b < 0x80) return r;
    }
  };
  while (p < end) {
    uint64_t key = varint();
    Wire w{static_cast<uint32_t>(key >> 3), static_cast<int>(key & 7), 0, nullptr, 0};
    if (w.wire == 0) {
      w.value = varint();
    } else if (w.wire == 2) {
      uint64_t len = varint();
      if (len > static_cast<uint64_t>(end - p)) throw std::invalid_argument("field runs past its message");
      w.p = p;
      w.n = static_cast<std::size_t>(len);
      p += len;
    } else if (w.wire == 1 || w.wire == 5) {
      std::size_t width = w.wire == 1 ? 8 : 4;
      if (width > static_cast<std::size_t>(end - p)) throw std::invalid_argument("message runs past its end");
      p += width;
    } else {
      throw std::invalid_argument("wire type " + std::to_string(w.wire));
    }
    out.push_back(w);
  }
  return out;
}

void graph_spans(const uint8_t* p, std::size_t n, int depth, std::vector<Span>& out);

void sparse_spans(const uint8_t* p, std::size_t n, std::vector<Span>& out) {
  for (const Wire& w : wire_fields(p, n))
    if ((w.number == 1 || w.number == 2) && w.wire == 2) out.push_back({w.p, w.n});
}

void attribute_spans(const uint8_t* p, std::size_t n, int depth, std::vector<Span>& out) {
  for (const Wire& w : wire_fields(p, n)) {
    if (w.wire != 2) continue;
    if (w.number == 5 || w.number == 10)
      out.push_back({w.p, w.n});
    else if (w.number == 22 || w.number == 23)
      sparse_spans(w.p, w.n, out);
    else if (w.number == 6 || w.number == 11)
      graph_spans(w.p, w.n, depth + 1, out);
  }
}

void node_spans(const uint8_t* p, std::size_t n, int depth, std::vector<Span>& out) {
  for (const Wire& w : wire_fields(p, n))
    if (w.number == 5 && w.wire == 2) attribute_spans(w.p, w.n, depth, out);
}

void graph_spans(const uint8_t* p, std::size_t n, int depth, std::vector<Span>& out) {
  if (depth > 64) throw std::invalid_argument("subgraphs nested too deep");
  for (const Wire& w : wire_fields(p, n)) {
    if (w.wire != 2) continue;
    if (w.number == 5)
      out.push_back({w.p, w.n});
    else if (w.number == 15)
      sparse_spans(w.p, w.n, out);
    else if (w.number == 1)
      node_spans(w.p, w.n, depth, out);
  }
}

// The locations of the model's external tensors (their "location" entries).
std::set<std::string> external_locations(const uint8_t* p, std::size_t n) {
  std::vector<Span> spans;
  for (const Wire& w : wire_fields(p, n)) {
    if (w.wire != 2) continue;
    if (w.number == 7) {
      graph_spans(w.p, w.n, 0, spans);
    } else if (w.number == 25) {  // a model-local function: its nodes and its attributes' defaults
      for (const Wire& f : wire_fields(w.p, w.n)) {
        if (f.wire != 2) continue;
        if (f.number == 7) node_spans(f.p, f.n, 0, spans);
        if (f.number == 11) attribute_spans(f.p, f.n, 0, spans);
      }
    }
  }
  std::set<std::string> found;
  for (const Span& s : spans) {
    std::vector<Wire> fields = wire_fields(s.p, s.n);
    bool external = false;
    for (const Wire& w : fields) external |= w.number == 14 && w.wire == 0 && w.value == 1;
    if (!external) continue;
    std::string location;
    for (const Wire& w : fields) {
      if (w.number != 13 || w.wire != 2) continue;
      std::map<uint32_t, std::string> entry;
      for (const Wire& e : wire_fields(w.p, w.n))
        if (e.wire == 2) entry[e.number] = std::string(reinterpret_cast<const char*>(e.p), e.n);
      if (entry.count(1) && entry[1] == "location") {
        location = entry[2];
        break;
      }
    }
    found.insert(location);
  }
  return found;
}

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

}  // namespace

Refusal::Refusal(std::string message_, std::string hint_)
    : std::runtime_error(message_), message(std::move(message_)), hint(std::move(hint_)) {}

std::string Refusal::one_line() const {
  std::string text = hint.empty() ? message : message + " (hint: " + hint + ")";
  std::string out;  // " ".join(text.split()): whitespace runs become one space
  bool space = false;
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
      space = !out.empty();
    } else {
      if (space) out += ' ';
      space = false;
      out += c;
    }
  }
  return out;
}

double Assertion::maxerr_of(const std::string& output) const {
  auto it = output_maxerr.find(output);
  return it == output_maxerr.end() ? maxerr : it->second;
}

const std::string& Assertion::stat_of(const std::string& output) const {
  auto it = output_error_stat.find(output);
  return it == output_error_stat.end() ? error_stat : it->second;
}

std::unique_ptr<Bundle> Bundle::open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw Refusal("bundle not found: " + path);
  if (!S_ISREG(st.st_mode)) throw Refusal("bundle path is not a file: " + path);
  std::unique_ptr<Bundle> b(new Bundle());
  b->path_ = path;
  try {
    b->zip_ = std::make_unique<Zip>(path);
  } catch (const ZipError& e) {
    throw Refusal(path + ": not a bundle (corrupt or not a zip archive: " + e.what() + ")");
  } catch (const std::system_error& e) {
    throw Refusal(path + ": not a bundle (corrupt or not a zip archive: " + errno_text(e.code().value(), path) + ")");
  }
  b->check_structure();
  b->load_manifest();
  b->check_members();
  return b;
}

Bundle::~Bundle() {
  cancel_ = true;
  if (hasher_.joinable()) hasher_.join();
}

void Bundle::check_structure() {
  const auto& entries = zip_->entries();
  for (const ZipEntry& e : entries) check_member_name(e.name);
  std::map<std::string, int> counts;
  for (const ZipEntry& e : entries) ++counts[e.name];
  for (const auto& [name, count] : counts)  // sorted: the first name twice, as reader.py names it
    if (count > 1) throw Refusal(path_ + ": member " + py_repr(name) + " appears twice in the archive");
  std::set<std::string> files;
  for (const ZipEntry& e : entries) files.insert(e.name);
  for (const ZipEntry& e : entries) {
    for (std::size_t at = e.name.find('/'); at != std::string::npos; at = e.name.find('/', at + 1)) {
      std::string folder = e.name.substr(0, at);
      if (files.count(folder))
        throw Refusal(path_ + ": member " + py_repr(folder) + " is a file and also the folder of " + py_repr(e.name));
    }
  }
  std::map<std::string, std::string> folded;
  for (const ZipEntry& e : entries) {
    auto [it, fresh] = folded.emplace(fold_case(e.name), e.name);
    if (!fresh && it->second != e.name)
      throw Refusal(path_ + ": members " + py_repr(it->second) + " and " + py_repr(e.name) + " differ only in case");
  }
  if (entries.empty() || entries[0].name != "mgedump.json")
    throw Refusal(path_ + ": not an mgedump bundle (the first member is not mgedump.json)");
  for (const ZipEntry& e : entries)
    if (e.method != 0)
      throw Refusal(path_ + ": member " + py_repr(e.name) + " is compressed; bundle members are stored");
  if (entries[0].size > kMaxManifestBytes)
    throw Refusal(path_ + ": manifest is larger than " + std::to_string(kMaxManifestBytes) + " bytes");
}

void Bundle::load_manifest() {
  const ZipEntry& e = zip_->entries()[0];
  uint64_t length = 0;
  try {
    const uint8_t* data = zip_->member_data(e, &length);
    if (crc32_update(0, data, length) != e.crc) throw ZipError("Bad CRC-32 for file 'mgedump.json'");
    manifest_text_.assign(reinterpret_cast<const char*>(data), length);
  } catch (const ZipError& err) {
    throw Refusal(path_ + ": cannot read member 'mgedump.json' (" + err.what() + ")");
  }
  JNode doc;
  try {
    doc = parse_json(manifest_text_, kMaxJsonDepth);
  } catch (const JsonError& err) {
    throw Refusal(path_ + ": manifest is not valid JSON (" + err.what() + ")");
  }
  validate_manifest(doc);

  // the members after the manifest: exactly those listed, in that order
  std::vector<std::string> names;
  for (std::size_t i = 1; i < zip_->entries().size(); ++i) names.push_back(zip_->entries()[i].name);
  std::vector<std::string> listed;
  for (const JNode& m : doc.get("members")->items) {
    listed.push_back(m.get("name")->s);
    uint64_t size = m.get("size")->kind == JNode::kInt ? static_cast<uint64_t>(m.get("size")->i) : UINT64_MAX;
    listed_.push_back({m.get("name")->s, {size, m.get("sha256")->s}});
  }
  if (listed != names) {
    std::set<std::string> in_listed(listed.begin(), listed.end()), in_names(names.begin(), names.end());
    for (const std::string& n : names)
      if (!in_listed.count(n)) throw Refusal(path_ + ": member " + py_repr(n) + " is not listed in the manifest");
    for (const std::string& n : listed)
      if (!in_names.count(n))
        throw Refusal(path_ + ": member " + py_repr(n) + " is listed in the manifest but missing");
    throw Refusal(path_ + ": members are not in the manifest's order");
  }

  // the records
  format_version_ = static_cast<int>(doc.get("format_version")->i);
  inputs_ = io_infos(doc.get("inputs"));
  outputs_ = io_infos(doc.get("outputs"));
  const JNode& a = *doc.get("assertion");
  assertion_.enabled = a.get("enabled")->b;
  assertion_.maxerr = a.get("maxerr")->number();
  assertion_.verbose = a.get("verbose")->b;
  if (const JNode* o = a.get("output_maxerr"))
    for (const auto& [k, v] : o->members) assertion_.output_maxerr[k] = v.number();
  if (const JNode* s = a.get("error_stat")) assertion_.error_stat = s->s;
  if (const JNode* o = a.get("output_error_stat"))
    for (const auto& [k, v] : o->members) assertion_.output_error_stat[k] = v.s;
  for (const JNode& c : doc.get("test_cases")->items)
    cases_.push_back({c.get("dir")->s, c.get("spec")->s, c.get("origin")->s, strings_of(c.get("inputs")),
                      strings_of(c.get("outputs"))});
  const JNode* seed = doc.get("seed");
  seed_ = seed->kind == JNode::kInt ? seed->i : 0;
  repeat_ = doc.get("data_options")->get("repeat")->kind == JNode::kInt ? doc.get("data_options")->get("repeat")->i : 1;
  has_io_dump_ = doc.has("io_dump");
  if (const JNode* env = doc.get("environment")) environment_json_ = to_nlohmann(*env).dump();
  if (const JNode* gen = doc.get("generator"))
    if (const JNode* v = gen->get("version")) generator_version_ = v->s;
  if (format_version_ == 1) {
    Variant v;
    v.name = "fp32";  // mgedump/optimize/precisions variant_of: the precision record's mode names it
    if (const JNode* f = doc.get("float16"); f && f->kind == JNode::kObject) {
      if (const JNode* m = f->get("mode"); m && m->kind == JNode::kString && (m->s == "ioc16" || m->s == "io16xc32"))
        v.name = m->s;
    }
    if (v.name == "fp32") {
      if (const JNode* q = doc.get("int8"); q && q->kind == JNode::kObject) {
        if (const JNode* m = q->get("mode"); m && m->kind == JNode::kString) {
          if (m->s == "static") v.name = "int8";
          if (m->s == "dynamic") v.name = "int8-dynamic";
        }
      }
    }
    read_variant_model(doc, v);
    v.inputs = inputs_;
    v.outputs = outputs_;
    variants_.push_back(std::move(v));
  } else {
    for (const JNode& e : doc.get("variants")->items) {
      Variant v;
      v.name = e.get("name")->s;
      read_variant_model(e, v);
      v.inputs = io_infos(e.get("inputs"));
      v.outputs = io_infos(e.get("outputs"));
      for (const auto& [k, c] : e.get("certified")->members)
        v.certified.push_back({k, c.is_number() ? std::optional<double>(c.number()) : std::nullopt});
      variants_.push_back(std::move(v));
    }
  }
  manifest_ = to_nlohmann(doc);
}

void Bundle::check_members() {
  const auto& entries = zip_->entries();
  std::vector<std::size_t> large;
  for (std::size_t i = 1; i < entries.size(); ++i) {
    const ZipEntry& e = entries[i];
    const auto& [name, listed] = listed_[i - 1];
    __int128 end = static_cast<__int128>(e.header_offset) + e.compressed_size;
    if (end > static_cast<__int128>(zip_->file_size()))
      throw Refusal(path_ + ": member " + py_repr(name) + " runs past the end of the file (truncated or crafted)");
    if (e.size != listed.first)
      throw Refusal(path_ + ": member " + py_repr(name) + " is " + std::to_string(e.size) + " bytes, manifest says " +
                    std::to_string(listed.first));
    if (e.size > kDeferHashBytes) {
      large.push_back(i);
      continue;
    }
    std::string problem = [&]() -> std::string {
      uint64_t length = 0;
      try {
        const uint8_t* data = zip_->member_data(e, &length);
        uint32_t crc = 0;
        std::string digest = sha256_hex(data, length, &crc);
        if (crc != e.crc) return "corrupt";
        return digest == listed.second ? "" : "sha256";
      } catch (const ZipError& err) {
        return std::string("corrupt:") + err.what();
      }
    }();
    if (problem == "sha256")
      throw Refusal(path_ + ": member " + py_repr(name) +
                    " does not match its sha256 in the manifest (tampered or corrupt)");
    if (problem == "corrupt")
      throw Refusal(path_ + ": member " + py_repr(name) + " is corrupt or tampered with (Bad CRC-32 for file " +
                    py_repr(name) + ")");
    if (!problem.empty())
      throw Refusal(path_ + ": member " + py_repr(name) + " is corrupt or tampered with (" + problem.substr(8) + ")");
  }
  if (!large.empty()) hasher_ = std::thread([this, large] { hash_large(large); });
}

void Bundle::hash_large(std::vector<std::size_t> members) {
  for (std::size_t i : members) {
    if (cancel_) return;
    const ZipEntry& e = zip_->entries()[i];
    const std::string& name = listed_[i - 1].first;
    uint64_t length = 0;
    try {
      const uint8_t* data = zip_->member_data(e, &length);
      uint32_t crc = 0;
      std::string digest = sha256_hex(data, length, &crc, &cancel_);
      if (cancel_) return;
      if (crc != e.crc) {
        hash_problem_ = path_ + ": member " + py_repr(name) + " is corrupt or tampered with (Bad CRC-32 for file " +
                        py_repr(name) + ")";
        return;
      }
      if (digest != listed_[i - 1].second.second) {
        hash_problem_ =
            path_ + ": member " + py_repr(name) + " does not match its sha256 in the manifest (tampered or corrupt)";
        return;
      }
    } catch (const ZipError& err) {
      hash_problem_ = path_ + ": member " + py_repr(name) + " is corrupt or tampered with (" + err.what() + ")";
      return;
    } catch (const std::exception& err) {
      hash_problem_ = path_ + ": member " + py_repr(name) + " could not be hashed (" + err.what() + ")";
      return;
    }
  }
}

void Bundle::verified() {
  if (hasher_.joinable()) hasher_.join();
  if (!hash_problem_.empty()) throw Refusal(hash_problem_);
}

const Variant& Bundle::choose_variant(const std::optional<std::string>& name) const {
  if (format_version_ == 1) {
    const Variant& own = variants_[0];
    if (name && *name != own.name)
      throw Refusal(path_ + " holds one model, the " + own.name + " variant; --variant " + py_repr(*name));
    return own;
  }
  std::string names;
  for (const Variant& v : variants_) names += (names.empty() ? "" : ", ") + v.name;
  if (!name) throw Refusal(path_ + " holds the variants " + names + ": name one (--variant)");
  for (const Variant& v : variants_)
    if (v.name == *name) return v;
  throw Refusal(path_ + " has no variant " + py_repr(*name) + ": it holds " + names);
}

void Bundle::check_requirements(const Variant& v, const std::string& provider,
                                bool (*has_int8_kernels)(const std::string& op)) const {
  static const std::set<std::string> known = {"onnxruntime", "onnxruntime-cpu", "x86-avx2", "int8-qdq",
                                              "int8-integer-ops"};
  std::string unknown;
  for (const std::string& r : v.requirements)
    if (!known.count(r)) unknown += (unknown.empty() ? "" : ", ") + r;
  if (!unknown.empty())
    throw Refusal("the bundle's model needs " + unknown + ", which this mgedump does not know", "upgrade mgedump");
  auto needs = [&](const char* r) { return std::find(v.requirements.begin(), v.requirements.end(), r) != v.requirements.end(); };
  if (needs("x86-avx2") && !cpu_has_avx2())
    throw Refusal(
        "the bundle's model uses onnxruntime's NCHWc layout for x86 CPUs with AVX2 (--enable-nchw88), and this CPU "
        "has no AVX2",
        "pack it again without --enable-nchw88 for this machine");
  for (const std::string& r : v.requirements) {
    const char* ops[2] = {nullptr, nullptr};
    if (r == "int8-qdq") ops[0] = "QuantizeLinear", ops[1] = "DequantizeLinear";
    if (r == "int8-integer-ops") ops[0] = "DynamicQuantizeLinear", ops[1] = "MatMulInteger";
    if (!ops[0] || !has_int8_kernels) continue;
    std::string missing;
    for (const char* op : ops)
      if (!has_int8_kernels(op)) missing += (missing.empty() ? "" : ", ") + std::string(op);
    if (!missing.empty())
      throw Refusal("the bundle's int8 model needs " + missing + " kernels, which this onnxruntime lacks");
  }
  if (needs("onnxruntime-cpu") && !provider.empty() && provider != "CPUExecutionProvider")
    throw Refusal("the bundle's model uses onnxruntime CPU-only ops (NCHWc); it cannot run on " + provider);
}

std::string Bundle::read_member(const std::string& name) const {
  for (const ZipEntry& e : zip_->entries()) {
    if (e.name != name) continue;
    uint64_t length = 0;
    try {
      const uint8_t* data = zip_->member_data(e, &length);
      if (crc32_update(0, data, length) != e.crc) throw ZipError("Bad CRC-32 for file " + py_repr(name));
      return std::string(reinterpret_cast<const char*>(data), length);
    } catch (const ZipError& err) {
      throw Refusal(path_ + ": cannot read member " + py_repr(name) + " (" + err.what() + ")");
    }
  }
  throw Refusal(path_ + ": cannot read member " + py_repr(name) + " (\"There is no item named " + py_repr(name) +
                " in the archive\")");
}

std::string Bundle::extract_variant(const Variant& v, const std::string& folder) const {
  auto extract = [&](const std::string& member) {
    const ZipEntry* entry = nullptr;
    for (const ZipEntry& e : zip_->entries())
      if (e.name == member) entry = &e;
    if (!entry) throw Refusal(path_ + ": cannot read member " + py_repr(member));
    uint64_t length = 0;
    const uint8_t* data;
    try {
      data = zip_->member_data(*entry, &length);
    } catch (const ZipError& err) {
      throw Refusal(path_ + ": member " + py_repr(member) + " has no valid local header (" + err.what() + ")");
    }
    std::string target = folder + "/" + basename_of(member);
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) throw Refusal("cannot write " + target + ": " + std::strerror(errno));
    uint64_t done = 0;
    while (done < length) {
      std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(length - done, 64u << 20));
      ssize_t n = ::write(fd, data + done, chunk);
      if (n <= 0) {
        int err = errno;
        ::close(fd);
        throw Refusal("cannot write " + target + ": " + std::strerror(n < 0 ? err : ENOSPC));
      }
      done += static_cast<uint64_t>(n);
    }
    ::close(fd);
    return std::make_pair(target, std::make_pair(data, length));
  };
  auto [model_path, model_bytes] = extract(v.model.member);
  if (!v.model.external_data.empty()) extract(v.model.external_data);
  // check 8: the model reads external data from its own data member only
  std::string label = path_ + ":" + v.model.member;
  std::set<std::string> locations;
  try {
    locations = external_locations(model_bytes.first, model_bytes.second);
  } catch (const std::invalid_argument& e) {
    throw Refusal(label + ": not a valid ONNX model (" + e.what() + ")");
  }
  std::string allowed = v.model.external_data.empty() ? "" : basename_of(v.model.external_data);
  for (const std::string& location : locations) {
    if (!allowed.empty() && location == allowed) continue;
    std::string where = v.model.external_data.empty() ? "no data member: the bundle has none"
                                                       : "its data member " + py_repr(v.model.external_data);
    throw Refusal(label + ": the model reads external data from " + py_repr(location) + "; a bundled model may read " +
                  where);
  }
  return model_path;
}

// A test case member decoded as `info` says (check 6: a valid value of its type, under its own name). `what`
// names the member in every refusal.
Value Bundle::decode_member(const std::string& member, const IoInfo& info, std::string& what) const {
  std::string bytes = read_member(member);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  what = path_ + ": member " + py_repr(member);
  std::string stored;
  if (!info.is_tensor()) {
    Value v;
    try {
      v = decode_value(p, bytes.size(), info.type, &stored);
    } catch (const std::invalid_argument& e) {
      throw Refusal(what + " is not a valid " + info.dtype + " (" + e.what() + ")");
    }
    if (!stored.empty() && stored != info.name)
      throw Refusal(what + " holds " + py_repr(stored) + ", expected " + py_repr(info.name));
    return v;
  }
  Tensor t;
  try {
    t = decode_tensor(p, bytes.size(), &stored);
  } catch (const std::invalid_argument& e) {
    throw Refusal(what + " is not a valid TensorProto (" + e.what() + ")");
  }
  if (!stored.empty() && stored != info.name)
    throw Refusal(what + " holds tensor " + py_repr(stored) + ", expected " + py_repr(info.name));
  return Value::make_tensor(std::move(t));
}

Value Bundle::input(std::size_t c, std::size_t k, const IoInfo* against) const {
  const IoInfo& info = against ? *against : inputs_.at(k);
  std::string what;
  Value v = decode_member(cases_.at(c).inputs.at(k), info, what);
  if (!info.is_tensor()) return v;
  const Tensor& t = v.tensor;
  if (info.type.elem_type != kString && t.elem_type != info.type.elem_type)
    throw Refusal(what + " holds " + (t.elem_type == kString ? "object" : elem_type_name(t.elem_type)) +
                  ", but the model's input " + py_repr(info.name) + " takes " + info.dtype);
  if (info.has_shape) {  // mgedump/data/shapes.py check_shape
    if (t.shape.size() != info.shape.size())
      throw Refusal("input " + py_repr(info.name) + " has rank " + std::to_string(info.shape.size()) + " (shape " +
                    shape_text(info) + "), but " + what + " has shape " + array_shape_text(t.shape) + " (rank " +
                    std::to_string(t.shape.size()) + ")");
    for (std::size_t axis = 0; axis < t.shape.size(); ++axis) {
      const Dim& d = info.shape[axis];
      if (d.kind != Dim::kFixed || d.value < 0 || d.value == t.shape[axis]) continue;
      throw Refusal("input " + py_repr(info.name) + " fixes dim " + std::to_string(axis) + " to " +
                    std::to_string(d.value) + " (shape " + shape_text(info) + "), but " + what + " has shape " +
                    array_shape_text(t.shape));
    }
  }
  return v;
}

Value Bundle::expected(std::size_t c, std::size_t k) const {
  std::string what;
  return decode_member(cases_.at(c).outputs.at(k), outputs_.at(k), what);
}

}  // namespace mgerun
