/* The launch spec (launch-spec.h): exact JSON, round trip, strict parsing,
 * the sealed memfd transport, and the launch.json / exit.json formats. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "fs-util.h"
#include "json-util.h"
#include "launch-spec.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

static inline void launch_spec_freep(launch_spec **s) { launch_spec_free(*s); }

static char *env_list[] = {"PATH=/usr/bin:/bin", "HOME=/home/u", "EMPTY=", "EQ=a=b", NULL};
static sandbox_mount mounts[] = {
        {.op = SANDBOX_MOUNT_SYMLINK, .src = "usr/bin", .dest = "/bin"},
        {.op = SANDBOX_MOUNT_TARGET, .dest = "/repo"},
        {.op = SANDBOX_MOUNT_TMPFS, .dest = "/home/u/.ssh"},
        {.op = SANDBOX_MOUNT_MASK_FILE, .dest = "/home/u/.netrc"},
        {.op = SANDBOX_MOUNT_RO_BIND, .src = "/ro one", .dest = "/ro,two"},
        {.op = SANDBOX_MOUNT_RO_BIND_TRY, .src = "/nix", .dest = "/nix"},
        {.op = SANDBOX_MOUNT_OVERLAY, .src = "/c", .dest = "/home/u/.config/opencode", .upper = "/h/u", .work = "/h/w",
         .stage = "/h/m"},
        {.op = SANDBOX_MOUNT_BIND, .src = "/state/outputs/oc_1", .dest = "/state/outputs/oc_1"},
};
static char *dirs_list[] = {"/cache/homes/oc_1", NULL};
static sandbox_seed seeds[] = {{.src = "/cache/homes/oc_0/pi/sessions", .dest = "/cache/homes/oc_1/pi/sessions"}};
static launch_overlay ov = {.lower = "/repo", .upper = "/ov/upper/main", .work = "/ov/work/main"};
static launch_sandbox sb = {
        .uid = 1000,
        .gid = 1001,
        .mounts = mounts,
        .n_mounts = ELEMENTSOF(mounts),
        .dirs = dirs_list,
        .seeds = seeds,
        .n_seeds = 1,
        .overlay = &ov,
        .share_net = true,
        .net = {.mode = NET_MODE_HOST},
};
static char *disk_paths[] = {"/ov/upper/main", "/state/outputs/oc_1", NULL};
static launch_disk disk = {.max_bytes = 52428800, .grace_ms = 5000, .paths = disk_paths};
static launch_spec full = {
        .task_id = "oc_mfz1abc_0123abcd",
        .executor = "pi",
        .model = "anthropic/claude",
        .variant = "high",
        .session_id = NULL,
        .prompt = "fix it \"now\"\nüñí/\x01",
        .directory = "/repo",
        .env = env_list,
        .log_path = "/state/logs/oc_1.ndjson",
        .task_dir = "/state/tasks/oc_1",
        .prompt_file = "/state/prompts/oc_1.prompt.txt",
        .sandbox = &sb,
        .disk = &disk,
};

static const char *FULL_JSON =
        "{\"taskId\":\"oc_mfz1abc_0123abcd\",\"executor\":\"pi\",\"model\":\"anthropic/claude\",\"variant\":\"high\","
        "\"sessionId\":null,\"prompt\":\"fix it \\\"now\\\"\\nüñí/\\u0001\",\"directory\":\"/repo\","
        "\"env\":[\"PATH=/usr/bin:/bin\",\"HOME=/home/u\",\"EMPTY=\",\"EQ=a=b\"],"
        "\"logPath\":\"/state/logs/oc_1.ndjson\",\"taskDir\":\"/state/tasks/oc_1\","
        "\"promptFile\":\"/state/prompts/oc_1.prompt.txt\",\"sandbox\":{\"uid\":1000,\"gid\":1001,"
        "\"mounts\":[{\"op\":\"symlink\",\"src\":\"usr/bin\",\"dest\":\"/bin\",\"upper\":null,\"work\":null,"
        "\"stage\":null},{\"op\":\"target\",\"src\":null,\"dest\":\"/repo\",\"upper\":null,\"work\":null,"
        "\"stage\":null},{\"op\":\"tmpfs\",\"src\":null,\"dest\":\"/home/u/.ssh\",\"upper\":null,\"work\":null,"
        "\"stage\":null},{\"op\":\"mask-file\",\"src\":null,\"dest\":\"/home/u/.netrc\",\"upper\":null,"
        "\"work\":null,\"stage\":null},{\"op\":\"ro-bind\",\"src\":\"/ro one\",\"dest\":\"/ro,two\","
        "\"upper\":null,\"work\":null,\"stage\":null},{\"op\":\"ro-bind-try\",\"src\":\"/nix\","
        "\"dest\":\"/nix\",\"upper\":null,\"work\":null,\"stage\":null},{\"op\":\"overlay\",\"src\":\"/c\","
        "\"dest\":\"/home/u/.config/opencode\",\"upper\":\"/h/u\",\"work\":\"/h/w\",\"stage\":\"/h/m\"},"
        "{\"op\":\"bind\",\"src\":\"/state/outputs/oc_1\",\"dest\":\"/state/outputs/oc_1\",\"upper\":null,"
        "\"work\":null,\"stage\":null}],\"dirs\":[\"/cache/homes/oc_1\"],"
        "\"seeds\":[{\"src\":\"/cache/homes/oc_0/pi/sessions\",\"dest\":\"/cache/homes/oc_1/pi/sessions\"}],"
        "\"overlay\":{\"lower\":\"/repo\",\"upper\":\"/ov/upper/main\","
        "\"work\":\"/ov/work/main\"},\"shareNet\":true,\"network\":{\"mode\":\"host\",\"allow\":[]}},"
        "\"disk\":{\"maxBytes\":52428800,\"graceMs\":5000,\"paths\":[\"/ov/upper/main\",\"/state/outputs/oc_1\"]}}";

static void assert_strv_eq(char **a, char **b) {
        size_t n = strv_length(a);
        ck_assert_uint_eq(n, strv_length(b));
        for (size_t i = 0; i < n; i++) ck_assert_str_eq(a[i], b[i]);
}

static void assert_str_eq_null(const char *a, const char *b) {
        if (!a || !b) ck_assert_ptr_eq(a, b);
        else ck_assert_str_eq(a, b);
}

static void assert_spec_eq(const launch_spec *a, const launch_spec *b) {
        ck_assert_str_eq(a->task_id, b->task_id);
        ck_assert_str_eq(a->executor, b->executor);
        assert_str_eq_null(a->model, b->model);
        assert_str_eq_null(a->variant, b->variant);
        assert_str_eq_null(a->session_id, b->session_id);
        ck_assert_str_eq(a->prompt, b->prompt);
        ck_assert_str_eq(a->directory, b->directory);
        assert_strv_eq(a->env, b->env);
        ck_assert_str_eq(a->log_path, b->log_path);
        ck_assert_str_eq(a->task_dir, b->task_dir);
        assert_str_eq_null(a->prompt_file, b->prompt_file);
        ck_assert_int_eq(!a->disk, !b->disk);
        if (a->disk) {
                ck_assert_uint_eq(a->disk->max_bytes, b->disk->max_bytes);
                ck_assert_uint_eq(a->disk->grace_ms, b->disk->grace_ms);
                assert_strv_eq(a->disk->paths, b->disk->paths);
        }
        ck_assert_int_eq(!a->sandbox, !b->sandbox);
        if (!a->sandbox) return;
        ck_assert_uint_eq(a->sandbox->uid, b->sandbox->uid);
        ck_assert_uint_eq(a->sandbox->gid, b->sandbox->gid);
        ck_assert_uint_eq(a->sandbox->n_mounts, b->sandbox->n_mounts);
        for (size_t i = 0; i < a->sandbox->n_mounts; i++) {
                const sandbox_mount *x = &a->sandbox->mounts[i], *y = &b->sandbox->mounts[i];
                ck_assert_int_eq(x->op, y->op);
                assert_str_eq_null(x->src, y->src);
                assert_str_eq_null(x->dest, y->dest);
                assert_str_eq_null(x->upper, y->upper);
                assert_str_eq_null(x->work, y->work);
                assert_str_eq_null(x->stage, y->stage);
        }
        assert_strv_eq(a->sandbox->dirs, b->sandbox->dirs);
        ck_assert_uint_eq(a->sandbox->n_seeds, b->sandbox->n_seeds);
        for (size_t i = 0; i < a->sandbox->n_seeds; i++) {
                ck_assert_str_eq(a->sandbox->seeds[i].src, b->sandbox->seeds[i].src);
                ck_assert_str_eq(a->sandbox->seeds[i].dest, b->sandbox->seeds[i].dest);
        }
        ck_assert_int_eq(a->sandbox->share_net, b->sandbox->share_net);
        ck_assert_int_eq(a->sandbox->net.mode, b->sandbox->net.mode);
        ck_assert_uint_eq(a->sandbox->net.n_rules, b->sandbox->net.n_rules);
        for (size_t i = 0; i < a->sandbox->net.n_rules; i++) {
                ck_assert_str_eq(a->sandbox->net.rules[i].host, b->sandbox->net.rules[i].host);
                ck_assert_uint_eq(a->sandbox->net.rules[i].port, b->sandbox->net.rules[i].port);
        }
        ck_assert_int_eq(!a->sandbox->overlay, !b->sandbox->overlay);
        if (a->sandbox->overlay) {
                ck_assert_str_eq(a->sandbox->overlay->lower, b->sandbox->overlay->lower);
                ck_assert_str_eq(a->sandbox->overlay->upper, b->sandbox->overlay->upper);
                ck_assert_str_eq(a->sandbox->overlay->work, b->sandbox->overlay->work);
        }
}

static int parse_text(const char *text, launch_spec **ret) {
        _cleanup_json_ json_object *j = NULL;
        int r = json_parse_strict(text, strlen(text), &j);
        if (r < 0) return r;
        return launch_spec_from_json(j, ret);
}

START_TEST(test_exact_json) {
        _cleanup_json_ json_object *j = NULL;
        ck_assert_int_eq(launch_spec_to_json(&full, &j), 0);
        ck_assert_str_eq(json_to_line(j, NULL), FULL_JSON);
}
END_TEST

START_TEST(test_round_trip) {
        _cleanup_(launch_spec_freep) launch_spec *back = NULL;
        ck_assert_int_eq(parse_text(FULL_JSON, &back), 0);
        assert_spec_eq(&full, back);

        /* Unsandboxed, every nullable key null, empty env. */
        char *no_env[] = {NULL};
        launch_spec bare = {.task_id = "oc_x_1", .executor = "shell", .prompt = "", .directory = "/d",
                            .env = no_env, .log_path = "/l", .task_dir = "/t"};
        _cleanup_json_ json_object *j = NULL;
        ck_assert_int_eq(launch_spec_to_json(&bare, &j), 0);
        ck_assert_str_eq(json_to_line(j, NULL),
                         "{\"taskId\":\"oc_x_1\",\"executor\":\"shell\",\"model\":null,\"variant\":null,"
                         "\"sessionId\":null,\"prompt\":\"\",\"directory\":\"/d\",\"env\":[],\"logPath\":\"/l\","
                         "\"taskDir\":\"/t\",\"promptFile\":null,\"sandbox\":null,\"disk\":null}");
        _cleanup_(launch_spec_freep) launch_spec *b2 = NULL;
        ck_assert_int_eq(launch_spec_from_json(j, &b2), 0);
        assert_spec_eq(&bare, b2);

        /* Sandbox without overlay or socket, its network through a proxy. */
        NetRule rules[] = {{.host = "api.example.com", .port = 443}, {.host = "127.0.0.1", .port = 8080, .is_ip = true}};
        launch_sandbox sb2 = {.uid = 0, .gid = 0, .dirs = no_env,
                              .net = {.mode = NET_MODE_PROXY, .rules = rules, .n_rules = ELEMENTSOF(rules)}};
        bare.sandbox = &sb2;
        _cleanup_json_ json_object *j3 = NULL;
        ck_assert_int_eq(launch_spec_to_json(&bare, &j3), 0);
        _cleanup_(launch_spec_freep) launch_spec *b3 = NULL;
        ck_assert_int_eq(launch_spec_from_json(j3, &b3), 0);
        assert_spec_eq(&bare, b3);
        ck_assert_ptr_null(b3->sandbox->overlay);
        ck_assert_int_eq(b3->sandbox->share_net, false);
        ck_assert(strstr(json_to_line(j3, NULL), "\"shareNet\":false,\"network\":{\"mode\":\"proxy\",\"allow\":"
                                                  "[\"api.example.com:443\",\"127.0.0.1:8080\"]}"));

        /* A spec from an older daemon has no "disk" key: it still parses, unwatched. */
        _cleanup_(launch_spec_freep) launch_spec *b4 = NULL;
        ck_assert_int_eq(parse_text("{\"taskId\":\"oc_x_1\",\"executor\":\"shell\",\"model\":null,\"variant\":null,"
                                    "\"sessionId\":null,\"prompt\":\"\",\"directory\":\"/d\",\"env\":[],\"logPath\":\"/l\","
                                    "\"taskDir\":\"/t\",\"promptFile\":null,\"sandbox\":null}",
                                    &b4),
                         0);
        ck_assert_ptr_null(b4->disk);
        ck_assert_ptr_null(b4->attachment);

        /* a report summary's attachment: absent unless set, an absolute path */
        bare.sandbox = NULL;
        bare.attachment = (char *) "/s/summaries/oc_x_1.json";
        _cleanup_json_ json_object *j5 = NULL;
        ck_assert_int_eq(launch_spec_to_json(&bare, &j5), 0);
        ck_assert(strstr(json_to_line(j5, NULL), ",\"disk\":null,\"attachment\":\"/s/summaries/oc_x_1.json\"}") != NULL);
        _cleanup_(launch_spec_freep) launch_spec *b5 = NULL;
        ck_assert_int_eq(launch_spec_from_json(j5, &b5), 0);
        ck_assert_str_eq(b5->attachment, "/s/summaries/oc_x_1.json");
        launch_spec *b6 = NULL;
        ck_assert_int_eq(parse_text("{\"taskId\":\"oc_x_1\",\"executor\":\"shell\",\"model\":null,\"variant\":null,"
                                    "\"sessionId\":null,\"prompt\":\"\",\"directory\":\"/d\",\"env\":[],\"logPath\":\"/l\","
                                    "\"taskDir\":\"/t\",\"promptFile\":null,\"sandbox\":null,\"attachment\":\"rel.json\"}",
                                    &b6),
                         -EBADMSG);
}
END_TEST


