#include "kv/numerics/eigen.h"  // first: Eigen's AVX-512 warnings silenced before <immintrin.h> comes in
#include "model/output_gram.h"

#include "kernels/quant.h"

namespace kvtrim::model {

std::vector<float> OutputGrams(const ModelConfig& c, const Weights& w) {
  const int D = c.dim, hd = c.head_dim, H = c.n_head, q_dim = H * hd;
  const size_t per_head = static_cast<size_t>(hd) * hd;
  for (int l = 0; l < c.n_layer; ++l)
    if (w.layers[l].wo.rows != D || w.layers[l].wo.cols != q_dim) return {};  // not the shape this reads
  std::vector<float> out(static_cast<size_t>(c.n_layer) * H * per_head);
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowMajor W(D, q_dim);  // W_o dequantized: [D rows (output), q_dim columns (attention output)]
  for (int l = 0; l < c.n_layer; ++l) {
    const kernels::WeightView& wo = w.layers[l].wo;
    kernels::DequantRows(wo.type, wo.data, wo.row_bytes(), D, W.data(), q_dim);
    for (int q = 0; q < H; ++q) {
      Eigen::Map<RowMajor> M(out.data() + (static_cast<size_t>(l) * H + q) * per_head, hd, hd);
      M.noalias() = W.middleCols(q * hd, hd).transpose() * W.middleCols(q * hd, hd);
    }
  }
  return out;
}

}  // namespace kvtrim::model
