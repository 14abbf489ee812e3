/* A task's network decided at dispatch (src/daemon/run/network.h): the
 * mode's sources, the executor's provider endpoints (the well-known host and
 * the user's own agent config, never a repository's), the daemon's and the
 * dispatch's hosts, the refusals of bad input, and a nested dispatch that
 * may only narrow its parent's network. */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/manager.h"
#include "core/task.h"
#include "daemon-fixture.h"
#include "fileio.h"
#include "fs-util.h"
#include "json-util.h"
#include "macro.h"
#include "run/network.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

static Manager m;

static void setup(void) {
        tf_manager_setup(&m, "network");
        m.paths.home = strdup_printf("%s/home", m.paths.state_dir);
        ck_assert_int_eq(mkdir(m.paths.home, 0700), 0);
        m.settings.net_mode = NET_MODE_PROXY;
}

static void teardown(void) {
        strv_free(m.settings.allow_hosts);
        m.settings.allow_hosts = NULL;
        free(m.paths.home);
        m.paths.home = NULL;
        tf_manager_teardown(&m);
}

/* The decision's record as one line, or "error: ..." */
static char *decide(const NetworkRequest *rq, const Task *parent, char **warning) {
        json_object *rec = NULL;
        char *w = NULL, *reason = NULL;
        int r = network_decide(&m, rq, parent, &rec, &w, &reason);
        char *out = r < 0 ? strdup(strempty(reason)) : strdup(json_to_line(rec, NULL));
        json_object_put(rec);
        free(reason);
        if (warning) *warning = w;
        else free(w);
        return out;
}

static void put(const char *rel, const char *text) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", m.paths.home, rel);
        _cleanup_free_ char *d = strdup(p);
        *strrchr(d, '/') = 0;
        ck_assert_int_eq(mkdir_p(d, 0700), 0);
        tf_write_file(p, text, strlen(text), 0600);
}

START_TEST(defaults) {
        /* pi with an anthropic model: its API host, nothing else */
        NetworkRequest rq = {.executor_id = "pi", .model = "anthropic/claude-x"};
        _cleanup_free_ char *w = NULL;
        _cleanup_free_ char *a = decide(&rq, NULL, &w);
        ck_assert_str_eq(a, "{\"mode\":\"proxy\",\"allow\":[\"api.anthropic.com:443\"]}");
        ck_assert_ptr_null(w);
        /* a shell worker: nothing */
        NetworkRequest sh = {.executor_id = "shell"};
        _cleanup_free_ char *b = decide(&sh, NULL, NULL);
        ck_assert_str_eq(b, "{\"mode\":\"proxy\",\"allow\":[]}");
        /* the user's pi models.json names the provider's baseUrl (a local server) */
        put(".pi/agent/models.json", "{\"providers\":{\"local\":{\"baseUrl\":\"http://127.0.0.1:11434/v1\"},"
                                     "\"other\":{\"baseUrl\":\"https://other.example.com\"}}}");
        NetworkRequest lo = {.executor_id = "pi", .model = "local/llama"};
        _cleanup_free_ char *c = decide(&lo, NULL, NULL);
        ck_assert_str_eq(c, "{\"mode\":\"proxy\",\"allow\":[\"127.0.0.1:11434\"]}");
        /* OpenCode's opencode.json (JSONC: comments allowed) */
        put(".config/opencode/opencode.json",
            "// mine\n{\"provider\":{\"openai\":{\"options\":{\"baseURL\":\"https://gw.example.org:8443/v1\"}}}}");
        NetworkRequest oc = {.executor_id = "opencode", .model = "openai/gpt-x"};
        _cleanup_free_ char *d = decide(&oc, NULL, NULL);
        ck_assert_str_eq(d, "{\"mode\":\"proxy\",\"allow\":[\"gw.example.org:8443\",\"api.openai.com:443\"]}");
        /* the daemon's hosts, then the dispatch's, each once */
        ck_assert_int_eq(strv_push(&m.settings.allow_hosts, "pypi.org"), 0);
        char *hosts[] = {"*.github.com", "pypi.org", "10.0.0.5:5432", NULL};
        NetworkRequest more = {.executor_id = "shell", .allow_hosts = hosts};
        _cleanup_free_ char *e = decide(&more, NULL, NULL);
        ck_assert_str_eq(e, "{\"mode\":\"proxy\",\"allow\":[\"pypi.org:443\",\"*.github.com:443\",\"10.0.0.5:5432\"]}");
}
END_TEST

