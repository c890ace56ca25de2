// The decode kernels over stored entries (kernels/attention_decode.h): how
// a head is cut into chunks for the threads, and every kernel path (the
// AVX2 one, the AVX-512 one where the CPU has it) against the float64
// reference (kernels/ref) over the same entries, for every storage type,
// several head sizes and query groups, and lengths with partial tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/attention_decode_avx512.h"
#include "kernels/cpu.h"
#include "kernels/ref/attention_ref.h"
#include "kv/cache.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// How heads are cut for the threads: every thread gets two chunks or more
// where the entries allow it, chunks stay within [128, 1024] and multiples of 32.
TEST(AttentionDecode, ChunksShareTheHeadsAmongTheThreads) {
  EXPECT_EQ(kernels::DecodeChunkLength(8000, 3, 2), 1024);  // 8 chunks a head
  EXPECT_EQ(kernels::DecodeChunks(8000, 1024), 8);
  EXPECT_EQ(kernels::DecodeChunkLength(800, 3, 2), 416);  // 2 a head: 6 for 2 threads
  EXPECT_EQ(kernels::DecodeChunks(800, 416), 2);
  EXPECT_EQ(kernels::DecodeChunkLength(800, 1, 4), 128);  // 8 wanted: 100 each, raised to the minimum
  EXPECT_EQ(kernels::DecodeChunks(800, 128), 7);
  EXPECT_EQ(kernels::DecodeChunkLength(100, 8, 2), 128);
  EXPECT_EQ(kernels::DecodeChunks(100, 128), 1);
  EXPECT_EQ(kernels::DecodeChunks(0, 128), 1);
}

struct PathGuard {
  explicit PathGuard(kernels::KernelPath p) : old(kernels::SetKernelPath(p)) {}
  ~PathGuard() { kernels::SetKernelPath(old); }
  kernels::KernelPath old;
};

// The query as the int8 kernel sees it (DecodeQueryInt8): each block of 32
// quantized with scale amax / 127 and codes rounded to nearest, in f32.
std::vector<float> QueryAsInt8(const float* q, int d) {
  std::vector<float> out(q, q + d);
  for (int b = 0; b < d / 32; ++b) {
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(q[32 * b + i]));
    const float dq = amax / 127.f, inv = dq > 0.f ? 1.f / dq : 0.f;
    for (int i = 0; i < 32; ++i) out[32 * b + i] = static_cast<float>(std::lrint(q[32 * b + i] * inv)) * dq;
  }
  return out;
}

struct Entries {
  std::vector<std::vector<float>> keys, values;
  std::vector<float> logw;
};

// n entries of head size d stored in type t, log-weights 0 or -1.5 and one -inf.
Entries Fill(kv::HeadStore& h, int n, int d, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> k(d), v(d);
  for (int j = 0; j < n; ++j) {
    for (float& x : k) x = nd(rng);
    for (float& x : v) x = nd(rng);
    h.Append(k.data(), v.data(), j, j % 7 == 0 ? -1.5f : 0.f);
  }
  if (n > 1) h.set_logw(n / 2, -INFINITY);  // an entry with no weight
  Entries e{std::vector<std::vector<float>>(n, std::vector<float>(d)),
            std::vector<std::vector<float>>(n, std::vector<float>(d)), std::vector<float>(n)};
  for (int j = 0; j < n; ++j) h.ReadKey(j, e.keys[j].data()), h.ReadValue(j, e.values[j].data()), e.logw[j] = h.logw(j);
  return e;
}

// The split decode (chunks merged) of one head.
std::vector<float> SplitDecode(const kv::HeadStore& h, int n, const std::vector<float>& q, int G, float scale) {
  const int d = static_cast<int>(q.size()) / G;
  const int L = kernels::DecodeChunkLength(n, 3, 2), C = kernels::DecodeChunks(n, L);
  std::vector<float> outs(static_cast<size_t>(C) * G * d), mls(static_cast<size_t>(C) * G * 2), out(G * d);
  for (int c = 0; c < C; ++c)
    kernels::AttendChunk(h.View(), c, L, q.data(), G, scale, &outs[static_cast<size_t>(c) * G * d],
                         &mls[static_cast<size_t>(c) * G * 2]);
  kernels::MergeChunks(outs.data(), mls.data(), C, G, d, out.data());
  return out;
}

