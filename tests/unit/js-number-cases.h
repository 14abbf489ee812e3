#pragma once
/* What JavaScript's Number() makes of a string, the rule config.h's
 * config_js_number follows (and cli-args.h's cli_js_number through it):
 * each text (NULL: none) and its number, NAN for "not a number". Both
 * suites run every row as a loop case through js_number_check. */

#include <check.h>
#include <math.h>

#include "macro.h"

typedef struct JsNumberCase { const char *text; double number; } JsNumberCase;

static const JsNumberCase js_number_cases[] = {
        /* empty or blank: 0; blanks around a number are trimmed */
        {"", 0},
        {"  ", 0},
        {"  12 ", 12},
        {" 42 ", 42},
        /* decimal, exponent, hex, binary, sign */
        {"1e3", 1000},
        {"0x10", 16},
        {"0b101", 5},
        {"1.5", 1.5},
        {".5", 0.5},
        {"5.", 5},
        {"-3", -3},
        {"Infinity", INFINITY},
        /* anything else is not a number */
        {"abc", NAN},
        {"1e", NAN},
        {"12px", NAN},
        {"0x", NAN},
        {"12abc", NAN},
        {"1,000", NAN},
        {NULL, NAN},
};

/* parse gives row i's number (a NAN for a NAN); a mismatch names the text. */
static inline void js_number_check(double (*parse)(const char *s), int i) {
        const char *text = js_number_cases[i].text;
        double got = parse(text), want = js_number_cases[i].number;
        ck_assert_msg(isnan(want) ? isnan(got) : got == want, "\"%s\": %g, want %g", strnull(text), got, want);
}
