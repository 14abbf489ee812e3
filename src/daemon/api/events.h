#pragma once
/* Subscriptions and events (events.c): event.subscribe and the task.state /
 * task.activity events. Owns Manager.events, Task.event_status and every
 * Subscription.
 *
 * A subscription turns nothing off on its connection: responses and events
 * interleave on it, and an event may come before the response of the
 * request that caused it. It lives until the connection closes (no
 * unsubscribe, no replay of past events).
 *
 * task.state: one per actual status change per task (deduplicated against
 * the last status emitted for it), never for internal tasks, keys
 *   sequence, type, taskId, directory, originSessionId, status,
 *   previousStatus, occurredAt, activity (null), outputWatermark (null).
 * It comes from the task observer (task.h): every transition, plus the first
 * "queued" of a new task (its `added`: creation is no transition).
 *
 * Delivery: a subscription matches if it is ALL or the event's directory
 * is in its workspace (string-equal, or the same git workspace root,
 * memoized per daemon), unless both originSessionIds are set and differ.
 *
 * Who may see what (peer.h): a caller inside a task sandbox, whatever scope
 * it asks for, gets only the events of its own task and of the tasks it
 * dispatched (the same rule as task.status and task.list for it); it may
 * name only such a task as taskId (else UNKNOWN_TASK) and may not ask for
 * summaries (they spend model calls: the user's decision, REQUEST_FAILED).
 *
 * Back-pressure: events are written into the connection's outbound buffer,
 * never blocking (server.c). While a subscriber does not read, its unsent
 * bytes are bounded by the connection's outbound budget (1 MiB): an event
 * that does not fit is dropped and replaced by the protocol's id-null
 * RESPONSE_TOO_LARGE "event dropped: response too large" frame (when even
 * that does not fit the connection is closed), and the subscription ends
 * there: its stream has a gap, and the reference client treats that frame
 * as fatal anyway. The connection itself survives the degrade. So a
 * never-reading subscriber costs at most 1 MiB plus its record, the daemon
 * never waits for it and stops working for it at the first drop.
 * At most EVENTS_MAX_PER_CONNECTION subscriptions per connection,
 * EVENTS_MAX_PER_TASK over all connections of one task's own socket, and
 * EVENTS_MAX_SUBSCRIPTIONS over the user's socket (REQUEST_FAILED beyond):
 * workers cannot use up the user's share. */

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

#include "api/methods.h"

typedef struct Manager Manager;
typedef struct Connection Connection;
typedef struct Task Task;
typedef struct Request Request;
typedef struct Events Events;
typedef struct Subscription Subscription;

#define EVENTS_MAX_PER_CONNECTION 64
#define EVENTS_MAX_PER_TASK 64
#define EVENTS_MAX_SUBSCRIPTIONS 4096

/* Create m->events and register the task-state observer. Call before
 * manager_load_tasks (so the load's queued/running → unknown moves count
 * as emitted). 0, -ENOMEM. */
int events_init(Manager *m);
/* Drop every subscription and the state (shutdown). */
void events_free(Manager *m);


/* The connection closed: forget its subscriptions (server.c calls it). */
void events_drop_connection(Connection *c);

/* The task.state event of t moving to status `status` from `previous`
 * (previous < 0: null), with the next sequence number. A new object, NULL
 * on ENOMEM. Exposed for tests. */
json_object *events_state_event(Manager *m, Task *t, int status, int previous);

/* Send event (borrowed) to every matching subscription; for task.activity
 * events with an "activityVariants" object each subscriber gets the variant
 * of its summaries flag (none: not sent) merged into the event, the variant
 * key itself removed. Returns the number of subscriptions reached. */
unsigned events_broadcast(Manager *m, Task *t, json_object *event);

/* The next sequence number (daemon lifetime, shared by state and activity
 * events). */
uint64_t events_next_sequence(Manager *m);
/* Is at least one subscription asking for summaries (summaries:true)? */
bool events_have_summary_subscriber(Manager *m);
/* Number of live subscriptions (tests, stats). */
unsigned events_count(Manager *m);

/* event.subscribe (handlers' signature, methods.h). */
int method_subscribe(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
