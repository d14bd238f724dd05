#include "manifest.h"

#include <set>

#include "bundle.h"
#include "schema.h"
#include "tensorproto.h"

namespace mgerun {

const char* const kMalformed = "this bundle's manifest is malformed";

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Refusal(std::string(kMalformed) + ": " + what);
}

std::string shorten(const std::string& text, std::size_t limit) {
  std::vector<uint32_t> cps = code_points(text);
  if (cps.size() <= limit) return text;
  std::string out;
  for (std::size_t i = 0; i < limit - 3; ++i) append_utf8(out, cps[i]);
  return out + "...";
}

std::string show_value(const JNode* v) {  // Python's repr of a JSON value, for the format checks
  if (!v) return "None";
  switch (v->kind) {
    case JNode::kNull:
      return "None";
    case JNode::kBool:
      return v->b ? "True" : "False";
    case JNode::kInt:
      return std::to_string(v->i);
    case JNode::kUInt:
      return std::to_string(v->u);
    case JNode::kString:
      return py_repr(v->s);
    case JNode::kArray:
      return "[...]";
    case JNode::kObject:
      return "{...}";
    default: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", v->d);
      return buf;
    }
  }
}

// format.py _check_value_types: a structured dtype must parse, wherever one is written
void check_value_types(const JNode& manifest) {
  std::vector<std::pair<std::string, const JNode*>> places = {{"", &manifest}};
  if (const JNode* variants = manifest.get("variants"); variants && variants->kind == JNode::kArray)
    for (std::size_t k = 0; k < variants->items.size(); ++k)
      places.push_back({"variants[" + std::to_string(k) + "].", &variants->items[k]});
  for (auto& [where, entry] : places) {
    for (const char* key : {"inputs", "outputs"}) {
      const JNode* infos = entry->get(key);
      if (!infos || infos->kind != JNode::kArray) continue;
      for (std::size_t k = 0; k < infos->items.size(); ++k) {
        const JNode* dtype = infos->items[k].get("dtype");
        if (!dtype || dtype->kind != JNode::kString || dtype->s.find('(') == std::string::npos) continue;
        try {
          parse_value_type(dtype->s);
        } catch (const std::invalid_argument& e) {
          throw Refusal(std::string(kMalformed) + ": " + where + key + "[" + std::to_string(k) + "].dtype: " +
                        py_repr(shorten(dtype->s, 60)) + " is not a type (" + shorten(e.what(), 80) + ")");
        }
      }
    }
  }
}

}  // namespace

void check_member_name(const std::string& name) {
  bool bad = name.empty() || name[0] == '/' || name.find('\\') != std::string::npos ||
             name.find('\0') != std::string::npos;
  std::vector<uint32_t> cps = code_points(name);
  if (cps.size() > 1 && cps[1] == ':') bad = true;
  std::size_t start = 0;
  while (!bad) {
    std::size_t end = name.find('/', start);
    std::string part = name.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty() || part == "." || part == "..") bad = true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (bad) throw Refusal("bundle member name " + py_repr(name) + " is not a safe relative path");
}

void validate_manifest(const JNode& manifest) {
  require(manifest.kind == JNode::kObject, "expected a JSON object");
  const JNode* format = manifest.get("format");
  if (!format || format->kind != JNode::kString || format->s != "mgedump-bundle")
    throw Refusal("not an mgedump bundle: manifest format is " + show_value(format) + ", expected 'mgedump-bundle'");
  const JNode* version = manifest.get("format_version");
  if (!version || !version->is_integer())
    throw Refusal("bundle manifest has no valid format_version (" + show_value(version) + ")");
  bool big = version->kind == JNode::kBigInt || version->kind == JNode::kUInt;
  if (big || version->i > 2)
    throw Refusal("bundle format version " + (big ? show_value(version) : std::to_string(version->i)) +
                      " is newer than this mgedump reads (up to 2)",
                  "upgrade mgedump");
  if (version->i != 1 && version->i != 2)
    throw Refusal("unknown bundle format version " + std::to_string(version->i) +
                  " (this mgedump reads versions 1 and 2)");
  check_value_types(manifest);
  if (auto problem = first_problem(manifest)) throw Refusal(std::string(kMalformed) + ": " + *problem);

  // what a schema cannot say
  const JNode& outputs = *manifest.get("outputs");
  std::set<std::string> variant_names;
  std::vector<const JNode*> models;
  if (version->i == 1) {
    models.push_back(manifest.get("model"));
  } else {
    for (const JNode& v : manifest.get("variants")->items) {
      models.push_back(v.get("model"));
      variant_names.insert(v.get("name")->s);
    }
    require(variant_names.size() == manifest.get("variants")->items.size(), "a variant is listed twice");
  }
  std::set<std::string> output_names;
  for (const JNode& o : outputs.items) output_names.insert(o.get("name")->s);
  const JNode& assertion = *manifest.get("assertion");
  for (const char* key : {"output_maxerr", "output_error_stat"}) {
    if (const JNode* named = assertion.get(key)) {
      for (auto& [name, value] : named->members) {
        (void)value;
        require(output_names.count(name), std::string("assertion.") + key + " names [" + py_repr(name) +
                                              "], which is no output of the model");
      }
    }
  }
  const JNode& cases = *manifest.get("test_cases");
  std::size_t n_in = manifest.get("inputs")->items.size(), n_out = outputs.items.size();
  bool asserted = assertion.get("enabled")->b;
  for (std::size_t k = 0; k < cases.items.size(); ++k) {
    const JNode& c = cases.items[k];
    require(c.get("inputs")->items.size() == n_in,
            "test_cases[" + std::to_string(k) + "].inputs: expected one member per model input");
    require(c.get("outputs")->items.size() == (asserted ? n_out : 0),
            "test_cases[" + std::to_string(k) +
                "].outputs: expected one member per model output when assertions are on, none when off");
  }
  const JNode& members = *manifest.get("members");
  std::set<std::string> listed;
  for (const JNode& m : members.items) {
    check_member_name(m.get("name")->s);
    listed.insert(m.get("name")->s);
  }
  require(listed.size() == members.items.size(), "a member is listed twice");
  if (const JNode* dump = manifest.get("io_dump")) {
    for (const JNode& n : dump->get("test_cases")->items)
      require(n.number() < static_cast<double>(cases.items.size()), "io_dump.test_cases: a test case the bundle lacks");
    for (const JNode& n : dump->get("test_cases")->items) {
      std::string index = "io_dump/test_data_set_" + std::to_string(static_cast<long long>(n.number())) + "/index.json";
      require(listed.count(index), "the io dump of test case " + std::to_string(static_cast<long long>(n.number())) +
                                       " is not listed");
    }
  }
  std::vector<std::string> referenced;
  for (const JNode* model : models) {
    referenced.push_back(model->get("member")->s);
    const JNode* data = model->get("external_data");
    if (data && data->kind == JNode::kString && !data->s.empty()) referenced.push_back(data->s);
  }
  for (const JNode& c : cases.items) {
    for (const JNode& m : c.get("inputs")->items) referenced.push_back(m.s);
    for (const JNode& m : c.get("outputs")->items) referenced.push_back(m.s);
  }
  std::set<std::string> seen;
  for (const std::string& name : referenced) {
    if (!listed.count(name))
      throw Refusal("bundle manifest refers to member " + py_repr(name) + ", which it does not list");
    if (!seen.insert(name).second)
      throw Refusal("bundle manifest refers to member " + py_repr(name) + " more than once");
  }
}

}  // namespace mgerun
