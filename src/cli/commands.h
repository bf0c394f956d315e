// Each command family registers its subcommands on the root CLI11 app. Commands report errors
// by throwing qsmcore::Error; main() prints "qsm: <message>" and exits 2.
#pragma once
#include <CLI/CLI.hpp>

namespace qsmcore::cli {

void register_onnx_commands(CLI::App& app);    // qsm onnx info|run
void register_models_commands(CLI::App& app);  // qsm models, fetch, verify
void register_demo_command(CLI::App& app);     // qsm demo
void register_run_command(CLI::App& app);      // qsm run
void register_phantom_command(CLI::App& app);  // qsm phantom
void register_measure_command(CLI::App& app);  // qsm measure
void register_batch_commands(CLI::App& app);   // qsm batch plan|submit|status|resume|run|task
void register_pipeline_command(CLI::App& app);  // qsm pipeline: a scan's phase to its local field
void register_unwrap_command(CLI::App& app);    // qsm unwrap: ROMEO or Laplacian on a phase file

/// Parses the command line and runs the command: 0, CLI11's status for a usage error, 2 for a
/// qsmcore::Error ("qsm: <message>" on stderr), 3 for anything else (an internal error).
int parse_and_run(CLI::App& app, int argc, char** argv);

}  // namespace qsmcore::cli