/* "hostMasks": absent unless the daemon knows them (the shim then walks);
 * present, each entry an absolute path of a known kind, each path once */
START_TEST(test_host_masks) {
        char *no_env[] = {NULL};
        launch_sandbox sb3 = {.dirs = no_env, .net = {.mode = NET_MODE_NONE}, .have_host_masks = true};
        ck_assert_int_eq(host_mask_list_set(&sb3.host_masks, "/opt/x/s.sock", HOST_MASK_SOCKET), 0);
        ck_assert_int_eq(host_mask_list_set(&sb3.host_masks, "/etc/shadow", HOST_MASK_PRIVATE_FILE), 0);
        launch_spec spec = {.task_id = "oc_x_1", .executor = "shell", .prompt = "", .directory = "/d",
                            .env = no_env, .log_path = "/l", .task_dir = "/t", .sandbox = &sb3};
        _cleanup_json_ json_object *j = NULL;
        ck_assert_int_eq(launch_spec_to_json(&spec, &j), 0);
        const char *text = json_to_line(j, NULL);
        ck_assert(strstr(text, "\"hostMasks\":[{\"path\":\"/etc/shadow\",\"kind\":\"private-file\"},"
                               "{\"path\":\"/opt/x/s.sock\",\"kind\":\"socket\"}]"));
        _cleanup_(launch_spec_freep) launch_spec *back = NULL;
        ck_assert_int_eq(launch_spec_from_json(j, &back), 0);
        ck_assert(back->sandbox->have_host_masks);
        ck_assert_uint_eq(back->sandbox->host_masks.n, 2);
        ck_assert_str_eq(back->sandbox->host_masks.items[1].path, "/opt/x/s.sock");
        ck_assert_int_eq(back->sandbox->host_masks.items[1].kind, HOST_MASK_SOCKET);
        const char *bad[][2] = {
                {"\"kind\":\"socket\"", "\"kind\":\"fifo\""},
                {"\"path\":\"/opt/x/s.sock\"", "\"path\":\"rel.sock\""},
                {"\"path\":\"/opt/x/s.sock\"", "\"path\":\"/etc/shadow\""},
                {"\"kind\":\"socket\"}", "\"kind\":\"socket\",\"x\":1}"},
                {"\"hostMasks\":[", "\"hostMasks\":{\"a\":["},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                const char *at = strstr(text, bad[i][0]);
                ck_assert_ptr_nonnull(at);
                _cleanup_free_ char *t = strdup_printf("%.*s%s%s", (int) (at - text), text, bad[i][1], at + strlen(bad[i][0]));
                launch_spec *s = NULL;
                ck_assert_msg(parse_text(t, &s) == -EBADMSG, "accepted %s", t);
        }
        host_mask_list_done(&sb3.host_masks);
}
END_TEST

