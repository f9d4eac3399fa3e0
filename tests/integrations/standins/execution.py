# SPDX-License-Identifier: MIT
"""Stand-in for ComfyUI's execution.py: PromptExecutor.execute, which runs one prompt.

Signature as in ComfyUI (execute(self, prompt, prompt_id, extra_data={}, execute_outputs=[]),
unchanged from 2023 to 2026; later versions run execute_async inside it). Here a prompt is a
list of callables, each standing for one node's work, run in order.
"""


class PromptExecutor:
    def __init__(self, server=None, cache_type=False, cache_args=None):
        self.server = server

    def execute(self, prompt, prompt_id, extra_data={}, execute_outputs=[]):
        for node in prompt:
            node()
