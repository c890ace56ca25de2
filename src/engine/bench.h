// Part of the public API: kvtrim/bench.h.
#pragma once
#include "kvtrim/bench.h"
