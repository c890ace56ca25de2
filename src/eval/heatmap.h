// Part of the public API: kvtrim/eval_heatmap.h.
#pragma once
#include "kvtrim/eval_heatmap.h"
