// Part of the public API: kvtrim/eval_sweep.h.
#pragma once
#include "kvtrim/eval_sweep.h"