// The int16 weights' share of the error where the AVX-512 kernel computes
// P.V in integers (DecodeQueryInt8's cases), for the values of block b:
// in a tile each weight p_j sv_j (sv the value block's scale) is off by at
// most half a unit, the tile's largest / 32767, so a chunk's normalized
// output moves by at most sum_j max_{tile of j} (P_j |sv_j|) |code_ji| /
// 65534 (P normalized over the chunk), and |sv_j code| is at most the
// block's largest |value|. The tiles (64 entries or fewer, from the chunk's
// start) are covered by each entry's window of 63 on either side; merging
// chunks averages their errors, so the largest chunk's sum bounds it.
double PvInt16Bound(const std::vector<double>& p, const Entries& e, int n, int b) {
  const int L = kernels::DecodeChunkLength(n, 3, 2);
  std::vector<double> a(n);  // P_j times the block's largest |value|
  double worst = 0.0;
  for (int c0 = 0; c0 < n; c0 += L) {
    const int c1 = std::min(n, c0 + L);
    double mass = 0.0;
    for (int j = c0; j < c1; ++j) mass += p[j];
    for (int j = c0; j < c1; ++j) {
      double amax = 0.0;
      for (int i = 32 * b; i < 32 * b + 32; ++i) amax = std::max(amax, static_cast<double>(std::fabs(e.values[j][i])));
      a[j] = mass > 0.0 ? p[j] / mass * amax : 0.0;
    }
    double sum = 0.0;
    for (int j = c0; j < c1; ++j)
      sum += *std::max_element(a.begin() + std::max(c0, j - 63), a.begin() + std::min(c1, j + 64));
    worst = std::max(worst, sum / 65534.0);
  }
  return worst;
}

// Every path, type, shape and length against the float64 reference over the
// stored entries, with the query the kernel multiplies (its int8 form where
// the kernel quantizes it). AttendOne with a tap (the probabilities too)
// where the shape is SmolLM2's.
TEST(AttentionDecode, EveryPathEqualsTheFloat64Reference) {
  std::vector<kernels::KernelPath> paths{kernels::KernelPath::kAvx2};
  if (kernels::BestKernelPath() == kernels::KernelPath::kAvx512) paths.push_back(kernels::KernelPath::kAvx512);
  struct Shape {
    int d, G;
  };
  for (kernels::KernelPath path : paths) {
    PathGuard guard(path);
    int int8_cases = 0;
    for (Shape sh : {Shape{64, 3}, Shape{128, 7}, Shape{32, 1}, Shape{64, 7}, Shape{64, 4}, Shape{32, 5}, Shape{96, 6},
                      Shape{64, 12}, Shape{256, 2}}) {
      const int d = sh.d, G = sh.G;
      const float scale = 1.f / std::sqrt(static_cast<float>(d));
      std::mt19937 rng(5 + d);
      std::normal_distribution<float> nd;
      std::vector<float> q(G * d);
      for (float& x : q) x = nd(rng);
      for (int n : {1, 17, 700, 2 * kernels::kDecodeChunk + 300}) {
        for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
          kv::HeadStore h(d, t);
          const Entries e = Fill(h, n, d, rng);
          const bool int8 = kernels::DecodeQueryInt8(t, d);
          int8_cases += int8;
          const std::string what = std::string(kernels::KernelPathName(path)) + " d " + std::to_string(d) + " n " +
                                   std::to_string(n) + " type " + std::to_string(static_cast<int>(t));
          const std::vector<float> out = SplitDecode(h, n, q, G, scale);
          std::vector<std::vector<double>> ref_p(G);
          for (int g = 0; g < G; ++g) {
            std::vector<float> qg(q.begin() + g * d, q.begin() + (g + 1) * d);
            if (int8) qg = QueryAsInt8(qg.data(), d);
            const auto ref = kernels::ref::Attend(qg, e.keys, e.values, e.logw, scale, &ref_p[g]);
            std::vector<double> pv_bound(d / 32, 0.0);
            if (int8)
              for (int b = 0; b < d / 32; ++b) pv_bound[b] = PvInt16Bound(ref_p[g], e, n, b);
            for (int i = 0; i < d; ++i)
              ASSERT_NEAR(out[g * d + i], ref[i], 2e-5 + 2e-5 * std::fabs(ref[i]) + pv_bound[i / 32])
                  << what << " g" << g << " " << i;
          }
          if (d != 64 || int8) continue;
          std::vector<float> one(G * d), scratch(static_cast<size_t>(G) * n);
          int tiles = 0;
          kernels::TileObserver obs = [&](const kernels::ProbTile& tile) {
            ++tiles;
            for (int g = 0; g < G; ++g)
              for (int j = 0; j < n; ++j) ASSERT_NEAR(tile.Row(0, g)[j], ref_p[g][j], 1e-6) << what << " g" << g;
          };
          kernels::AttendOne(h.View(), q.data(), G, scale, one.data(), scratch.data(), &obs);
          EXPECT_EQ(tiles, 1);
        }
      }
    }
    // The int8 form is among the cases where the build has the AVX-512 kernel.
    if (path == kernels::KernelPath::kAvx512 && kernels::DecodeAvx512Active()) {
      EXPECT_GT(int8_cases, 0);
    }
  }
}