/* Replace the first occurrence of `from` in FULL_JSON with `to` and expect
 * the parse to fail. */
static void assert_rejected(const char *from, const char *to) {
        const char *at = strstr(FULL_JSON, from);
        ck_assert_msg(at, "pattern %s not in FULL_JSON", from);
        _cleanup_free_ char *text = strdup_printf("%.*s%s%s", (int) (at - FULL_JSON), FULL_JSON, to, at + strlen(from));
        ck_assert_ptr_nonnull(text);
        launch_spec *s = NULL;
        int r = parse_text(text, &s);
        ck_assert_msg(r == -EBADMSG, "accepted (r=%d) after replacing %s with %s", r, from, to);
        ck_assert_ptr_null(s);
}

START_TEST(test_strict_types) {
        assert_rejected("\"taskId\":\"oc_mfz1abc_0123abcd\"", "\"taskId\":5");
        assert_rejected("\"taskId\":\"oc_mfz1abc_0123abcd\"", "\"taskId\":null");
        assert_rejected("\"executor\":\"pi\"", "\"executor\":[\"pi\"]");
        assert_rejected("\"model\":\"anthropic/claude\"", "\"model\":1");
        assert_rejected("\"variant\":\"high\"", "\"variant\":true");
        assert_rejected("\"sessionId\":null", "\"sessionId\":{}");
        assert_rejected("\"prompt\":\"fix", "\"prompt\":7,\"x\":\"fix");
        assert_rejected("\"directory\":\"/repo\"", "\"directory\":null");
        assert_rejected("\"env\":[\"PATH=/usr/bin:/bin\"", "\"env\":[1");
        assert_rejected("\"env\":[", "\"env\":{\"a\":[");
        assert_rejected("\"logPath\":\"/state/logs/oc_1.ndjson\"", "\"logPath\":false");
        assert_rejected("\"taskDir\":\"/state/tasks/oc_1\"", "\"taskDir\":1.5");
        assert_rejected("\"promptFile\":\"/state/prompts/oc_1.prompt.txt\"", "\"promptFile\":[]");
        assert_rejected("\"sandbox\":{", "\"sandbox\":[{");
        assert_rejected("\"uid\":1000", "\"uid\":\"1000\"");
        assert_rejected("\"uid\":1000", "\"uid\":1000.5");
        assert_rejected("\"gid\":1001", "\"gid\":null");
        assert_rejected("\"mounts\":[{", "\"mounts\":[null,{");
        assert_rejected("\"op\":\"symlink\"", "\"op\":\"mount\"");
        assert_rejected("\"op\":\"symlink\"", "\"op\":1");
        assert_rejected("\"src\":\"/ro one\"", "\"src\":null");
        assert_rejected("\"src\":null,\"dest\":\"/repo\"", "\"src\":\"/x\",\"dest\":\"/repo\"");
        assert_rejected("\"stage\":\"/h/m\"", "\"stage\":null");
        assert_rejected("\"dest\":\"/bin\",\"upper\":null", "\"dest\":\"/bin\",\"upper\":\"/u\"");
        assert_rejected("\"dirs\":[\"/cache", "\"dirs\":[3,\"/cache");
        assert_rejected("\"seeds\":[{\"src\"", "\"seeds\":[{\"x\":1,\"src\"");
        assert_rejected("\"overlay\":{\"lower\":\"/repo\"", "\"overlay\":{\"lower\":3");
        assert_rejected("\"work\":\"/ov/work/main\"", "\"work\":null");
        assert_rejected("\"shareNet\":true", "\"shareNet\":1");
        assert_rejected("\"shareNet\":true", "\"shareNet\":null");
        /* the network: its mode agrees with shareNet, its rules are rules */
        assert_rejected("\"shareNet\":true", "\"shareNet\":false");
        assert_rejected("\"mode\":\"host\"", "\"mode\":\"open\"");
        assert_rejected("\"allow\":[]", "\"allow\":[\"evil host\"]");
        assert_rejected("\"allow\":[]", "\"allow\":[\"*\"]");
}
END_TEST

