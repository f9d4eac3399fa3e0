# SPDX-License-Identifier: MIT
"""Stand-in for ComfyUI's comfy package: only what tests/integrations/test_comfyui.py needs."""
