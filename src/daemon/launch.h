#pragma once
/* Launch (launch.c): from an admitted task to its running shim. */

typedef struct Task Task;

/* launch.c (DESIGN.md "Data flow of one dispatch" steps 3–5): env, sandbox,
 * overlay, launch spec, spawn of taskferry-shim. */
/* Launch a task the scheduler admitted: on success it is running and
 * watched (monitor_watch_shim); on failure it is settled as a spawn error. */
void launch_task(Task *t);
/* <state>/prompts/<id>.prompt.txt (malloc'd, NULL on ENOMEM). */
char *task_prompt_file_path(Task *t);
