#pragma once
/* Small general-purpose helpers shared by every program: string vectors,
 * time stamps, ids, files and blocking child processes.
 * All functions return 0/positive on success and -errno on failure unless
 * said otherwise. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* ---- string vectors (NULL-terminated arrays of malloc'd strings) ---- */
size_t strv_length(char *const *l);
/* Append a copy of s; *l may be NULL. -ENOMEM. */
int strv_push(char ***l, const char *s);
/* Append s, taking ownership (freed on failure). -ENOMEM. */
int strv_consume(char ***l, char *s);
/* Append a printf-formatted string. -ENOMEM. */
int strv_pushf(char ***l, const char *fmt, ...) _printf_(2, 3);
bool strv_contains(char *const *l, const char *s);
char **strv_copy(char *const *l);

/* ---- strings ---- */
/* asprintf that returns NULL on failure. */
char *strdup_printf(const char *fmt, ...) _printf_(1, 2);
/* Put a formatted message into *ret_error (freeing what it held) and return
 * r, a -errno; -ENOMEM when the message cannot be made. The loaders'
 * "this input is wrong" exit (config.c, settings.c, env-file.c). */
int set_error(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
/* POSIX shell single-quoting: 'it'\''s'. Returns malloc'd string or NULL. */
char *shell_quote(const char *s);
/* Length of UTF-8 text s[0..len) in UTF-16 code units (what JavaScript's
 * String.length reports; spec "JS length"). Invalid bytes count as 1 unit. */
size_t utf8_utf16_length(const char *s, size_t len);
/* Number of Unicode code points in UTF-8 text. Invalid bytes count as 1. */
size_t utf8_codepoints(const char *s, size_t len);
/* Byte offset of the first byte of the last `n` code points of s. */
size_t utf8_tail_offset(const char *s, size_t len, size_t n);
/* Copy of s[0..len) with every invalid UTF-8 sequence replaced by U+FFFD
 * (what a JavaScript reader of the bytes would see). malloc'd, NULL on ENOMEM. */
char *utf8_sanitize(const char *s, size_t len);
/* The same, with the result's length in *ret_len (it may hold NUL bytes). */
char *utf8_sanitize_n(const char *s, size_t len, size_t *ret_len);
/* Byte length of the first `units` UTF-16 units of s (never splits a code point). */
size_t utf8_prefix_utf16(const char *s, size_t len, size_t units);

/* ---- time ---- */
/* Wall clock, milliseconds since the epoch. */
uint64_t now_ms(void);
/* Monotonic clock, milliseconds. */
uint64_t mono_ms(void);
/* Format epoch milliseconds as ISO-8601 UTC with milliseconds and Z
 * ("2026-11-30T13:35:06.026Z"), JavaScript's Date#toISOString. buf >= 32 bytes. */
char *format_iso(uint64_t ms, char buf[static 32]);
/* Parse that format back; -EINVAL if it does not match. */
int parse_iso(const char *s, uint64_t *ret_ms);

/* ---- ids ---- */
/* Random UUID v4, lowercase, 36 chars + NUL. */
int uuid4(char out[static 37]);
/* Task id "oc_<Date.now() base36>_<first 8 hex chars of a UUID v4>"
 * (spec lifecycle.md §1.1). Returns malloc'd string or NULL. */
char *task_id_new(void);
/* True if s looks like a task id we generate (used to validate path components). */
bool task_id_is_valid(const char *s);

/* ---- files ---- */
/* write(2) all of buf[0..len) to fd, retrying on EINTR and short writes. -errno. */
int loop_write(int fd, const void *buf, size_t len);
/* Write data to path atomically: temp file in the same directory created with
 * `mode`, write, fsync, rename over path, fsync the directory. */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* Read fd from its current offset to EOF (at most max bytes; -EFBIG if
 * larger). *ret is NUL-terminated; ret_len may be NULL. */
int read_fd(int fd, size_t max, char **ret, size_t *ret_len);
/* Read a whole file (at most max bytes; -EFBIG if larger). *ret is NUL-terminated. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);
/* mkdir -p with `mode` for every created component. */
int mkdir_p(const char *path, mode_t mode);
/* mkdir -p, then chmod the last component to `mode` (spec: "mkdir then chmod"). */
int mkdir_p_chmod(const char *path, mode_t mode);
/* Recursively remove path, making directories writable first (overlayfs work
 * dirs end up mode 000). Missing path is success. Does not follow symlinks. */
int rm_rf(const char *path);
/* Does path equal dir or lie below it? Plain string test on absolute,
 * canonical paths ("/" contains everything; "/a" does not contain "/ab"). */
bool path_is_at_or_below(const char *path, const char *dir);
/* Is one of a and b at or below the other (same rules)? */
bool paths_overlap(const char *a, const char *b);
/* True if path is a directory (follows symlinks). */
bool is_dir(const char *path);
/* Resolve `name` against PATH (colon list; NULL → getenv("PATH")). Names with
 * a slash are checked as is. -ENOENT if not found or not executable. */
int find_executable(const char *name, const char *path_env, char **ret);
/* Directory of the running executable (/proc/self/exe). */
int self_exe_dir(char **ret);

/* ---- blocking child processes (for helpers, the shim and forked jobs;
 * never call from the daemon's event loop) ---- */
typedef struct run_result {
        int exit_code;      /* exit status, or -1 if killed by a signal */
        int signal;         /* terminating signal or 0 */
        char *out;          /* captured stdout (NUL-terminated), NULL if not captured */
        size_t out_len;
        char *err;          /* captured stderr (NUL-terminated, capped at 64 KiB) */
        size_t err_len;
} run_result;
void run_result_done(run_result *r);
/* Run argv[0] (PATH lookup through envp's PATH or ours) with envp (NULL → our
 * environ), cwd (NULL → ours), stdin from /dev/null, stdout captured up to
 * max_out bytes (-EFBIG beyond; 0 → discard stdout), stderr captured.
 * stdout_fd >= 0 sends stdout to that fd instead of capturing.
 * The child gets SIGKILL should the caller die first (PR_SET_PDEATHSIG).
 * Returns 0 when the child ran (check r->exit_code), -errno if it could not be started. */
int run_command(char *const argv[], char *const envp[], const char *cwd,
                size_t max_out, int stdout_fd, run_result *r);

/* Environment arrays ("NAME=value"). */
const char *strv_env_get(char *const *env, const char *name);
/* Set or replace NAME=value. */
int strv_env_set(char ***env, const char *name, const char *value);
int strv_env_unset(char ***env, const char *name);

/* Signal name without "SIG"-less forms: 15 → "SIGTERM". Returns static string or NULL. */
const char *signal_to_name(int sig);
