/* The pi executor's stdout normalizer (fuzz-normalizer.h says what is
 * checked); seeds: the real pi streams recorded in tests/fixtures. */

#include "fuzz-normalizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        return fuzz_normalizer("pi", data, size);
}
