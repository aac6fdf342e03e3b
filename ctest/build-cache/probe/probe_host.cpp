// Host-side C++ in the probe library: exercises the CXX launcher next to the CUDA one.
#include <string>

namespace ffpa::probe {
std::string describe() { return "ffpa build-cache probe"; }
}  // namespace ffpa::probe
