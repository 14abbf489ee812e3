/* A task's network: the decision at dispatch, the policy at launch and the
 * view with the proxy's counts (network.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "core/task.h"
#include "fileio.h"
#include "json-util.h"
#include "launch-spec.h"
#include "macro.h"
#include "path-util.h"
#include "paths.h"
#include "project-config.h"
#include "protocol-keys.h"
#include "run/network.h"
#include "string-util.h"
#include "strv.h"

/* The API hosts of the providers pi and OpenCode know by name. */
static const struct {
        const char *provider;
        const char *hosts[3];
} provider_hosts[] = {
        {"anthropic", {"api.anthropic.com"}},
        {"openai", {"api.openai.com"}},
        {"google", {"generativelanguage.googleapis.com"}},
        {"google-vertex", {"aiplatform.googleapis.com", "oauth2.googleapis.com"}},
        {"openrouter", {"openrouter.ai"}},
        {"groq", {"api.groq.com"}},
        {"mistral", {"api.mistral.ai"}},
        {"xai", {"api.x.ai"}},
        {"deepseek", {"api.deepseek.com"}},
        {"cerebras", {"api.cerebras.ai"}},
        {"zai", {"api.z.ai"}},
        {"moonshotai", {"api.moonshot.ai"}},
        {"github-copilot", {"api.githubcopilot.com", "api.individual.githubcopilot.com"}},
        {"opencode", {"opencode.ai"}},
};

/* The value of var: the dispatch's env, else the daemon's. */
static const char *env_of(json_object *caller_env, const char *var) {
        const char *v = json_get_string(caller_env, var);
        return v ? v : getenv(var);
}

static char *user_dir(Manager *m, json_object *caller_env, const char *var, const char *def) {
        const char *v = env_of(caller_env, var);
        if (v && v[0] == '/') return strdup(v);
        return strdup_printf("%s/%s", m->paths.home, def);
}

/* A small JSON file of the user's (comments allowed: OpenCode's files are
 * JSONC), or NULL. */
static json_object *read_user_json(const char *path) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (!path || read_file(path, 1 << 20, &text, &len) < 0) return NULL;
        return json_tokener_parse(text);
}

/* The baseUrl the user's agent config gives the model's provider (NULL: none). */
static char *config_base_url(Manager *m, const NetworkRequest *rq, const char *provider) {
        if (streq_ptr(rq->executor_id, "pi")) {
                _cleanup_free_ char *dir = user_dir(m, rq->caller_env, "PI_CODING_AGENT_DIR", ".pi/agent");
                _cleanup_free_ char *path = dir ? strdup_printf("%s/models.json", dir) : NULL;
                json_object *j = read_user_json(path);
                const char *u = json_get_string(json_get_object(json_get_object(j, "providers"), provider), "baseUrl");
                char *ret = u ? strdup(u) : NULL;
                json_object_put(j);
                return ret;
        }
        if (streq_ptr(rq->executor_id, "opencode")) {
                _cleanup_free_ char *dir = user_dir(m, rq->caller_env, "XDG_CONFIG_HOME", ".config");
                static const char *const names[] = {"opencode.json", "opencode.jsonc", "config.json"};
                for (size_t i = 0; dir && i < ELEMENTSOF(names); i++) {
                        _cleanup_free_ char *path = strdup_printf("%s/opencode/%s", dir, names[i]);
                        json_object *j = read_user_json(path);
                        json_object *opts = json_get_object(json_get_object(json_get_object(j, PK_provider), provider),
                                                            "options");
                        const char *u = json_get_string(opts, "baseURL");
                        char *ret = u ? strdup(u) : NULL;
                        json_object_put(j);
                        if (ret) return ret;
                }
        }
        return NULL;
}

static int add_rule_text(NetPolicy *p, const char *text) {
        NetRule r = {0};
        const char *why = NULL;
        int k = net_rule_parse(text, &r, &why);
        if (k < 0) return k;
        k = net_policy_add(p, &r);
        net_rule_done(&r);
        return k;
}

/* 1. of network.h: the executor's provider endpoints. A config baseUrl that
 * does not parse is left out (the agent then fails to reach it, and the
 * proxy's 403 names it). */
static int add_executor_defaults(Manager *m, const NetworkRequest *rq, NetPolicy *p) {
        if (!rq || !rq->model || streq_ptr(rq->executor_id, "shell")) return 0;
        const char *slash = strchr(rq->model, '/');
        if (!slash || slash == rq->model) return 0;
        _cleanup_free_ char *provider = strndup(rq->model, (size_t) (slash - rq->model));
        if (!provider) return -ENOMEM;
        int r;
        _cleanup_free_ char *url = config_base_url(m, rq, provider);
        if (url && (r = add_rule_text(p, url)) == -ENOMEM) return r;
        for (size_t i = 0; i < ELEMENTSOF(provider_hosts); i++) {
                if (!streq(provider_hosts[i].provider, provider)) continue;
                for (size_t j = 0; j < ELEMENTSOF(provider_hosts[i].hosts) && provider_hosts[i].hosts[j]; j++)
                        if ((r = add_rule_text(p, provider_hosts[i].hosts[j])) < 0) return r;
        }
        return 0;
}

