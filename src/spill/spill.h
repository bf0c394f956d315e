// Activation spilling: the one header the rest of the engine includes from src/spill/.
//
// What spilling is. A plan gives every intermediate tensor an arena offset by liveness, so its
// peak is known before it runs. When that arena does not fit the budget, activations leave
// memory between their uses — written to a file after one use, read back (possibly elsewhere in
// the arena) before the next — and steps whose kernels can stream an operand (conv chains,
// poolings, elementwise steps: kernels::StreamedOperand) read or write it a slab at a time
// through the file instead of holding it. Same kernels, same order, same bytes: outputs are
// bitwise those of the unbudgeted run. Parking is the same idea one level up: full-volume
// buffers a network wrapper holds but no graph reads wait in a file while a graph runs.
// docs/memory.md §8 (spilling) and §9 (parking) are the design.
//
// Who asks what:
//   - the plan (runtime/plan_layout.cpp) describes its arena buffers as SpillBuffers (events,
//     writes, what streaming each event would take) and asks plan_spills() for a placement
//     within an arena limit (limit 0: the ordinary whole-life layout) or plan_all_spilled() for
//     the least arena; it turns the answer into an ArenaLayout (per step: offsets, transfers,
//     streamed operands);
//   - a run (runtime/plan.cpp) under a spilled ArenaLayout makes a SpillFile (or takes one from
//     the model's SpillFilePool) and drives SpillTransfers: start() a step's transfers,
//     bind() its streamed operands into the kernel's ExecContext, finish() before the next step;
//     stats() says what moved;
//   - the network wrappers (networks/context.*) park their volumes with networks::Parking and
//     its Scope around each graph run;
//   - kernels keep only their streamed-operand view (kernels/kernel.h) and never see a file.
//
// Internal to the folder: spill/direct_operand.* (a streamed operand moved by direct I/O, made
// by SpillTransfers::bind). Namespaces are kept from the folders these pieces came from
// (qsmcore::memory for the planner, qsmcore::residency for the file, qsmcore::networks for
// parking), so that moving them here changed no caller beyond its #include.
#pragma once

#include "spill/arena_layout.h"  // ArenaLayout: where values sit per step, and the transfers
#include "spill/file.h"          // residency::SpillFile: the disk-backed, unlinked file
#include "spill/file_pool.h"     // SpillFilePool: one model's spill file, kept between runs
#include "spill/parking.h"       // networks::Parking: volumes away while a graph runs
#include "spill/planner.h"       // memory::plan_spills / plan_all_spilled over SpillBuffers
#include "spill/transfers.h"     // SpillTransfers: a run's transfers and streamed operands