START_TEST(modes) {
        NetworkRequest none = {.mode = "none", .executor_id = "pi", .model = "anthropic/x"};
        _cleanup_free_ char *a = decide(&none, NULL, NULL);
        ck_assert_str_eq(a, "{\"mode\":\"none\",\"allow\":[]}");
        _cleanup_free_ char *w = NULL;
        NetworkRequest host = {.mode = "host"};
        _cleanup_free_ char *b = decide(&host, NULL, &w);
        ck_assert_str_eq(b, "{\"mode\":\"host\",\"allow\":[]}");
        ck_assert_ptr_nonnull(w);
        ck_assert_ptr_nonnull(strstr(w, "--network host"));
        /* the daemon's default mode */
        m.settings.net_mode = NET_MODE_NONE;
        NetworkRequest dflt = {.executor_id = "shell"};
        _cleanup_free_ char *c = decide(&dflt, NULL, NULL);
        ck_assert_str_eq(c, "{\"mode\":\"none\",\"allow\":[]}");
}
END_TEST

START_TEST(bad_input) {
        NetworkRequest bad_mode = {.mode = "open"};
        _cleanup_free_ char *a = decide(&bad_mode, NULL, NULL);
        ck_assert(startswith(a, "error: --network must be one of proxy, none, host"));
        /* a worker-controlled host with a NUL, a space, a wildcard over a TLD */
        static char *const bad[][2] = {{"evil host", NULL}, {"*.com", NULL}, {"*", NULL}, {"a.b:0", NULL},
                                      {"a.b:99999", NULL}, {"https://u@a.b", NULL}};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                NetworkRequest rq = {.allow_hosts = (char **) bad[i]};
                _cleanup_free_ char *r = decide(&rq, NULL, NULL);
                ck_assert_msg(startswith(r, "error: --allow-host "), "%s: %s", bad[i][0], r);
                ck_assert_ptr_nonnull(strstr(r, "\nhelp: "));
        }
        /* hosts with a mode that filters nothing or lets nothing out */
        char *one[] = {"a.example.com", NULL};
        NetworkRequest rq = {.mode = "none", .allow_hosts = one};
        _cleanup_free_ char *b = decide(&rq, NULL, NULL);
        ck_assert(startswith(b, "error: --allow-host applies to --network proxy only"));
        /* more hosts than a policy holds */
        char *many[NET_POLICY_MAX_RULES + 2];
        for (int i = 0; i <= NET_POLICY_MAX_RULES; i++) many[i] = strdup_printf("h%d.example.com", i);
        many[NET_POLICY_MAX_RULES + 1] = NULL;
        NetworkRequest big = {.allow_hosts = many};
        _cleanup_free_ char *c = decide(&big, NULL, NULL);
        ck_assert_msg(startswith(c, "error: --allow-host names more than"), "%s", c);
        for (int i = 0; i <= NET_POLICY_MAX_RULES; i++) free(many[i]);
}
END_TEST

