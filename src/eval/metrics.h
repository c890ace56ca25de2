// Fidelity metrics between next-token distributions: KL divergence
// (full || compressed) and negative log-likelihoods; mean and standard error.
#pragma once
#include <cstddef>
#include <vector>

namespace kvtrim::eval {

// KL(softmax(p) || softmax(q)) of two logit rows of length n, in nats.
double KlDivergence(const float* p_logits, const float* q_logits, size_t n);
// -log softmax(logits)[target], in nats.
double Nll(const float* logits, size_t n, int target);

// Mean NLL of tokens[1..] under the rows [tokens.size(), V] of their own
// forward pass (row i predicts token i + 1): NLL(c) of a context. NaN for
// fewer than two tokens.
double MeanNextTokenNll(const std::vector<float>& rows, const std::vector<int>& tokens, size_t V);

struct MeanSe {
  double mean = 0, se = 0;
  int n = 0;
};
// Mean and standard error (sample sd / sqrt(n); 0 for n < 2). NaNs skipped.
MeanSe Summarize(const std::vector<double>& xs);

}  // namespace kvtrim::eval
