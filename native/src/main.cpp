// mgerun-native: verify and time mgedump bundles without Python (docs/native.md).
#include "cli.h"

int main(int argc, char** argv) { return mgerun::run_cli(argc, argv); }