START_TEST(nested_only_narrows) {
        Task *parent = tf_task(&m, "{\"id\":\"oc_p\",\"status\":\"running\",\"network\":{\"mode\":\"proxy\",\"allow\":"
                                   "[\"api.anthropic.com:443\",\"*.example.com:443\"]}}");
        /* nothing asked: the parent's network */
        NetworkRequest plain = {.executor_id = "pi", .model = "openai/x"};
        _cleanup_free_ char *a = decide(&plain, parent, NULL);
        ck_assert_str_eq(a, "{\"mode\":\"proxy\",\"allow\":[\"api.anthropic.com:443\",\"*.example.com:443\"]}");
        /* host from a proxy parent: refused */
        NetworkRequest host = {.mode = "host"};
        _cleanup_free_ char *b = decide(&host, parent, NULL);
        ck_assert_msg(strstr(b, "can only narrow"), "%s", b);
        /* none is narrower: fine */
        NetworkRequest none = {.mode = "none"};
        _cleanup_free_ char *c = decide(&none, parent, NULL);
        ck_assert_str_eq(c, "{\"mode\":\"none\",\"allow\":[]}");
        /* a host the parent allows: exactly that */
        char *sub[] = {"docs.example.com", NULL};
        NetworkRequest narrow = {.allow_hosts = sub};
        _cleanup_free_ char *d = decide(&narrow, parent, NULL);
        ck_assert_str_eq(d, "{\"mode\":\"proxy\",\"allow\":[\"docs.example.com:443\"]}");
        /* one it does not (another port, another name): refused, named */
        static char *const wider[][2] = {{"docs.example.com:80", NULL}, {"example.com", NULL}, {"evil.test", NULL}};
        for (size_t i = 0; i < ELEMENTSOF(wider); i++) {
                NetworkRequest rq = {.allow_hosts = (char **) wider[i]};
                _cleanup_free_ char *r = decide(&rq, parent, NULL);
                ck_assert_msg(strstr(r, "can only narrow") && strstr(r, "does not allow"), "%s: %s", wider[i][0], r);
        }
        /* the daemon's own hosts do not widen a nested task's */
        ck_assert_int_eq(strv_push(&m.settings.allow_hosts, "pypi.org"), 0);
        _cleanup_free_ char *e = decide(&plain, parent, NULL);
        ck_assert(!strstr(e, "pypi.org"));
        /* a none parent: proxy is wider */
        Task *off = tf_task(&m, "{\"id\":\"oc_n\",\"status\":\"running\",\"network\":{\"mode\":\"none\"}}");
        NetworkRequest proxy = {.mode = "proxy"};
        _cleanup_free_ char *f = decide(&proxy, off, NULL);
        ck_assert_msg(strstr(f, "can only narrow"), "%s", f);
}
END_TEST

START_TEST(policy_of_and_view) {
        Task *t = tf_task(&m, "{\"id\":\"oc_v\",\"status\":\"done\",\"network\":{\"mode\":\"proxy\",\"allow\":"
                              "[\"api.anthropic.com:443\"]}}");
        NetPolicy p = {0};
        ck_assert_int_eq(network_policy_of(t, &p), 0);
        ck_assert_int_eq(p.mode, NET_MODE_PROXY);
        ck_assert_uint_eq(p.n_rules, 1);
        net_policy_done(&p);
        /* no counts yet: empty lists */
        _cleanup_json_ json_object *v = network_view(t);
        ck_assert_str_eq(json_to_line(v, NULL), "{\"mode\":\"proxy\",\"allow\":[\"api.anthropic.com:443\"],"
                                                "\"allowed\":[],\"denied\":[]}");
        /* the proxy's file */
        _cleanup_free_ char *dir = strdup_printf("%s/tasks/oc_v", m.paths.state_dir);
        ck_assert_int_eq(mkdir_p(dir, 0700), 0);
        _cleanup_free_ char *f = strdup_printf("%s/network.json", dir);
        const char *stats = "{\"mode\":\"proxy\",\"allowed\":[{\"host\":\"api.anthropic.com\",\"port\":443,"
                            "\"connections\":2,\"bytesUp\":10,\"bytesDown\":20}],\"denied\":[{\"host\":\"evil.test\","
                            "\"port\":443,\"reason\":\"not allowed\",\"count\":1}]}";
        tf_write_file(f, stats, strlen(stats), 0600);
        _cleanup_json_ json_object *v2 = network_view(t);
        ck_assert_ptr_nonnull(strstr(json_to_line(v2, NULL), "\"connections\":2"));
        ck_assert_ptr_nonnull(strstr(json_to_line(v2, NULL), "\"evil.test\""));
        /* a damaged file: the lists stay empty */
        tf_write_file(f, "{\"allowed\":[", 12, 0600);
        _cleanup_json_ json_object *v3 = network_view(t);
        ck_assert_ptr_nonnull(strstr(json_to_line(v3, NULL), "\"allowed\":[],\"denied\":[]"));
        /* a record from before networks were recorded: the default decision */
        Task *old = tf_task(&m, "{\"id\":\"oc_o\",\"status\":\"queued\",\"executorId\":\"pi\",\"model\":\"openai/x\"}");
        ck_assert_int_eq(network_policy_of(old, &p), 0);
        ck_assert_int_eq(p.mode, NET_MODE_PROXY);
        ck_assert_uint_eq(p.n_rules, 1);
        ck_assert_str_eq(p.rules[0].host, "api.openai.com");
        net_policy_done(&p);
        ck_assert_ptr_null(network_view(old));
}
END_TEST

