// Layer partition across pipeline stages: contiguous, covering, non-empty ranges. By default the
// split minimizes the heaviest stage's weight bytes (the output head counts for the last stage: it is
// a matrix product every token; the embedding is only looked up, so it does not count).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_weights.h"

namespace glacier::pipeline {

// Throws InputError when n_stages exceeds the layer count.
std::vector<model::LayerRange> partition_by_bytes(const model::WeightBytes& bytes, int n_stages);

// Parses "--layers 0:2,2:5" and checks it: one range per stage, contiguous from 0 to n_layer,
// each non-empty. Throws InputError naming the option, the expected and the found value.
std::vector<model::LayerRange> parse_layer_split(const std::string& spec, int32_t n_layer, int n_stages);

// "0:2,2:5"
std::string format_layer_split(const std::vector<model::LayerRange>& split);

// Bytes each stage holds under a split (for logs and traces).
std::vector<uint64_t> stage_bytes(const model::WeightBytes& bytes, const std::vector<model::LayerRange>& split);

}  // namespace glacier::pipeline
