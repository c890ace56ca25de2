// Attention Matching's scores pass and attention columns (am_scores.h).
//
// The whole-block form held S and exp(S) as two [M, n] float matrices (32
// MiB each for 4,096 queries over 2,048 entries) and read them about ten
// times; over blocks of kRows queries the products, exponentials and sums
// run in the core's cache and S is written once, and only the columns the
// fit tries (about half of them) are exponentiated again. Nothing here is
// hand-written numerics: Eigen's GEMMs (or the reference pass's bf16 tiles)
// and the Sleef exp of numerics/vexp.h.
#include "kv/policies/am_scores.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/attention_bf16.h"
#include "kernels/thread_pool.h"
#include "kv/numerics/vexp.h"

namespace kvtrim::kv {

using Eigen::MatrixXf;
using Eigen::VectorXd;
using Eigen::VectorXf;

namespace {

constexpr int kRows = 128;  // query rows a block: [kRows, n] floats, 1 MiB at n = 2,048

using RowMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The sum over the block's rows of (W_qu / m(q))^2 per distinct key, added to *rms.
void AddRms(const MatrixXf& E, const VectorXd& safe, const std::vector<int>& of, int nu, MatrixXf* W, VectorXf* rms) {
  const VectorXf inv = safe.cwiseInverse().cast<float>();  // [b]
  if (nu == E.cols()) {  // every key distinct (of[i] == i): a dot product a column
    for (int j = 0; j < E.cols(); ++j) (*rms)(j) += E.col(j).cwiseProduct(inv).squaredNorm();
    return;
  }
  W->setZero(E.rows(), nu);
  for (int i = 0; i < E.cols(); ++i) W->col(of[i]) += E.col(i).cwiseProduct(inv);
  *rms += W->colwise().squaredNorm().transpose();
}

// The products of the bf16 path (kernels/attention_bf16.h), each computed
// transposed so that the tiles write the column-major blocks the rest of
// the pass reads: the block's scores E^T = K Q_b^T (the keys as the tiles'
// rows, the block's queries as their panel) and its outputs Y_b^T = V^T E^T
// (V^T's rows against the exponentials as the panel). The keys are packed
// once for every block; V^T's rows are rounded as the tiles read them.
class Bf16Products {
 public:
  Bf16Products(const MatrixXf& K, const MatrixXf& V)
      : n_(static_cast<int>(K.rows())), d_(static_cast<int>(K.cols())), Vt_(V.transpose()),
        kp_(static_cast<size_t>(n_) * d_ / 2), pp_(static_cast<size_t>(d_) * ((n_ + 1) / 2)) {
    const RowMatrixXf Kr = K;
    kernels::PackRowsBf16(Kr.data(), n_, d_, d_, kp_.data());
  }
  // E [b, n] (column-major) = Q_b K^T. The tiles' panels are a multiple of
  // 32 wide: a block of another size (the last one) is padded with zero
  // queries, their rows dropped.
  void Scores(const MatrixXf& Q, int i0, int b, MatrixXf* E) {
    const int bp = Padded(b);
    RowMatrixXf Qb = RowMatrixXf::Zero(bp, d_);
    Qb.topRows(b) = Q.middleRows(i0, b);
    qpanel_.resize(kernels::Bf16KeyPanelWords(bp, d_));
    kernels::PackKeysBf16(Qb.data(), bp, d_, qpanel_.data());
    MatrixXf& out = bp == b ? *E : pad_;
    out.resize(bp, n_);
    kernels::ScoresBf16(kp_.data(), n_, qpanel_.data(), bp, d_, out.data(), bp);
    if (bp != b) *E = pad_.topRows(b);
  }
  // Yb [b, d] = E V, from E's exponentials [b, n].
  void Outputs(const MatrixXf& E, MatrixXf* Yb) {
    const int b = static_cast<int>(E.rows()), bp = Padded(b);
    const float* e = E.data();
    if (bp != b) {
      pad_.setZero(bp, n_);
      pad_.topRows(b) = E;
      e = pad_.data();
    }
    epanel_.resize(kernels::Bf16ValuePanelWords(n_, bp));
    kernels::PackValuesBf16(e, n_, bp, epanel_.data());  // E^T's rows: an entry's bp exponentials
    Yt_.setZero(d_, bp);
    kernels::AccumulatePvBf16(Vt_.data(), d_, n_, epanel_.data(), n_, bp, Yt_.data(), bp, pp_.data());
    *Yb = Yt_.leftCols(b).transpose();
  }