START_TEST(test_strict_disk) {
        assert_rejected("\"maxBytes\":52428800", "\"maxBytes\":0");
        assert_rejected("\"maxBytes\":52428800", "\"maxBytes\":-1");
        assert_rejected("\"maxBytes\":52428800", "\"maxBytes\":\"50M\"");
        assert_rejected("\"maxBytes\":52428800", "\"maxBytes\":9007199254740992");
        assert_rejected("\"graceMs\":5000", "\"graceMs\":null");
        assert_rejected("\"graceMs\":5000,", "");
        assert_rejected("\"paths\":[\"/ov", "\"paths\":[\"ov");
        assert_rejected("\"paths\":[", "\"extra\":1,\"paths\":[");
        assert_rejected("\"disk\":{", "\"disk\":[{");
}
END_TEST

/* A check gate's spec: "check" with "logMaxBytes" (both or neither), and its
 * overlay's "lowerTop"; each optional, each strict. */
/* Each bad[i][0] in text replaced by bad[i][1]: the spec is refused. */
static void refuse_each(const char *text, const char *const bad[][2], size_t n) {
        for (size_t i = 0; i < n; i++) {
                const char *at = strstr(text, bad[i][0]);
                ck_assert_msg(at, "%s not in %s", bad[i][0], text);
                _cleanup_free_ char *t2 = strdup_printf("%.*s%s%s", (int) (at - text), text, bad[i][1], at + strlen(bad[i][0]));
                launch_spec *x = NULL;
                ck_assert_msg(parse_text(t2, &x) == -EBADMSG, "accepted: %s", t2);
                ck_assert_ptr_null(x);
        }
}