bool network_repo_trusted(Manager *m, const char *cfg_path) {
        _cleanup_free_ char *repo = cfg_path ? strdup(cfg_path) : NULL;
        char *sl = repo ? strrchr(repo, '/') : NULL;
        if (!sl) return false;
        *sl = 0;
        _cleanup_free_ char *real = realpath(repo, NULL);
        for (char **t = m->settings.trusted_projects; real && t && *t; t++) {
                _cleanup_free_ char *tr = realpath(*t, NULL);
                if (tr && path_is_at_or_below(real, tr)) return true;
        }
        return false;
}

char *network_project_warning(Manager *m, char *const *allow_hosts, const char *cfg_path) {
        if (!allow_hosts || !*allow_hosts || network_repo_trusted(m, cfg_path)) return NULL;
        _cleanup_free_ char *list = NULL;
        size_t n = 0;
        for (char *const *h = allow_hosts; *h; h++, n++) {
                if (n == 16) {
                        char *l = strdup_printf("%s and %zu more", list, strv_length((char **) allow_hosts) - n);
                        free(list);
                        list = l;
                        break;
                }
                char *l = strdup_printf("%s%s%s", strempty(list), list ? ", " : "", *h);
                free(list);
                if (!(list = l)) return NULL;
        }
        return list ? strdup_printf(".taskferry.toml allowHosts: the repository is not trusted (trustedProjects), "
                                    "not allowed: %s", list)
                    : NULL;
}

static int refuse(char **reason, int r, const char *fmt, ...) _printf_(3, 4);
static int refuse(char **reason, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(reason, fmt, ap) < 0) *reason = NULL;
        va_end(ap);
        return *reason ? r : -ENOMEM;
}

/* How much a mode lets out: none < proxy < host. */
static int mode_width(NetMode m) { return m == NET_MODE_NONE ? 0 : m == NET_MODE_PROXY ? 1 : 2; }

static int parent_policy(const Task *parent, NetPolicy *ret) {
        json_object *o = parent->rec.network;
        if (!o) {
                /* a parent from before networks were recorded ran with the host's */
                *ret = (NetPolicy) {.mode = NET_MODE_HOST};
                return 0;
        }
        return net_policy_from_json(o, ret);
}