 private:
  static int Padded(int b) { return (b + 31) / 32 * 32; }
  int n_, d_;
  RowMatrixXf Vt_, Yt_;  // [d, n]; [d, b]
  MatrixXf pad_;         // a padded block's scores or exponentials
  std::vector<uint32_t> kp_, pp_, qpanel_, epanel_;
};

}  // namespace

bool AmScoresBf16(int head_dim) { return kernels::HasBf16Tiles() && kernels::Bf16TileDim(head_dim); }

AmScores AmScoresPass(const MatrixXf& Q, const MatrixXf& K, const MatrixXf& V, const VectorXd& b0,
                      const std::vector<int>& of, int nu, bool rank, Eigen::Ref<MatrixXf> S, bool bf16,
                      kernels::ThreadPool* pool) {
  const int M = static_cast<int>(Q.rows()), n = static_cast<int>(K.rows());
  const bool plain_b = (b0.array() == 0.0).all();  // fresh entries (a prefill's): S + b0 is S
  const Eigen::RowVectorXf b0f = b0.cast<float>().transpose();
  AmScores r{VectorXf(M), VectorXd(M), VectorXd(M), Eigen::MatrixXd(M, V.cols()), VectorXf()};
  const bool tiles_on = bf16 && AmScoresBf16(static_cast<int>(K.cols()));
  const int blocks = (M + kRows - 1) / kRows;
  // Each block's share of the keys' sums of squares, added in block order
  // below: the same sums, bit for bit, whether the blocks ran on one thread
  // or several.
  std::vector<VectorXf> rms_part(rank ? blocks : 0);
  auto run = [&](int64_t first, int64_t last) {
    std::optional<Bf16Products> tiles;  // a thread's own buffers (the keys packed once a thread)
    if (tiles_on) tiles.emplace(K, V);
    MatrixXf E, Yb, W;  // [b, n] scores then their exponentials; [b, d]; [b, nu]
    for (int64_t blk = first; blk < last; ++blk) {
      const int i0 = static_cast<int>(blk) * kRows, b = std::min(kRows, M - i0);
      if (tiles) tiles->Scores(Q, i0, b, &E);
      else E.noalias() = Q.middleRows(i0, b) * K.transpose();
      S.middleRows(i0, b) = E;
      // s_q: the largest score with or without the entries' own b, so neither
      // the target nor a candidate column can overflow.
      VectorXf sh = E.rowwise().maxCoeff();
      if (!plain_b) {
        E.rowwise() += b0f;
        sh = sh.cwiseMax(E.rowwise().maxCoeff());
      }
      numerics::ExpShiftRowsInPlace(&E, sh);
      VectorXd m = VectorXd::Zero(b);
      for (int j = 0; j < n; ++j) m += E.col(j).cast<double>();
      const VectorXd safe = m.cwiseMax(std::numeric_limits<double>::min());
      if (tiles) tiles->Outputs(E, &Yb);
      else Yb.noalias() = E * V;
      r.Y.middleRows(i0, b) = Yb.cast<double>().array().colwise() / safe.array();
      r.shift_f.segment(i0, b) = sh;
      r.mass.segment(i0, b) = m;
      if (rank) {
        rms_part[blk] = VectorXf::Zero(nu);
        AddRms(E, safe, of, nu, &W, &rms_part[blk]);
      }
    }
  };
  if (pool) pool->ParallelFor(blocks, run);
  else run(0, blocks);
  if (rank) {
    r.rms = VectorXf::Zero(nu);
    for (const VectorXf& part : rms_part) r.rms += part;
  }
  r.shift = r.shift_f.cast<double>();
  return r;
}

AmColumns::AmColumns(Eigen::Ref<const MatrixXf> S, const std::vector<int>& rep, VectorXf shift, VectorXf row_scale)
    : S_(S), rep_(rep), shift_(std::move(shift)), row_scale_(std::move(row_scale)), a_(rep.size()) {}

// exp(S_qu - s_q) in float as the scores pass's exponentials (the masses and
// outputs the fit matches) from the same scores: a column whose key alone
// carries a query's mass equals that mass exactly, so NNLS fits no rounding
// with other keys.
const VectorXf& AmColumns::A(int u) {
  VectorXf& a = a_[u];
  if (a.size() == 0) {
    a = S_.col(rep_[u]) - shift_;
    numerics::ExpInPlace(a.data(), static_cast<size_t>(a.size()));
    if (row_scale_.size()) a.array() *= row_scale_.array();
    ++computed_;
  }
  return a;
}

}  // namespace kvtrim::kv
