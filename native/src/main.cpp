// Placeholder until the command line lands: opens and checks each bundle given.
#include <cstdio>

#include "bundle.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    try {
      auto bundle = mgerun::Bundle::open(argv[i]);
      bundle->verified();
    } catch (const mgerun::Refusal& refusal) {
      std::fprintf(stderr, "mgerun-native: error: %s\n", refusal.one_line().c_str());
      return 2;
    }
  }
  return 0;
}
