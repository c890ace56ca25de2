// The server is part of the public API: kvtrim/server.h.
#pragma once
#include "kvtrim/server.h"
