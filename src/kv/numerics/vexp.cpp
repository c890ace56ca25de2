#include "kv/numerics/vexp.h"

#include <cmath>

#if defined(__AVX2__) && defined(KVTRIM_HAVE_SLEEF)
#include <sleef.h>
#define KVTRIM_VEXP_AVX2 1
#endif

namespace kvtrim::kv::numerics {

void ExpInPlace(double* x, size_t n) {
  size_t i = 0;
#ifdef KVTRIM_VEXP_AVX2
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(x + i, Sleef_expd4_u10avx2(_mm256_loadu_pd(x + i)));
#endif
  for (; i < n; ++i) x[i] = std::exp(x[i]);
}

void ExpShiftRowsInPlace(Eigen::MatrixXd* S, const Eigen::VectorXd& shift) {
  S->colwise() -= shift;
  ExpInPlace(S->data(), static_cast<size_t>(S->size()));
}

void ExpInPlace(float* x, size_t n) {
  size_t i = 0;
#ifdef KVTRIM_VEXP_AVX2
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, Sleef_expf8_u10avx2(_mm256_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) x[i] = std::exp(x[i]);
}

void ExpShiftRowsInPlace(Eigen::MatrixXf* S, const Eigen::VectorXf& shift) {
  S->colwise() -= shift;
  ExpInPlace(S->data(), static_cast<size_t>(S->size()));
}

}  // namespace kvtrim::kv::numerics
