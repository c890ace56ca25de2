// Part of the public API: kvtrim/eval_report.h.
#pragma once
#include "kvtrim/eval_report.h"
