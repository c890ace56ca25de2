// Part of the public API: kvtrim/head_budgets.h.
#pragma once
#include "kvtrim/head_budgets.h"
