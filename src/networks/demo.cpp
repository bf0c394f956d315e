// The phantom demo's set-up (qsmcore/demo.h): one place for what `qsm demo` and the web page
// both simulate and feed the network.
#include "qsmcore/demo.h"

#include <string>

#include "qsmcore/error.h"

namespace qsmcore {

PhantomOptions demo_phantom_options(int size) {
  PhantomOptions po;
  po.dims = {size, size, size};
  po.voxel_mm = {1.0, 1.0, 1.0};
  po.te_s = {0.02};
  po.background = false;
  po.validate();
  return po;
}

NetworkInputs demo_network_inputs(const Phantom& ph, const PhantomOptions& po) {
  NetworkInputs in;
  in.field = &ph.local_field;
  in.mask = &ph.mask;
  in.field_unit = FieldUnit::Ppm;
  in.b0_tesla = po.b0_t;
  in.b0_dir = po.b0_dir;
  return in;
}

NetworkOutput& chi_output(NetworkRun& run, std::string_view network_id) {
  if (run.outputs.empty()) throw Error(ErrorKind::Internal, std::string(network_id) + " returned no output");
  for (NetworkOutput& o : run.outputs)
    if (o.name == "chi") return o;
  return run.outputs[0];
}

}  // namespace qsmcore
