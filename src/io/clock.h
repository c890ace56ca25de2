// The clock helpers are part of the public API: kvtrim/clock.h.
#pragma once
#include "kvtrim/clock.h"
