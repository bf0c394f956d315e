// qsm: the command-line front end. Subcommands live in one file per family (see commands.h).
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "qsmcore/error.h"

int main(int argc, char** argv) {
  CLI::App app{"qsm - deep-learning QSM networks on CPUs within a memory budget"};
  app.require_subcommand(1);
  qsmcore::cli::register_onnx_commands(app);
  qsmcore::cli::register_models_commands(app);
  qsmcore::cli::register_run_command(app);
  qsmcore::cli::register_demo_command(app);
  qsmcore::cli::register_phantom_command(app);
  qsmcore::cli::register_measure_command(app);
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