// The int8 query's cost in the answer, bounded from the quantization: each
// score moves by at most delta = scale * sum_i |k_i| dq_b(i) / 2, so every
// probability p_j by a factor within exp(+-2 delta) and output dimension i
// by at most (exp(2 delta) - 1) sum_j p_j |v_ji|. Checked against the
// unquantized query's float64 output on q8_0 and q4_0 keys.
TEST(AttentionDecode, Int8QueryStaysWithinItsQuantizationBound) {
  const int d = 64, G = 3, n = 700;
  PathGuard guard(kernels::BestKernelPath());
  if (!kernels::DecodeQueryInt8(GgmlType::Q8_0, d)) GTEST_SKIP() << "no AVX512-VNNI decode kernel in this build/CPU";
  const float scale = 0.125f;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  std::vector<float> q(G * d);
  for (float& x : q) x = nd(rng);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    kv::HeadStore h(d, t);
    const Entries e = Fill(h, n, d, rng);
    const std::vector<float> out = SplitDecode(h, n, q, G, scale);
    double worst = 0.0;
    for (int g = 0; g < G; ++g) {
      const std::vector<float> qg(q.begin() + g * d, q.begin() + (g + 1) * d);
      double delta = 0.0;
      for (int j = 0; j < n; ++j) {
        double dj = 0.0;
        for (int b = 0; b < d / 32; ++b) {
          float amax = 0.f;
          for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(qg[32 * b + i]));
          for (int i = 0; i < 32; ++i) dj += std::fabs(e.keys[j][32 * b + i]) * amax / 127.0 / 2.0;
        }
        delta = std::max(delta, scale * dj);
      }
      std::vector<double> p;
      const auto ref = kernels::ref::Attend(qg, e.keys, e.values, e.logw, scale, &p);
      for (int i = 0; i < d; ++i) {
        double mean_abs = 0.0;
        for (int j = 0; j < n; ++j) mean_abs += p[j] * std::fabs(e.values[j][i]);
        const double bound = (std::exp(2.0 * delta) - 1.0) * mean_abs + 1e-5;
        const double err = std::fabs(out[g * d + i] - ref[i]);
        ASSERT_LE(err, bound) << "type " << static_cast<int>(t) << " g" << g << " " << i;
        worst = std::max(worst, err / bound);
      }
    }
    std::printf("int8 query, type %d: largest error %.3f of its bound\n", static_cast<int>(t), worst);
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
