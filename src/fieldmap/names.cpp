// The field map's choices by the names the CLI, Python and the web page take (fieldmap.h).
#include "qsmcore/error.h"
#include "qsmcore/fieldmap.h"

namespace qsmcore {

UnwrapMethod parse_unwrap_method(const std::string& name, const std::string& what) {
  if (name == "romeo") return UnwrapMethod::Romeo;
  if (name == "laplacian") return UnwrapMethod::Laplacian;
  throw Error(ErrorKind::InvalidInput, what + " '" + name + "': expected romeo or laplacian");
}

EchoWeighting parse_echo_weighting(const std::string& name, const std::string& what) {
  if (name == "snr") return EchoWeighting::PhaseSnr;
  if (name == "variance") return EchoWeighting::PhaseVariance;
  if (name == "average") return EchoWeighting::Average;
  if (name == "te") return EchoWeighting::Te;
  throw Error(ErrorKind::InvalidInput, what + " '" + name + "': expected snr, variance, average or te");
}

}  // namespace qsmcore
