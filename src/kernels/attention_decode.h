// Decode attention over entries stored in another type than f32, in one
// home: each KV head's entries cut into chunks, the (head, chunk) pairs
// shared by the threads (SmolLM2's 3 KV heads would leave one of 2 threads
// idle a third of the time), a chunk computed by the AVX-512 kernel
// (attention_decode_avx512.h) or the AVX2 one (attention_decode.cpp: tiles
// of entries dequantized once), the chunks of a head merged by their score
// maxima and softmax sums. The f32 cache and
// taps keep AttendOne (attention.h), the reference kernel.
#pragma once
#include <vector>

#include "kernels/attention.h"
#include "kernels/thread_pool.h"

namespace kvtrim::kernels {

// One decode step of a layer: heads[h] the entries of KV head h, q [H * G,
// d] (G query heads per KV head, contiguous), att [H * G, d]. A head with
// no entry gives zeros.
void AttendDecode(ThreadPool& pool, const std::vector<KvView>& heads, const float* q, int G, float scale, float* att);

// Entries per chunk of a split decode: at most kDecodeChunk, and short
// enough that n_heads heads of n_max entries give each of `threads` threads
// at least two chunks (a compressed cache of 800 entries a head, 3 heads, 2
// threads: 6 chunks of 136, not 3 of 800), but no shorter than
// kMinDecodeChunk; a multiple of 32 (the kernel's tile).
inline constexpr int kDecodeChunk = 1024;
inline constexpr int kMinDecodeChunk = 128;
int DecodeChunkLength(int n_max, int n_heads, int threads);
// Chunks of length L that cover n entries: ceil(n / L), at least 1.
int DecodeChunks(int n, int L);
// One decode step over chunk c of length L of a head (the entries of
// SubView(kv, c * L, ...)): an online softmax over tiles of entries (the
// AVX-512 kernel where DecodeAvx512Active, else tiles of 32 dequantized once
// on AVX2, else AttendCausalMl with T = 1; q8_0/q4_0 keys in int8 against
// the quantized query where DecodeQueryInt8), so out [G, d] is normalized
// over the chunk and ml [G * 2] holds
// each row's score max and softmax sum. Writes no probabilities (a tap
// needs AttendOne).
void AttendChunk(const KvView& kv, int c, int L, const float* q, int G, float scale, float* out, float* ml);
// The output over all chunks from the chunks' outputs ([chunks][G, d]) and
// maxima and sums ([chunks][G * 2]): each chunk weighted by
// exp(m_c - max) * l_c, divided by the total (the online softmax's merge).
void MergeChunks(const float* outs, const float* mls, int chunks, int G, int d, float* out);

}  // namespace kvtrim::kernels
