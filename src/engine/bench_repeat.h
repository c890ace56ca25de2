// Part of the public API: kvtrim/bench_repeat.h.
#pragma once
#include "kvtrim/bench_repeat.h"
