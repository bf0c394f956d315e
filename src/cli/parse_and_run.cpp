// The one place that turns a command's outcome into an exit status (native qsm and wasm qsm).
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "qsmcore/error.h"

namespace qsmcore::cli {

int parse_and_run(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const qsmcore::Error& e) {
    std::fprintf(stderr, "qsm: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qsm: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}

}  // namespace qsmcore::cli