/* An unsandboxed worker has the host's network: recorded so, warned, and
 * a dispatch asking for proxy, none or hosts with it refused */
START_TEST(unsandboxed_is_host) {
        _cleanup_free_ char *w = NULL;
        NetworkRequest plain = {.executor_id = "pi", .model = "anthropic/x", .unsandboxed = true};
        _cleanup_free_ char *a = decide(&plain, NULL, &w);
        ck_assert_str_eq(a, "{\"mode\":\"host\",\"allow\":[]}");
        ck_assert_ptr_nonnull(w);
        ck_assert_ptr_nonnull(strstr(w, "without the sandbox"));
        NetworkRequest host = {.mode = "host", .unsandboxed = true};
        _cleanup_free_ char *b = decide(&host, NULL, NULL);
        ck_assert_str_eq(b, "{\"mode\":\"host\",\"allow\":[]}");
        static const char *const narrow[] = {"none", "proxy"};
        for (size_t i = 0; i < ELEMENTSOF(narrow); i++) {
                NetworkRequest rq = {.mode = narrow[i], .unsandboxed = true};
                _cleanup_free_ char *r = decide(&rq, NULL, NULL);
                ck_assert_msg(startswith(r, "error: --network ") && strstr(r, "need the sandbox"), "%s", r);
        }
        char *one[] = {"pypi.org", NULL};
        NetworkRequest hosts = {.allow_hosts = one, .unsandboxed = true};
        _cleanup_free_ char *c = decide(&hosts, NULL, NULL);
        ck_assert_msg(strstr(c, "need the sandbox"), "%s", c);
}
END_TEST

/* A repository's .taskferry.toml may ask for hosts: they apply only when
 * the user's config trusts it, and an untrusted one's are named */
START_TEST(project_hosts_need_trust) {
        _cleanup_free_ char *repo = strdup_printf("%s/src/repo", m.paths.home);
        ck_assert_int_eq(mkdir_p(repo, 0700), 0);
        _cleanup_free_ char *cfg = strdup_printf("%s/.taskferry.toml", repo);
        const char *toml = "allowHosts = [\"registry.npmjs.org\", \"*.pythonhosted.org\"]\n";
        tf_write_file(cfg, toml, strlen(toml), 0644);
        NetworkRequest rq = {.executor_id = "shell", .directory = repo};
        _cleanup_free_ char *a = decide(&rq, NULL, NULL);
        ck_assert_str_eq(a, "{\"mode\":\"proxy\",\"allow\":[]}");
        _cleanup_free_ char *w = network_project_warning(&m, (char *[]) {"registry.npmjs.org", "*.pythonhosted.org", NULL},
                                                         cfg);
        ck_assert_str_eq(w, ".taskferry.toml allowHosts: the repository is not trusted (trustedProjects), not allowed: "
                            "registry.npmjs.org, *.pythonhosted.org");
        /* trusted through a parent dir */
        _cleanup_free_ char *src = strdup_printf("%s/src", m.paths.home);
        ck_assert_int_eq(strv_push(&m.settings.trusted_projects, src), 0);
        _cleanup_free_ char *b = decide(&rq, NULL, NULL);
        ck_assert_str_eq(b, "{\"mode\":\"proxy\",\"allow\":[\"registry.npmjs.org:443\",\"*.pythonhosted.org:443\"]}");
        ck_assert_ptr_null(network_project_warning(&m, (char *[]) {"registry.npmjs.org", NULL}, cfg));
        /* a sibling of a trusted dir's name is not below it */
        strv_free(m.settings.trusted_projects);
        m.settings.trusted_projects = NULL;
        _cleanup_free_ char *prefix = strdup_printf("%s/sr", m.paths.home);
        ck_assert_int_eq(strv_push(&m.settings.trusted_projects, prefix), 0);
        ck_assert(!network_repo_trusted(&m, cfg));
        strv_free(m.settings.trusted_projects);
        m.settings.trusted_projects = NULL;
}
END_TEST

TF_MAIN("network", "decide", setup, teardown, 30, defaults, modes, bad_input, nested_only_narrows, policy_of_and_view,
        project_hosts_need_trust, unsandboxed_is_host)
