/* The opencode executor's stdout normalizer (fuzz-normalizer.h says what is
 * checked); seeds: the real opencode streams recorded in tests/fixtures. */

#include "fuzz-normalizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        return fuzz_normalizer("opencode", data, size);
}
