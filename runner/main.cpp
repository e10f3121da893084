// The `zoo` executable: see runner/run.h.
#include <string>
#include <vector>

#include "runner/run.h"

int main(int argc, char** argv) { return zoo::run(std::vector<std::string>(argv + 1, argv + argc)); }