START_TEST(test_check_spec) {
        char *no_env[] = {NULL};
        launch_overlay cov = {.lower = "/repo", .upper = "/ov/upper/check", .work = "/ov/work/check",
                             .lower_top = "/ov/upper/main"};
        launch_sandbox csb = {.dirs = no_env, .overlay = &cov, .share_net = true, .net = {.mode = NET_MODE_HOST}};
        launch_spec c = {.task_id = "oc_x_1", .executor = "check", .prompt = "make check", .directory = "/repo",
                         .env = no_env, .log_path = "/t/check/output.log", .task_dir = "/t/check", .sandbox = &csb,
                         .check = true, .log_max_bytes = 262144};
        _cleanup_json_ json_object *j = NULL;
        ck_assert_int_eq(launch_spec_to_json(&c, &j), 0);
        const char *text = json_to_line(j, NULL);
        ck_assert(strstr(text, "\"lowerTop\":\"/ov/upper/main\"") != NULL);
        ck_assert(strstr(text, ",\"check\":true,\"logMaxBytes\":262144}") != NULL);
        _cleanup_(launch_spec_freep) launch_spec *b = NULL;
        ck_assert_int_eq(launch_spec_from_json(j, &b), 0);
        ck_assert(b->check);
        ck_assert_uint_eq(b->log_max_bytes, 262144);
        ck_assert_str_eq(b->sandbox->overlay->lower_top, "/ov/upper/main");
        /* a worker's spec has neither */
        _cleanup_(launch_spec_freep) launch_spec *w = NULL;
        ck_assert_int_eq(parse_text(FULL_JSON, &w), 0);
        ck_assert(!w->check);
        ck_assert_ptr_null(w->sandbox->overlay->lower_top);

        static const char *const bad[][2] = {
                {",\"check\":true,\"logMaxBytes\":262144}", ",\"check\":true}"},
                {",\"check\":true,\"logMaxBytes\":262144}", ",\"logMaxBytes\":262144}"},
                {",\"check\":true,", ",\"check\":false,"},
                {",\"check\":true,", ",\"check\":1,"},
                {"\"logMaxBytes\":262144", "\"logMaxBytes\":1"},
                {"\"logMaxBytes\":262144", "\"logMaxBytes\":\"256K\""},
                {"\"logMaxBytes\":262144", "\"logMaxBytes\":2147483648"},
                {"\"lowerTop\":\"/ov/upper/main\"", "\"lowerTop\":\"ov/upper/main\""},
                {"\"lowerTop\":\"/ov/upper/main\"", "\"lowerTop\":7"},
        };
        refuse_each(text, bad, ELEMENTSOF(bad));
}
END_TEST

/* A worker's log budget, its limits and the size of its tmpfs mounts:
 * written when set, read back, refused when malformed; absent in an older
 * daemon's spec. */