int network_decide(Manager *m, const NetworkRequest *rq, const Task *parent, json_object **ret_record,
                   char **ret_warning, char **reason) {
        *ret_record = NULL;
        *ret_warning = NULL;
        *reason = NULL;
        NetMode mode = parent ? NET_MODE_PROXY : (NetMode) m->settings.net_mode;
        if (rq && rq->mode) {
                mode = net_mode_from_string(rq->mode);
                if (mode < 0)
                        return refuse(reason, -EINVAL,
                                      "error: --network must be one of proxy, none, host (got \"%s\")\nhelp: proxy "
                                      "(the default) lets the worker reach only the hosts it is allowed; none cuts it "
                                      "off; host shares this machine's network",
                                      rq->mode);
        }
        if (rq && rq->unsandboxed) {
                /* no sandbox, no namespace: the host's network, said as it is */
                if ((rq->mode && !streq(rq->mode, "host")) || rq->allow_hosts)
                        return refuse(reason, -EINVAL,
                                      "error: --network %s and --allow-host need the sandbox, and this dispatch runs "
                                      "without it (--no-sandbox, or sandboxEnabled false)\nhelp: drop --no-sandbox, "
                                      "or drop --network and --allow-host (an unsandboxed worker has this machine's "
                                      "network)",
                                      rq->mode ? rq->mode : "proxy");
                NetPolicy h = {.mode = NET_MODE_HOST};
                int k = net_policy_to_json(&h, ret_record);
                if (k < 0) return k;
                if (!(*ret_warning = strdup("the worker runs without the sandbox and shares this machine's network: it "
                                            "reaches every address it does (loopback services, the local network, the "
                                            "internet)"))) {
                        json_object_put(*ret_record);
                        *ret_record = NULL;
                        return -ENOMEM;
                }
                return 0;
        }
        _cleanup_(net_policy_done) NetPolicy p = {.mode = mode};
        _cleanup_(net_policy_done) NetPolicy pp = {0};
        int r;
        if (parent) {
                if ((r = parent_policy(parent, &pp)) < 0)
                        return refuse(reason, -EINVAL, "error: the network policy of task %s cannot be read\nhelp: "
                                                       "dispatch from outside the sandbox", parent->id);
                if (!rq || !rq->mode) mode = p.mode = pp.mode;
                if (mode_width(mode) > mode_width(pp.mode))
                        return refuse(reason, -EPERM,
                                      "error: a nested dispatch can only narrow its parent's network: task %s runs with "
                                      "--network %s, this dispatch asked for --network %s\nhelp: omit --network to "
                                      "inherit it, or dispatch from outside the sandbox",
                                      parent->id, net_mode_to_string(pp.mode), net_mode_to_string(mode));
                for (size_t i = 0; i < pp.n_rules; i++)
                        if ((r = net_policy_add(&p, &pp.rules[i])) < 0) return r == -ENOMEM ? r : refuse(reason, r, "error: too many allowed hosts");
        } else {
                if ((r = add_executor_defaults(m, rq, &p)) == -ENOMEM) return r;
                const char *bad = NULL, *why = NULL;
                if ((r = net_policy_add_strv(&p, m->settings.allow_hosts, &bad, &why)) == -ENOMEM) return r;
                /* what a trusted repository asks for (an untrusted one's: its warning) */
                ProjectConfig cfg = {0};
                if (rq && rq->directory && project_config_load(rq->directory, &cfg) >= 0 && cfg.allow_hosts &&
                    network_repo_trusted(m, cfg.path))
                        r = net_policy_add_strv(&p, cfg.allow_hosts, &bad, &why);
                project_config_done(&cfg);
                if (r == -ENOMEM) return r;
        }
        if (rq && rq->allow_hosts) {
                _cleanup_(net_policy_done) NetPolicy asked = {.mode = mode};
                const char *bad = NULL, *why = NULL;
                r = net_policy_add_strv(&asked, rq->allow_hosts, &bad, &why);
                if (r == -ENOMEM) return r;
                if (r == -E2BIG)
                        return refuse(reason, -EINVAL, "error: --allow-host names more than %d hosts\nhelp: use a "
                                                       "wildcard (*.example.com) for many hosts of one domain",
                                      NET_POLICY_MAX_RULES);
                if (r < 0)
                        return refuse(reason, -EINVAL,
                                      "error: --allow-host %s: %s\nhelp: give a host name, *.domain or an IP address, "
                                      "optionally with :port (443 by default)",
                                      strempty(bad), strempty(why));
                if (mode != NET_MODE_PROXY)
                        return refuse(reason, -EINVAL,
                                      "error: --allow-host applies to --network proxy only (this dispatch runs with "
                                      "--network %s)\nhelp: drop --allow-host, or use --network proxy",
                                      net_mode_to_string(mode));
                const NetRule *out = NULL;
                if (parent && !net_policy_covers(&pp, &asked, &out)) {
                        _cleanup_free_ char *h = out ? net_rule_to_string(out) : NULL;
                        return refuse(reason, -EPERM,
                                      "error: a nested dispatch can only narrow its parent's network: task %s does not "
                                      "allow %s\nhelp: ask for hosts the dispatching task may reach, or dispatch from "
                                      "outside the sandbox",
                                      parent->id, strempty(h));
                }
                if (parent) {
                        /* narrowed to exactly what it asked for */
                        net_policy_done(&p);
                        p = (NetPolicy) {.mode = mode};
                }
                for (size_t i = 0; i < asked.n_rules; i++)
                        if ((r = net_policy_add(&p, &asked.rules[i])) < 0)
                                return r == -ENOMEM ? r
                                                    : refuse(reason, -EINVAL,
                                                             "error: more than %d allowed hosts in all\nhelp: use "
                                                             "wildcards (*.example.com) for many hosts of one domain",
                                                             NET_POLICY_MAX_RULES);
        }
        if (mode != NET_MODE_PROXY) {
                /* no list where nothing is filtered or nothing goes out */
                net_policy_done(&p);
                p = (NetPolicy) {.mode = mode};
        }
        if ((r = net_policy_to_json(&p, ret_record)) < 0) return r;
        if (mode == NET_MODE_HOST &&
            !(*ret_warning = strdup("--network host: the worker shares this machine's network and reaches every "
                                    "address it does (loopback services, the local network, the internet)"))) {
                json_object_put(*ret_record);
                *ret_record = NULL;
                return -ENOMEM;
        }
        return 0;
}

int network_policy_of(Task *t, NetPolicy *ret) {
        *ret = (NetPolicy) {0};
        if (t->rec.network) return net_policy_from_json(t->rec.network, ret);
        NetworkRequest rq = {.executor_id = t->rec.executor_id, .model = t->rec.model};
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *warning = NULL, *reason = NULL;
        int r = network_decide(t->m, &rq, NULL, &o, &warning, &reason);
        if (r < 0) return r;
        return net_policy_from_json(o, ret);
}

json_object *network_view(Task *t) {
        if (!t->rec.network) return NULL;
        _cleanup_json_ json_object *v = json_copy(t->rec.network);
        if (!v) return NULL;
        _cleanup_free_ char *dir = tf_path_task_dir(&t->m->paths, t->id);
        _cleanup_free_ char *path = dir ? strdup_printf("%s/%s", dir, NETWORK_JSON_NAME) : NULL;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        _cleanup_json_ json_object *stats = NULL;
        if (path && read_file(path, 4 << 20, &text, &len) >= 0) (void) json_parse_strict(text, len, &stats);
        static const char *const lists[] = {"allowed", "denied"};
        for (size_t i = 0; i < ELEMENTSOF(lists); i++) {
                json_object *a = json_get_array(stats, lists[i]);
                if (json_add(v, lists[i], a ? json_object_get(a) : json_object_new_array()) < 0) return NULL;
        }
        return TAKE_PTR(v);
}
