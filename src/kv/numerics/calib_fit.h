// Part of the public API: kvtrim/calib_fit.h.
#pragma once
#include "kvtrim/calib_fit.h"