START_TEST(test_limits_and_budgets) {
        char *no_env[] = {NULL};
        launch_sandbox lsb = {.dirs = no_env, .share_net = true, .net = {.mode = NET_MODE_HOST}, .tmp_size = 134217728};
        launch_limits lim = {.memory_max = 268435456, .tasks_max = 64};
        launch_spec c = {.task_id = "oc_x_1", .executor = "shell", .prompt = "true", .directory = "/repo",
                         .env = no_env, .log_path = "/t/log", .task_dir = "/t", .sandbox = &lsb,
                         .log_budget = 268435456, .limits = &lim};
        _cleanup_json_ json_object *j = NULL;
        ck_assert_int_eq(launch_spec_to_json(&c, &j), 0);
        const char *text = json_to_line(j, NULL);
        ck_assert_msg(strstr(text, ",\"tmpSize\":134217728}") != NULL, "%s", text);
        ck_assert_msg(strstr(text, ",\"logBudget\":268435456,\"limits\":{\"memoryMax\":268435456,\"tasksMax\":64}}") != NULL,
                      "%s", text);
        _cleanup_(launch_spec_freep) launch_spec *b = NULL;
        ck_assert_int_eq(launch_spec_from_json(j, &b), 0);
        ck_assert_uint_eq(b->log_budget, 268435456);
        ck_assert_ptr_nonnull(b->limits);
        ck_assert_uint_eq(b->limits->memory_max, 268435456);
        ck_assert_uint_eq(b->limits->tasks_max, 64);
        ck_assert_uint_eq(b->sandbox->tmp_size, 134217728);
        _cleanup_(launch_spec_freep) launch_spec *w = NULL;
        ck_assert_int_eq(parse_text(FULL_JSON, &w), 0);
        ck_assert_uint_eq(w->log_budget, 0);
        ck_assert_ptr_null(w->limits);
        ck_assert_uint_eq(w->sandbox->tmp_size, 0);
        static const char *const bad[][2] = {
                {"\"logBudget\":268435456", "\"logBudget\":4096"},
                {"\"logBudget\":268435456", "\"logBudget\":-1"},
                {"\"logBudget\":268435456", "\"logBudget\":\"256M\""},
                {"\"tmpSize\":134217728", "\"tmpSize\":0"},
                {"\"tmpSize\":134217728", "\"tmpSize\":true"},
                {"\"tasksMax\":64}", "\"tasksMax\":64,\"cpu\":1}"},
                {"\"tasksMax\":64}", "\"tasksMax\":-64}"},
                {",\"tasksMax\":64}", "}"},
                {"\"limits\":{", "\"limits\":7,\"x\":{"},
        };
        refuse_each(text, bad, ELEMENTSOF(bad));
}
END_TEST

START_TEST(test_strict_shape) {
        /* unknown keys, at every level */
        assert_rejected("\"taskId\"", "\"extra\":1,\"taskId\"");
        assert_rejected("\"uid\"", "\"extra\":1,\"uid\"");
        assert_rejected("\"lower\"", "\"extra\":1,\"lower\"");
        /* missing keys (even nullable ones), at every level */
        assert_rejected("\"sessionId\":null,", "");
        assert_rejected("\"executor\":\"pi\",", "");
        assert_rejected(",\"shareNet\":true", "");
        assert_rejected("\"gid\":1001,", "");
        assert_rejected(",\"work\":\"/ov/work/main\"", "");
        /* values */
        assert_rejected("\"directory\":\"/repo\"", "\"directory\":\"repo\"");
        assert_rejected("\"logPath\":\"/state", "\"logPath\":\"state");
        assert_rejected("\"dest\":\"/home/u/.ssh\"", "\"dest\":\"home/u/.ssh\"");
        assert_rejected("\"src\":\"/ro one\"", "\"src\":\"ro one\"");
        assert_rejected("\"dirs\":[\"/cache", "\"dirs\":[\"cache");
        assert_rejected("\"upper\":\"/ov", "\"upper\":\"ov");
        assert_rejected("\"taskId\":\"oc_mfz1abc_0123abcd\"", "\"taskId\":\"../etc\"");
        assert_rejected("\"executor\":\"pi\"", "\"executor\":\"\"");
        assert_rejected("\"EMPTY=\"", "\"EMPTY\"");
        assert_rejected("\"EMPTY=\"", "\"=x\"");
        assert_rejected("\"prompt\":\"fix", "\"prompt\":\"a\\u0000b\",\"x\":\"fix");
        assert_rejected("\"uid\":1000", "\"uid\":-1");
        assert_rejected("\"uid\":1000", "\"uid\":4294967295");
        /* not an object at all */
        launch_spec *s = NULL;
        ck_assert_int_eq(parse_text("[]", &s), -EBADMSG);
        ck_assert_int_eq(parse_text("null", &s), -EBADMSG);
        ck_assert_int_eq(parse_text("{", &s), -EBADMSG);
}
END_TEST

