"""An Ansible callback for make molecule: at the end of each playbook, its slowest tasks (wall seconds from
a task's start to the next task's start, over all hosts), so a scenario's time can be read from its log.

Enabled by mk/ansible.mk (ANSIBLE_CALLBACK_PLUGINS, ANSIBLE_CALLBACKS_ENABLED); it adds lines to the
output, it changes nothing that runs.
"""

from __future__ import annotations

import time
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: task_seconds
    type: aggregate
    short_description: the slowest tasks of each playbook, at its end
    description: Wall seconds per task (start to the next task's start), the slowest printed at the end.
"""

SHOWN = 12


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_seconds"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._started = time.monotonic()
        self._current: tuple[str, float] | None = None
        self._seconds: dict[str, float] = {}

    def _close(self) -> None:
        if self._current is not None:
            name, at = self._current
            self._seconds[name] = self._seconds.get(name, 0.0) + time.monotonic() - at
            self._current = None

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._close()
        self._current = (f"{task.get_name()}", time.monotonic())

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self.v2_playbook_on_task_start(task, False)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._close()
        total = time.monotonic() - self._started
        self._display.display(f"TASK SECONDS: playbook {total:.0f} s; slowest tasks:")
        for name, seconds in sorted(self._seconds.items(), key=lambda kv: -kv[1])[:SHOWN]:
            self._display.display(f"  {seconds:7.1f} s  {name}")
