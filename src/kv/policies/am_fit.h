// Attention Matching's fit (METHODS.md section 4), shared by the policies
// that compact with it: `am` (its own key selection) and `kvzip-am`
// (KVzip's selection, AM's log-weights and values). Per block of entries:
// the reference queries' scores, masses and full outputs; t keys picked by
// a ranking (highest RMS attention, or scores the caller gives); their
// log-weights by NNLS on the mass, refilled when NNLS frees slots; their
// values by ridge least squares on the outputs.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kv/numerics/eigen.h"
#include "kv/policy.h"

namespace kvtrim::kernels {
class HugeScratch;  // kernels/scratch.h
}  // namespace kvtrim::kernels

namespace kvtrim::kv {

struct AmConfig {
  bool repeat = true;        // reference queries also from the repeat pass
  bool repeat_only = false;  // the repeat pass's queries alone (the prefill's only when it has none)
  int pick = 0;              // repeat_only: a token's row drawn (0) or its largest-norm one (1, the flag's default)
  int prefill_tail = 0;      // repeat_only: also the prefill's rows (all G) of the last this many tokens compacted
  double prefill_mix = 0;    // repeat_only: also the prefill's rows from this fraction of as many runs (M x (1 + it))
  int min_queries = 0;       // repeat_only, the prompt one block: fewer repeat rows: the prefill's added (at most as many)
  bool repeat_past_ctx = true;
  bool onpolicy = false;     // repeat pass re-run per layer over the compacted lower layers
  bool omp = false;          // key selection: OMP (else highest attention)
  int omp_step = 4;
  int max_queries = 4096;
  int chunk = 4096;
  double ridge = 1e-6;
  uint64_t seed = 0;
  bool refill = true;        // slots NNLS frees go to the next-best keys (Refill)
  int refill_rounds = 1;     // NNLS refits of the refill (Refill)
  int fit_rows = 0;          // rows the weights and values are fitted on (0: every reference query)
  bool fit_uniform = false;  // those rows a uniform sample (else by leverage)
  bool fit_values = true;    // refit the kept entries' values (else the originals stay)
  // Each kept key weighs at least what it stands for (its cardinality): NNLS
  // fits only the dropped entries' mass on top, so no pick is dropped.
  bool weight_floor = false;
  bool fit_weights = true;   // fit the log-weights (else each pick keeps its own cardinality)
  bool bf16 = false;         // the scores' products in bf16 (AmScoresPass; PolicyContext::bf16_products)
  kernels::ThreadPool* pool = nullptr;  // the scores pass's blocks over it (PolicyContext::pool)
  kernels::HugeScratch* scratch = nullptr;  // the [M, n] scores buffers reused from it (else fresh each block)
};

// Reference queries [M, d] (float, as the cache holds them), scaled by
// 1/sqrt(d): every row of the prefill and repeat queries, a seeded sample
// of max_queries when there are more. repeat_only: the repeat pass's rows
// alone (the prefill's when there are none), one a repeated token (its G
// query heads' rows one run, one row taken from it: the largest with pick
// 1, else a seeded draw) and at most max_queries (one row from each of
// max_queries equal runs), so every stretch of the repeated text is read;
// with prefill_mix F the prefill's rows picked the same way from F times
// as many equal runs of them, appended (a prompt compacted as one block,
// ctx.chunk_from < 0, with fewer than min_queries repeat rows: F at least
// (min_queries - rows) / rows, at most 1); then, with prefill_tail, the
// prefill's rows of the last tokens. Without
// any (no statistics), the keys themselves probe the head.
Eigen::MatrixXf AmReferenceQueries(const PolicyContext& ctx, const AmConfig& c);

// One block of entries compacted to at most t entries.
struct AmBlockFit {
  std::vector<int> keep;          // indices within the block, increasing
  std::vector<float> logw;        // [keep]
  std::vector<std::vector<float>> values;  // [keep][d] (empty: originals stay)
  int dropped = 0;                // slots left empty: min(t, distinct keys) - kept (NNLS zeros no refill replaced)
  // Where the fit's time went (microseconds, this block): the scores, the
  // full outputs and the distinct candidates; selection with NNLS and
  // refill; the values' least squares.
  int64_t scores_us = 0, select_us = 0, values_us = 0;
  int64_t nnls_ns = 0;            // the NNLS solves within select_us
  int refilled = 0;               // keys the refill rounds added that kept a positive weight
  int filled_plain = 0;           // keys added after the rounds with their own cardinality
};

// The fit of one block: queries Q [M, d], keys K and values V [n, d], the
// entries' log-weights b0 [n], to t entries. rank_scores: the order keys are
// picked and refilled in, one score per entry (higher first; a distinct
// key's is its copies' largest); null: AM's own, highest RMS attention.
AmBlockFit AmFitBlock(const Eigen::MatrixXf& Q, const Eigen::MatrixXf& K, const Eigen::MatrixXf& V,
                      const Eigen::VectorXd& b0, int t, const AmConfig& c,
                      const std::vector<double>* rank_scores = nullptr);

// The fit's counters, summed over heads and threads (Policy::Counters):
// am-dropped, am-refilled, am-filled-plain, am-scores-us, am-select-us,
// am-nnls-us, am-values-us.
class AmFitCounters {
 public:
  void Add(const AmBlockFit& f);
  int64_t dropped() const { return dropped_.load(); }
  std::vector<std::pair<std::string, int64_t>> List() const;

 private:
  std::atomic<int64_t> dropped_{0}, refilled_{0}, filled_plain_{0};
  std::atomic<int64_t> scores_us_{0}, select_us_{0}, nnls_us_{0}, values_us_{0};
};

// The first entry of the chunk being compressed (positions >= chunk_from,
// the last ones held) in a prompt prefilled in chunks; 0 otherwise.
int AmChunkStart(const PolicyContext& ctx);

// The first entry of a conversation's newest turn, held whole (positions >=
// hold_from, the last ones held); the head's size without a hold.
int AmHoldStart(const PolicyContext& ctx);

// Entries [i0, i1) of the head fitted to t entries (AmFitBlock, the same
// rank_scores, indexed from i0) and appended to the plan; the fit counted.
void AmCompactBlock(const HeadStore& s, int i0, int i1, const Eigen::MatrixXf& Q, int t, const AmConfig& c,
                    const std::vector<double>* rank_scores, AmFitCounters* counters, Plan* plan);

}  // namespace kvtrim::kv