START_TEST(test_memfd) {
        int fd = launch_spec_to_memfd(&full);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
        int seals = fcntl(fd, F_GET_SEALS);
        ck_assert_int_ge(seals, 0);
        ck_assert_int_ne(seals & F_SEAL_WRITE, 0);
        ck_assert_int_ne(seals & F_SEAL_SEAL, 0);
        ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 0);
        /* sealed: nobody can change it any more */
        ck_assert_int_lt(write(fd, "x", 1), 0);
        ck_assert_int_lt(ftruncate(fd, 0), 0);
        /* readable twice: the reader starts at offset 0 whatever the position */
        for (int i = 0; i < 2; i++) {
                _cleanup_(launch_spec_freep) launch_spec *back = NULL;
                ck_assert_int_eq(launch_spec_read_fd(fd, &back), 0);
                assert_spec_eq(&full, back);
        }
        (void) lseek(fd, 10, SEEK_SET);
        _cleanup_(launch_spec_freep) launch_spec *back = NULL;
        ck_assert_int_eq(launch_spec_read_fd(fd, &back), 0);
        assert_spec_eq(&full, back);
        close(fd);
}
END_TEST

START_TEST(test_read_pipe_and_garbage) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(write(p[1], FULL_JSON, strlen(FULL_JSON)), (ssize_t) strlen(FULL_JSON));
        ck_assert_int_eq(write(p[1], "\n", 1), 1);
        close(p[1]);
        _cleanup_(launch_spec_freep) launch_spec *back = NULL;
        ck_assert_int_eq(launch_spec_read_fd(p[0], &back), 0);
        assert_spec_eq(&full, back);
        close(p[0]);

        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(write(p[1], "{} {}", 5), 5);
        close(p[1]);
        launch_spec *s = NULL;
        ck_assert_int_eq(launch_spec_read_fd(p[0], &s), -EBADMSG);
        close(p[0]);
        ck_assert_int_eq(launch_spec_read_fd(p[0], &s), -EBADF);
}
END_TEST

START_TEST(test_launch_info) {
        launch_info li = {.shim_pid = 100, .worker_pid = 101,
                          .pre_dispatch_head = "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
                          .overlay_method = "userns", .started_at_ms = 1764509706026ULL};
        _cleanup_json_ json_object *j = NULL;
        ck_assert_int_eq(launch_info_to_json(&li, &j), 0);
        ck_assert_str_eq(json_to_line(j, NULL),
                         "{\"shimPid\":100,\"workerPid\":101,\"preDispatchHead\":"
                         "\"4b825dc642cb6eb9a060e54bf8d69288fbee4904\",\"overlayMethod\":\"userns\","
                         "\"startedAt\":\"2025-11-30T13:35:06.026Z\"}");
        launch_info back;
        ck_assert_int_eq(launch_info_from_json(j, &back), 0);
        ck_assert_int_eq(back.shim_pid, 100);
        ck_assert_int_eq(back.worker_pid, 101);
        ck_assert_str_eq(back.pre_dispatch_head, li.pre_dispatch_head);
        ck_assert_str_eq(back.overlay_method, "userns");
        ck_assert_uint_eq(back.started_at_ms, li.started_at_ms);
        launch_info_done(&back);

        const char *bad[] = {
                "{\"shimPid\":100,\"workerPid\":101,\"preDispatchHead\":null,\"overlayMethod\":\"other\",\"startedAt\":\"2025-11-30T13:35:06.026Z\"}",
                "{\"shimPid\":\"100\",\"workerPid\":101,\"preDispatchHead\":null,\"overlayMethod\":null,\"startedAt\":\"2025-11-30T13:35:06.026Z\"}",
                "{\"shimPid\":100,\"workerPid\":0,\"preDispatchHead\":null,\"overlayMethod\":null,\"startedAt\":\"2025-11-30T13:35:06.026Z\"}",
                "{\"shimPid\":100,\"workerPid\":101,\"preDispatchHead\":null,\"overlayMethod\":null,\"startedAt\":\"yesterday\"}",
                "{\"shimPid\":100,\"workerPid\":101,\"preDispatchHead\":null,\"overlayMethod\":null}",
                "{\"shimPid\":100,\"workerPid\":101,\"preDispatchHead\":1,\"overlayMethod\":null,\"startedAt\":\"2025-11-30T13:35:06.026Z\"}",
                "{\"shimPid\":100,\"workerPid\":101,\"preDispatchHead\":null,\"overlayMethod\":null,\"startedAt\":\"2025-11-30T13:35:06.026Z\",\"x\":1}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_json_ json_object *b = NULL;
                ck_assert_int_eq(json_parse_strict(bad[i], strlen(bad[i]), &b), 0);
                launch_info x;
                ck_assert_msg(launch_info_from_json(b, &x) == -EBADMSG, "accepted %s", bad[i]);
        }
}
END_TEST

/* ei as exit.json's JSON: exactly want (a new ref, for the round trip). */
static json_object *exit_json(const exit_info *ei, const char *want) {
        json_object *j = NULL;
        ck_assert_int_eq(exit_info_to_json(ei, &j), 0);
        ck_assert_str_eq(json_to_line(j, NULL), want);
        return j;
}

/* An exit.json of text in dir (its path) is refused as malformed. */
static void exit_file_refused(const char *dir, const char *path, const char *text) {
        exit_info rd;
        ck_assert_int_eq(write_file_atomic(path, text, strlen(text), 0600), 0);
        ck_assert_msg(exit_info_read(dir, &rd) == -EBADMSG, "accepted %s", text);
}

