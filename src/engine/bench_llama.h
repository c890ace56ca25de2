// Part of the public API: kvtrim/bench_llama.h.
#pragma once
#include "kvtrim/bench_llama.h"
