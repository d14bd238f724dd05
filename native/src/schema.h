// The subset of JSON Schema (draft 2020-12) that mgedump/bundle/manifest.schema.json uses, checked as
// mgedump/base/schema.py checks it: the first value that does not fit is named by its path, with what was
// expected ("environment.cpu: expected an object, got a list"). The schema is the repository's own file,
// embedded at build time (native/cmake/embed.cmake), read as a reader reads it (format.py reader_schema()).
#pragma once

#include <optional>
#include <string>

#include "json.h"

namespace mgerun {

// The reader's schema: the published one with every "additionalProperties": false dropped and the open ends of
// mgedump/bundle/format.py (OPEN_ENDS) opened. Parsed once.
const JNode& reader_schema();

// The first problem of `document` against the reader's schema ("PATH: REASON"), or nullopt when it fits.
std::optional<std::string> first_problem(const JNode& document);

// Python's re.search(pattern, text) for the regular expressions a schema uses (anchors, groups, alternation,
// look-ahead, classes, quantifiers); linear in the text for those patterns, never recursive per character.
bool regex_search(const std::string& pattern, const std::string& text);

}  // namespace mgerun
