// The process's memory allocator, set for an engine that allocates and frees
// buffers of megabytes per head and chunk (Attention Matching's fit, the
// reference pass's copy of the cache, a prefill's activations).
//
// With glibc's defaults such a buffer above the mmap threshold is mapped
// fresh and unmapped on free, and a freed heap top is trimmed back to the
// system, so its pages fault and are zeroed by the kernel again at every
// use. TuneAllocator keeps what is freed for reuse instead: buffers under
// 32 MiB (the most glibc allows) come from the heap, and up to 256 MiB freed
// at a heap's top stays there. Measured on the SmolLM2-135M shape at 8k
// (Attention Matching on-policy, chunked; four runs each, alternated): the
// compression 1.51-1.57 -> 1.36-1.42 prefills, the whole process's wall time
// 0.93x (median of three pairs), its peak RSS 670 -> 676 MiB
// (docs/prefill-chunk.md). The trim threshold alone is far slower than the
// defaults (3.06-3.07 prefills: every megabyte buffer mapped afresh).
//
// A process-wide setting: the library never makes it by itself. The `kvtrim`
// CLI calls it for every command but `serve` (a long-lived process would
// keep up to 256 MiB of freed heap an arena); an embedding program may.
// Returns false where the allocator is not glibc's (nothing changed).
#pragma once

namespace kvtrim {

bool TuneAllocator();

}  // namespace kvtrim
