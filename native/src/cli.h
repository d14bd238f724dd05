// The command line of mgerun-native (docs/native.md): mgerun's verification of bundles, its printed lines and
// exit codes (docs/exit-codes.md).
#pragma once

namespace mgerun {

int run_cli(int argc, char** argv);

}  // namespace mgerun
