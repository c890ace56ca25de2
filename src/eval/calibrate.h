// Part of the public API: kvtrim/eval_calibrate.h.
#pragma once
#include "kvtrim/eval_calibrate.h"
