// Part of the public API: kvtrim/eval_tasks.h.
#pragma once
#include "kvtrim/eval_tasks.h"
