// exp over an array of doubles, vectorized. Eigen's exp of doubles ran one
// libm call per element in this build (a quarter of Attention Matching's
// fit in a profile, round 5); Sleef (Debian libsleef-dev, already the
// softmax's exp) has a 4-lane double exp within 1.0 ULP, so nothing is
// written by hand but the loop.
#pragma once
#include <cstddef>

#include "kv/numerics/eigen.h"

namespace kvtrim::kv::numerics {

// x[i] = exp(x[i]) for i < n.
void ExpInPlace(double* x, size_t n);

// exp(S(q, j) - shift(q)) for every entry of S (column-major [M, n]), in place.
void ExpShiftRowsInPlace(Eigen::MatrixXd* S, const Eigen::VectorXd& shift);

// The same in float (Sleef's 8-lane float exp, within 1.0 ULP): Attention
// Matching's [M, n] attention matrices, whose scores are float to begin with.
void ExpInPlace(float* x, size_t n);
void ExpShiftRowsInPlace(Eigen::MatrixXf* S, const Eigen::VectorXf& shift);

}  // namespace kvtrim::kv::numerics
