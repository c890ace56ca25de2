// Attention Matching's scores (am_fit.h): what the fit needs of the
// reference queries' attention over a block in one pass over blocks of
// query rows, each block's scores, exponentials and products staying in the
// core's cache: the masses, the full outputs, the keys' ranking, and the
// scores themselves (one [M, n] float matrix, written once). The attention
// columns of the keys the fit tries are computed from those scores when the
// selection and the refill first read them.
#pragma once
#include <vector>

#include "kv/numerics/eigen.h"

namespace kvtrim::kernels {
class ThreadPool;  // kernels/thread_pool.h
}  // namespace kvtrim::kernels

namespace kvtrim::kv {

// Per reference query q: s_q (the largest score, with or without the
// entries' log-weights), the mass m(q) = sum_j exp(q.k_j + b_j - s_q) and
// the full output Y_q = sum_j exp(...) v_j / m(q); per distinct key u (when
// asked): sum_q (W_qu / m(q))^2 with W_qu its copies' attention weights,
// monotone in the key's RMS attention.
struct AmScores {
  Eigen::VectorXf shift_f;  // [M]
  Eigen::VectorXd shift;    // [M] the same, double
  Eigen::VectorXd mass;     // [M] (0 only if every b underflows)
  Eigen::MatrixXd Y;        // [M, d] (0 for a massless query)
  Eigen::VectorXf rms;      // [nu] empty when not asked
};

// Queries Q [M, d] (already scaled by 1/sqrt(d)), keys K and values V
// [n, d], log-weights b0 [n]; of[i] the distinct key of entry i (nu of
// them). Scores in float, sums over keys in double. The scores q.k (before
// b0) go to S [M, n] (sized by the caller), for the columns the fit reads.
// bf16 (where kernels::HasBf16Tiles and Bf16TileDim(d); else ignored): the
// two products, Q K^T and the exponentials times V, in the bf16 tiles of
// kernels/attention_bf16.h (operands rounded to bf16, f32 sums), the
// reference pass's arithmetic; the masses, the ranking and every column the
// fit reads come from the same stored scores, so the fit stays consistent
// with its targets.
// pool: the blocks of query rows spread over it (the same numbers, bit for
// bit, as without it); not from within one of its loops.
AmScores AmScoresPass(const Eigen::MatrixXf& Q, const Eigen::MatrixXf& K, const Eigen::MatrixXf& V,
                      const Eigen::VectorXd& b0, const std::vector<int>& of, int nu, bool rank,
                      Eigen::Ref<Eigen::MatrixXf> S, bool bf16 = false, kernels::ThreadPool* pool = nullptr);
// Whether AmScoresPass(..., bf16 = true) runs its products in bf16 here.
bool AmScoresBf16(int head_dim);

// The attention columns of distinct keys, A_qu = row_scale_q exp(S_qu - s_q)
// (float, as the pass's exponentials), from the scores S [M, n] (every
// reference query's, or the rows a sample keeps, scaled by row_scale), key u
// standing for entry rep[u]: each computed when the selection or the refill
// first reads it (a head picks t of n keys and tries about 4t), kept until
// the object goes. S and rep must outlive it.
class AmColumns {
 public:
  AmColumns(Eigen::Ref<const Eigen::MatrixXf> S, const std::vector<int>& rep, Eigen::VectorXf shift,
            Eigen::VectorXf row_scale);
  const Eigen::VectorXf& A(int u);
  auto S(int u) const { return S_.col(rep_[u]); }
  int rows() const { return static_cast<int>(S_.rows()); }
  int computed() const { return computed_; }

 private:
  Eigen::Ref<const Eigen::MatrixXf> S_;
  const std::vector<int>& rep_;
  Eigen::VectorXf shift_;
  Eigen::VectorXf row_scale_;  // empty: 1
  std::vector<Eigen::VectorXf> a_;  // [nu], empty until computed
  int computed_ = 0;
};

}  // namespace kvtrim::kv
