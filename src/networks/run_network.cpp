// run_network: validation, budget, dispatch by registry id (networks.h).
#include "qsmcore/error.h"
#include "qsmcore/networks.h"

namespace qsmcore {

const NetworkOutput* NetworkRun::find(const std::string& name) const {
  for (const auto& o : outputs)
    if (o.name == name) return &o;
  return nullptr;
}

NetworkNeeds network_needs(const ModelSpec& spec) {
  throw Error(ErrorKind::Unsupported, "network_needs('" + std::string(spec.id) + "'): not implemented yet");
}

NetworkRun run_network(const ModelSpec& spec, const std::vector<std::string>&, const NetworkInputs&,
                       const NetworkOptions&) {
  throw Error(ErrorKind::Unsupported, "run_network('" + std::string(spec.id) + "'): not implemented yet");
}

}  // namespace qsmcore
