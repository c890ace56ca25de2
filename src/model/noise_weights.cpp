#include "model/noise_weights.h"

#include <algorithm>
#include <cmath>

#include "io/splitmix.h"
#include "kernels/quant.h"

namespace kvtrim::model {
namespace {

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

}  // namespace

void NoiseRow(const NoiseSpec& s, const std::string& name, uint64_t row, float* out, int n) {
  if (s.constant) {
    std::fill(out, out + n, s.mean);
    return;
  }
  uint64_t state = s.seed ^ Fnv1a(name);
  state ^= io::SplitMix64(state) + row * 0xD1B54A32D192ED03ull;
  // Irwin-Hall with 4 terms: sum of four uniforms in [0, 1), mean 2, variance 1/3.
  const float scale = s.std * std::sqrt(3.f) / 65536.f, center = 2.f * 65536.f;
  for (int i = 0; i < n; ++i) {
    const uint64_t z = io::SplitMix64(state);
    const float sum = static_cast<float>((z & 0xFFFF) + ((z >> 16) & 0xFFFF) + ((z >> 32) & 0xFFFF) + (z >> 48));
    out[i] = s.mean + (sum - center) * scale;
  }
}

io::GgufWriter::Producer NoiseProducer(NoiseSpec s, std::string name, uint64_t rows, int cols, GgmlType type) {
  return [s, name = std::move(name), rows, cols, type](const io::GgufWriter::Sink& sink) -> Status {
    const size_t row_bytes = RowBytes(type, static_cast<size_t>(cols));
    const uint64_t rows_per_piece = std::max<uint64_t>(1, (size_t{1} << 20) / row_bytes);
    std::vector<float> x(static_cast<size_t>(cols));
    std::vector<uint8_t> buf;
    for (uint64_t r0 = 0; r0 < rows; r0 += rows_per_piece) {
      const uint64_t nr = std::min(rows_per_piece, rows - r0);
      buf.resize(nr * row_bytes);
      for (uint64_t r = 0; r < nr; ++r) {
        NoiseRow(s, name, r0 + r, x.data(), cols);
        kernels::QuantizeRow(type, x.data(), buf.data() + r * row_bytes, cols);
      }
      KVTRIM_RETURN_IF_ERROR(sink(buf.data(), buf.size()));
    }
    return {};
  };
}

}  // namespace kvtrim::model
