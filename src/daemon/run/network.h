#pragma once
/* A task's network (net-policy.h): decided once at dispatch, kept on the
 * record as `network` {"mode", "allow": ["host:port", ...]}, handed to the
 * shim in the launch spec, and shown with the proxy's counts.
 *
 * The mode: the dispatch's `network` param, else the daemon's (settings
 * net_mode: TASKFERRY_NETWORK, config network.mode), else "proxy". The
 * allowed hosts, in this order, each once:
 *  1. the executor's provider endpoints: the well-known API host of the
 *     model's provider ("anthropic/..." → api.anthropic.com:443), and the
 *     baseUrl the user's own agent config gives that provider (pi's
 *     models.json, OpenCode's opencode.json provider.<id>.options.baseURL;
 *     never a repository's config);
 *  2. the daemon's allowHosts (TASKFERRY_ALLOW_HOSTS, config network.allowHosts);
 *  3. the project file's allowHosts (project-config.h), only for a
 *     repository the user trusts (trustedProjects, as for its roBind; an
 *     untrusted one's are named in projectConfigWarning, network_project_warning);
 *  4. the dispatch's allowHosts (--allow-host).
 * A nested dispatch (parent: the dispatching task) may only narrow: its
 * mode is the parent's or "none" (host from proxy or none is refused, proxy
 * from none too), it starts from the parent's hosts and its own allowHosts
 * must each be allowed by the parent's (net_policy_covers).
 * Mode "host" carries networkWarning (the worker reaches every address the
 * user's machine reaches). An unsandboxed worker has the host's network:
 * it is recorded as mode "host" with its warning, and a dispatch that asks
 * for proxy or none (or for hosts) with it is refused. */

#include <json-c/json.h>
#include <stdbool.h>

#include "net-policy.h"

typedef struct Manager Manager;
typedef struct Task Task;

typedef struct NetworkRequest {
        const char *mode;          /* the dispatch's network param; NULL: the default */
        const char *directory;     /* the dispatch directory: its project file's allowHosts (NULL: none) */
        char *const *allow_hosts;  /* the dispatch's allowHosts (NULL: none) */
        const char *executor_id, *model;
        json_object *caller_env;   /* the dispatch's env (PI_CODING_AGENT_DIR, XDG_CONFIG_HOME); may be NULL */
        bool unsandboxed;          /* the worker runs without the sandbox (--no-sandbox, sandboxEnabled false) */
} NetworkRequest;

/* The record's `network` object in *ret_record and the networkWarning text
 * (NULL: none) in *ret_warning. parent: the dispatching task, or NULL.
 * -EINVAL / -EPERM with *reason ("error: ...\nhelp: ..."), -ENOMEM. */
int network_decide(Manager *m, const NetworkRequest *rq, const Task *parent, json_object **ret_record,
                   char **ret_warning, char **reason);

/* Is the repository holding the project file cfg_path trusted (one of
 * settings trusted_projects, resolved, is it or above it)? */
bool network_repo_trusted(Manager *m, const char *cfg_path);
/* The projectConfigWarning part for hosts an untrusted repository's project
 * file asks for: ".taskferry.toml allowHosts: the repository is not
 * trusted, not allowed: a, b" (malloc'd), or NULL (none, or trusted; also
 * on ENOMEM). */
char *network_project_warning(Manager *m, char *const *allow_hosts, const char *cfg_path);

/* The policy of t's record; a record from before networks were recorded
 * gets the default decision now (network_decide with no request). -errno. */
int network_policy_of(Task *t, NetPolicy *ret);

/* The `network` a status shows: the record's mode and allow list, and the
 * proxy's allowed/denied counts from <task dir>/network.json (empty lists
 * while there are none). NULL: no network recorded (an unsandboxed task). */
json_object *network_view(Task *t);
