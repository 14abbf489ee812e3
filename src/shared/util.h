#pragma once
/* Only an umbrella: the helpers that were util.c's are each in the file pair
 * of their concept now, and this header includes them all for the files
 * that still include it. Include what you use instead; this header goes once
 * its last user is gone. */

#include "fileio.h"
#include "fs-util.h"
#include "id-util.h"
#include "log.h"
#include "macro.h"
#include "path-util.h"
#include "process-util.h"
#include "signal-util.h"
#include "string-util.h"
#include "strv.h"
#include "time-util.h"
#include "utf8.h"