START_TEST(test_exit_info) {
        exit_info ei = {.has_exit_code = true, .exit_code = 3, .ended_at_ms = 1764509706026ULL};
        json_object_put(exit_json(&ei, "{\"exitCode\":3,\"signal\":null,\"spawnError\":null,"
                                       "\"endedAt\":\"2025-11-30T13:35:06.026Z\"}"));
        exit_info sig = {.signal = "SIGTERM", .ended_at_ms = 0};
        _cleanup_json_ json_object *j2 = exit_json(&sig, "{\"exitCode\":null,\"signal\":\"SIGTERM\",\"spawnError\":null,"
                                                         "\"endedAt\":\"1970-01-01T00:00:00.000Z\"}");
        exit_info back;
        ck_assert_int_eq(exit_info_from_json(j2, &back), 0);
        ck_assert(!back.has_exit_code);
        ck_assert_str_eq(back.signal, "SIGTERM");
        ck_assert_ptr_null(back.spawn_error);
        exit_info_done(&back);

        /* A temp dir holding an exit.json written the way the shim writes it. */
        char *dir = tf_tmpdir_new("tf-launch-spec");
        exit_info rd;
        ck_assert_int_eq(exit_info_read(dir, &rd), -ENOENT);
        _cleanup_free_ char *path = strdup_printf("%s/exit.json", dir);
        const char *text = "{\"exitCode\":null,\"signal\":null,\"spawnError\":\"bwrap is required\","
                           "\"endedAt\":\"2025-11-30T13:35:06.026Z\"}\n";
        ck_assert_int_eq(write_file_atomic(path, text, strlen(text), 0600), 0);
        ck_assert_int_eq(exit_info_read(dir, &rd), 0);
        ck_assert_str_eq(rd.spawn_error, "bwrap is required");
        ck_assert_uint_eq(rd.ended_at_ms, 1764509706026ULL);
        exit_info_done(&rd);
        exit_file_refused(dir, path,
                          "{\"exitCode\":256,\"signal\":null,\"spawnError\":null,\"endedAt\":\"2025-11-30T13:35:06.026Z\"}");
        exit_file_refused(dir, path,
                          "{\"exitCode\":\"1\",\"signal\":null,\"spawnError\":null,\"endedAt\":\"2025-11-30T13:35:06.026Z\"}");

        /* the shim stopped the worker for its disk use */
        exit_info stop = {.signal = "SIGTERM", .ended_at_ms = 0, .stop_reason = "disk_quota_exceeded",
                          .stop_detail = "the task used more than its disk budget of 50.0 MiB: 51.0 MiB"};
        _cleanup_json_ json_object *j3 =
                exit_json(&stop, "{\"exitCode\":null,\"signal\":\"SIGTERM\",\"spawnError\":null,"
                                 "\"endedAt\":\"1970-01-01T00:00:00.000Z\",\"stopReason\":\"disk_quota_exceeded\","
                                 "\"stopDetail\":\"the task used more than its disk budget of 50.0 MiB: 51.0 MiB\"}");
        exit_info sb2;
        ck_assert_int_eq(exit_info_from_json(j3, &sb2), 0);
        ck_assert_str_eq(sb2.stop_reason, "disk_quota_exceeded");
        ck_assert_str_eq(sb2.stop_detail, "the task used more than its disk budget of 50.0 MiB: 51.0 MiB");
        exit_info_done(&sb2);
        exit_file_refused(dir, path,
                          "{\"exitCode\":null,\"signal\":null,\"spawnError\":null,\"endedAt\":\"2025-11-30T13:35:06.026Z\","
                          "\"stopReason\":\"bored\",\"stopDetail\":null}");
        exit_file_refused(dir, path,
                          "{\"exitCode\":null,\"signal\":null,\"spawnError\":null,\"endedAt\":\"2025-11-30T13:35:06.026Z\","
                          "\"stopReason\":3}");
        /* the shim stopped the worker at a limit (task-limits.h) */
        static const char *const limit_reasons[] = {"memory_limit_exceeded", "tasks_limit_exceeded"};
        for (size_t i = 0; i < ELEMENTSOF(limit_reasons); i++) {
                _cleanup_free_ char *t = strdup_printf("{\"exitCode\":null,\"signal\":\"SIGKILL\",\"spawnError\":null,"
                                                       "\"endedAt\":\"2025-11-30T13:35:06.026Z\",\"stopReason\":\"%s\","
                                                       "\"stopDetail\":\"at its limit\"}",
                                                       limit_reasons[i]);
                _cleanup_json_ json_object *lj = json_tokener_parse(t);
                exit_info li;
                ck_assert_int_eq(exit_info_from_json(lj, &li), 0);
                ck_assert_str_eq(li.stop_reason, limit_reasons[i]);
                exit_info_done(&li);
        }
        tf_tmpdir_free(dir);
}
END_TEST

int main(void) {
        Suite *s = suite_create("launch-spec");
        tf_tcase(s, "spec", NULL, NULL, 0, TF_TESTS(test_exact_json, test_round_trip, test_host_masks, test_check_spec, test_strict_types,
                test_strict_shape, test_strict_disk, test_limits_and_budgets, test_memfd, test_read_pipe_and_garbage));
        tf_tcase(s, "status-files", NULL, NULL, 0, TF_TESTS(test_launch_info, test_exit_info));
        return tf_run_suite(s);
}
