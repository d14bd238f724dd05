// The manifest (mgedump.json, docs/bundle.md "The manifest"): checked as mgedump/bundle/format.py
// validate_manifest checks it (its version, the schema, then what a schema cannot say), then read into the
// records of bundle.h.
#pragma once

#include <string>

#include "json.h"

namespace mgerun {

constexpr std::size_t kMaxManifestBytes = 16u << 20;
constexpr std::size_t kMaxJsonDepth = 980;  // about where Python's json module gives up (its recursion limit)
extern const char* const kMalformed;        // "this bundle's manifest is malformed"

// Throws Refusal with mgerun's words.
void validate_manifest(const JNode& manifest);

// A safe relative member name (docs/bundle.md "Member names"); throws Refusal naming it.
void check_member_name(const std::string& name);

}  // namespace mgerun
