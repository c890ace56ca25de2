// Seeded noise for the weights of shape models (model/shape_models.h): each
// row of a tensor has its own stream, derived from (seed, tensor name, row),
// so the values do not depend on the order tensors are written in.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/ggml_types.h"
#include "io/gguf_writer.h"

namespace kvtrim::model {

struct NoiseSpec {
  uint64_t seed = 1;
  float std = 0.02f;  // spread: approximately normal (sum of 4 uniforms), mean `mean`
  float mean = 0.f;
  bool constant = false;  // every value `mean` (norm weights)
};

// Row `row` of tensor `name` (n floats) as the noise gives it.
void NoiseRow(const NoiseSpec& s, const std::string& name, uint64_t row, float* out, int n);

// A producer that writes `rows` rows of `cols` noise values, quantized to
// `type` with kernels::QuantizeRow, in pieces of about 1 MiB.
io::GgufWriter::Producer NoiseProducer(NoiseSpec s, std::string name, uint64_t rows, int cols, GgmlType type);

}  // namespace kvtrim::model
