// What the browser module's entry points share (web_api.cpp: the network mode; web_pipeline.cpp:
// the pipeline from a scan): events posted to the Worker's JS, the heap's figures, and the JSON
// reply every entry point returns (errors as {"error", "kind"}). Defined in web_api.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace qsmcore::web {

/// Posts one event (a JSON object) to the Worker's JS, from the thread that called in only:
/// a pool thread's `Module` has no onEvent.
void post(const nlohmann::json& event);
/// A {"type": "progress", "fraction", "stage"} event.
void progress(double fraction, const std::string& stage);

/// Bytes malloc has handed out and not taken back: what the heap holds before a run.
std::int64_t heap_in_use();
/// The linear memory's size (it never shrinks: the high-water so far) and its maximum.
std::int64_t heap_bytes();
std::int64_t heap_max();

/// The page's budget in heap bytes: `budget_bytes` when positive, else the heap's maximum.
std::int64_t page_budget(const nlohmann::json& request);

/// Runs `body`, turning what it throws into {"error", "kind": "OutOfBudget" | "Error"}; adds the
/// heap's size and maximum. The text stays valid until the next call.
const char* reply_of(const std::function<void(nlohmann::json&)>& body);

}  // namespace qsmcore::web
