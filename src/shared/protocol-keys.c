/* The protocol's keys (protocol-keys.h): each defined from its token, so its
 * letters are written once. */

#include "protocol-keys.h"

#define _PROTOCOL_KEY_DEF(k) const char PK_##k[] = #k;
PROTOCOL_KEYS(_PROTOCOL_KEY_DEF)
#undef _PROTOCOL_KEY_DEF
